package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// errCompactOnly refuses DeleteRecords on a topic whose cleanup.policy
// is compact alone, as Kafka does (POLICY_VIOLATION): compaction keeps
// each key's last record, which a moved log start would drop.
var errCompactOnly = errors.New("kafka: records can be deleted only when the topic's cleanup.policy contains delete")

// handleDeleteRecords (key 21, v0-2) moves each asked partition's log
// start up to the offset given (-1: the high watermark), answering the
// new log start as low_watermark, at the leader of the partition's raft
// group. It is the log cleaner's command (LogCleanCmd with StartAt, as
// retention.bytes proposes it): replicated through raft, every replica
// drops the chunks wholly below the new start and hides the rest of the
// chunk it falls in, and no new entry kind is needed. The partition is
// the queue partition HTTP reads, so what goes is gone for HTTP too: pops
// start at the new log start (consumer-group cursors below it move up to
// it, as after retention) and the message views no longer list it. An
// offset past the high watermark is OFFSET_OUT_OF_RANGE; one at or below
// the log start changes nothing and answers the log start. Internal
// topics hold no records: anything but 0 (or -1) is OFFSET_OUT_OF_RANGE.
// A topic compacted and not deleted answers POLICY_VIOLATION, as in Kafka.
func (b *Broker) handleDeleteRecords(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	tenant := b.tenantOf(c)
	wait := adminWait
	if req.TimeoutMillis > 0 {
		wait = min(wait, time.Duration(req.TimeoutMillis)*time.Millisecond)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		b.catchUpUnknown(ctx, tenant, t.Topic, len(t.Partitions), func(i int) int32 { return t.Partitions[i].Partition })
		for _, tp := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = tp.Partition, -1
			low, err := b.deleteRecords(ctx, tenant, t.Topic, tp.Partition, tp.Offset, wait)
			if err == nil {
				rp.LowWatermark = low
			}
			rp.ErrorCode = errorCode(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// deleteRecords moves one partition's log start up to offset (-1: the
// high watermark) and returns the log start after it, once committed.
func (b *Broker) deleteRecords(ctx context.Context, tenant wire.ID, topic string, index int32, offset int64, wait time.Duration) (int64, error) {
	if isInternalTopic(topic) {
		groups := internalTopicGroups(b.engine, tenant)
		if index < 0 || int(index) >= len(groups) {
			return 0, wire.ErrPartitionNotFound
		}
		if _, _, err := b.leading(groups[index], -1); err != nil {
			return 0, err
		}
		if offset != 0 && offset != -1 {
			return 0, fmt.Errorf("%w: %d in an internal topic", errOffsetOutOfRange, offset)
		}
		return 0, nil
	}
	p, ok := b.partition(tenant, topic, index)
	if !ok {
		return 0, wire.ErrPartitionNotFound
	}
	if set, ok := b.engine.TopicSettings(tenant, topic); ok && set.Compact && !set.Delete {
		return 0, errCompactOnly
	}
	_, caughtUp, err := b.leading(p.group, -1)
	if err != nil {
		return 0, err
	}
	if !caughtUp {
		// The high watermark this node sees may trail the one the
		// previous leader answered: it cannot tell out of range yet.
		return 0, errNotCaughtUp
	}
	hwm := p.HighWatermark()
	at := uint64(offset)
	switch {
	case offset == -1:
		at = hwm
	case offset < 0 || uint64(offset) > hwm:
		return 0, fmt.Errorf("%w: %d, high watermark %d", errOffsetOutOfRange, offset, hwm)
	}
	if at > p.LogStart() {
		// The high watermark only grows, so at stays within the log
		// whenever the command applies; the apply clamps it all the same.
		cctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		res, err := b.engine.LogClean(cctx, p.group, &wire.LogCleanCmd{Tenant: tenant, PartitionID: p.ID, StartAt: at})
		if err == nil {
			err = res.Code.Err()
		}
		if err != nil {
			return 0, err
		}
	}
	return int64(p.LogStart()), nil
}
