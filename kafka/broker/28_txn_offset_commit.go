package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// handleTxnOffsetCommit stages consumer-group offsets in the producer's
// transaction; they become the group's positions only if it commits,
// atomically with its records, so OffsetFetch never sees them early.
// The group generation (v3) is not checked against the group's membership:
// the commit is fenced by the producer epoch.
func (b *Broker) handleTxnOffsetCommit(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	tenant := b.tenantOf(c)
	key := txnKey{tenant, req.TransactionalID}
	var s *staged
	err := errNotTxnCoordinator
	if b.coordinatesTxn(tenant, req.TransactionalID) {
		if s = b.txns.current(key); s == nil {
			_, err = b.txns.durable(key, req.ProducerID, req.ProducerEpoch)
			if err == nil {
				err = errTxnLost
			}
		} else if s.producerID != req.ProducerID || s.epoch != req.ProducerEpoch {
			err = wire.ErrFenced
		} else {
			err = nil
		}
	}
	if err != nil {
		return kafka.ErrorResponse(req, coordinatorCode(err)), nil
	}
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		topic, ok := b.engine.KafkaTopic(tenant, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case !s.groups[req.Group] || s.ending.Load():
				rp.ErrorCode = coordinatorCode(errTxnState)
			case !ok || p.Partition < 0 || int(p.Partition) >= topic.Partitions || p.Offset < 0:
				rp.ErrorCode = coordinatorCode(wire.ErrPartitionNotFound)
			default:
				meta := ""
				if p.Metadata != nil {
					meta = *p.Metadata
				}
				s.offsets[offsetKey{req.Group, t.Topic, p.Partition}] = wire.TxnOffset{Group: req.Group, Queue: t.Topic,
					PartitionIndex: uint32(p.Partition), Offset: uint64(p.Offset), Metadata: meta}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
