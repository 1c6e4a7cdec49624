package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// handleDescribeProducers (key 61, v0, KIP-664) lists each asked
// partition's active idempotent and transactional producers, from the
// producer state replicated with the partition's records, answered by the
// partition's leader: its producer id and epoch, its last sequence and
// when its last batch was appended, and the first offset of its
// transaction still open there (-1: none), which is what holds the
// partition's last stable offset back. A producer whose state expired
// (QUEEN_KAFKA_DEDUP_WINDOW_SECONDS) but whose transaction is still open
// in the partition is listed too, with sequence and time -1: that is a
// hanging transaction. Coordinator epochs are not kept (-1). A partition
// of an internal topic has no producers. A leader not yet caught up with
// its term answers a retriable error rather than a state that may trail.
func (b *Broker) handleDescribeProducers(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	tenant := b.tenantOf(c)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		b.catchUpUnknown(ctx, tenant, t.Topic, len(t.Partitions), func(i int) int32 { return t.Partitions[i] })
		for _, index := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = index
			producers, err := b.partitionProducers(tenant, t.Topic, index)
			rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
			for _, p := range producers {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = p.ProducerID, int32(p.Epoch)
				ap.LastSequence, ap.LastTimestamp = p.LastSeq, p.LastMs
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = -1, p.TxnStart
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// partitionProducers is what a partition's leader knows of its producers;
// this node must lead the raft group holding it.
func (b *Broker) partitionProducers(tenant wire.ID, topic string, index int32) ([]storage.ActiveProducer, error) {
	if isInternalTopic(topic) {
		groups := internalTopicGroups(b.engine, tenant)
		if index < 0 || int(index) >= len(groups) {
			return nil, wire.ErrPartitionNotFound
		}
		_, _, err := b.leading(groups[index], -1)
		return nil, err
	}
	p, ok := b.partition(tenant, topic, index)
	if !ok {
		return nil, wire.ErrPartitionNotFound
	}
	_, caughtUp, err := b.leading(p.group, -1)
	if err != nil {
		return nil, err
	}
	if !caughtUp {
		// A leader just elected may not have applied its predecessor's
		// last entries yet: its producers' sequences and open
		// transactions could trail what was acknowledged. Kafka's clients
		// retry NOT_LEADER_OR_FOLLOWER (OFFSET_NOT_AVAILABLE, ListOffsets'
		// answer in that window, is not one this API's callers expect).
		return nil, fmt.Errorf("%w: just elected, still applying what its predecessor committed", errNotLeader)
	}
	return p.Store().KafkaProducers(p.Partition), nil
}
