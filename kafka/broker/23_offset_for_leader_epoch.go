package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// OffsetForLeaderEpoch (key 23), v0–v4: where the log of a leader epoch
// ends, which consumers ask after a leader change to check that the
// records they read were not truncated away (KIP-101, KIP-320).
//
// A partition's leader epoch is its raft group's term. Raft never
// truncates a committed entry and consumers read only committed records,
// so no position a consumer holds can lie past the log's end: for any
// epoch up to the current one the answer is that epoch, ending at the
// high-water mark, which tells the client nothing was lost. Queen keeps no
// per-partition history of where each term began, so it cannot answer the
// exact end of an older epoch; that exact answer only ever moves a client
// back when a log was truncated, which here cannot happen
// (docs/decisions.md). An epoch newer than the current one is unknown
// (UNDEFINED_EPOCH, -1/-1, as Kafka answers).
//
// Answering this key is also what makes franz-go track leader epochs at
// all: it ignores the epochs in Metadata from a broker without it, and
// with them ignores the leader hints of produce v10.
func (b *Broker) handleOffsetForLeaderEpoch(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	tenant := b.tenantOf(c)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		b.catchUpUnknown(ctx, tenant, t.Topic, len(t.Partitions), func(i int) int32 { return t.Partitions[i].Partition })
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.EndOffset = p.Partition, -1, -1
			if err := b.epochEnd(tenant, t.Topic, p, &rp); err != nil {
				rp.ErrorCode = errorCode(err)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// epochEnd answers one partition of an OffsetForLeaderEpoch request.
func (b *Broker) epochEnd(tenant wire.ID, topic string, p kmsg.OffsetForLeaderEpochRequestTopicPartition,
	rp *kmsg.OffsetForLeaderEpochResponseTopicPartition) error {
	var (
		group int
		base  uint32
		end   func() uint64
	)
	if isInternalTopic(topic) {
		groups := internalTopicGroups(b.engine, tenant)
		if p.Partition < 0 || int(p.Partition) >= len(groups) {
			return wire.ErrPartitionNotFound
		}
		group, end = groups[p.Partition], func() uint64 { return 0 } // their logs are empty
	} else {
		part, ok := b.partition(tenant, topic, p.Partition)
		if !ok {
			return wire.ErrPartitionNotFound
		}
		group, base, end = part.group, part.epochBase, part.HighWatermark
	}
	term, caughtUp, err := b.leadingAt(group, base, p.CurrentLeaderEpoch)
	if err != nil {
		return err
	}
	if !caughtUp {
		return errNotCaughtUp // its high-water mark may trail the previous leader's
	}
	if p.LeaderEpoch <= epochOf(term) {
		rp.LeaderEpoch, rp.EndOffset = p.LeaderEpoch, int64(end())
	}
	return nil
}
