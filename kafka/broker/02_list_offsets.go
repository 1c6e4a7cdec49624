package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// ListOffsets timestamps with a special meaning.
const (
	listLatest   = -1
	listEarliest = -2
)

// handleListOffsets answers earliest with the log start, latest with the
// high-water mark (which is also the last stable offset: nothing
// uncommitted is ever in a log), and a timestamp with the first offset
// appended at or after it (queen's append time; spec §3.2), or -1 when there
// is none; each partition from the raft group holding it, which this node
// must lead, in the leader epoch (raft term) the client believes current
// when it says one. A leader just elected answers latest and by-time
// lookups only once it has caught up (OFFSET_NOT_AVAILABLE until then).
func (b *Broker) handleListOffsets(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	tenant := b.tenantOf(c)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		t := &req.Topics[ti]
		rt := &resp.Topics[ti]
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(t.Partitions))
		b.catchUpUnknown(ctx, tenant, t.Topic, len(t.Partitions), func(i int) int32 { return t.Partitions[i].Partition })
		for pi, lp := range t.Partitions {
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.Timestamp, rp.Offset = lp.Partition, -1, -1
			err := func() error {
				if isInternalTopic(t.Topic) {
					return b.listInternalOffsets(tenant, lp, rp)
				}
				p, ok := b.partition(tenant, t.Topic, lp.Partition)
				if !ok {
					return wire.ErrPartitionNotFound
				}
				caughtUp, err := b.listingLeader(p.group, p.epochBase, lp, rp)
				if err != nil {
					return err
				}
				switch ts := lp.Timestamp; {
				case ts == listEarliest:
					rp.Offset = int64(p.LogStart())
				case ts < 0 && ts != listLatest:
					return fmt.Errorf("%w: timestamp %d", wire.ErrBadRequest, ts)
				case !caughtUp:
					// As Kafka after an election (KIP-207): the latest
					// offset, and so a time's, may trail what the
					// previous leader answered.
					return errNotCaughtUp
				case ts == listLatest && req.IsolationLevel == 1:
					// read_committed: the last stable offset, as Kafka.
					rp.Offset = int64(p.Store().LastStable(p.Partition, p.HighWatermark()))
				case ts == listLatest:
					rp.Offset = int64(p.HighWatermark())
				default:
					off, at, found, err := p.Store().OffsetForTime(p.Partition, ts)
					if err != nil {
						return err
					}
					if found {
						rp.Offset, rp.Timestamp = int64(off), at
					}
				}
				return nil
			}()
			rp.ErrorCode = errorCode(err)
		}
	}
	return resp, nil
}

// listInternalOffsets answers for a partition of an internal topic, which
// holds no records: both ends are 0 and no record has a timestamp. It is
// answered by the leader of the raft group the partition stands for.
func (b *Broker) listInternalOffsets(tenant wire.ID, lp kmsg.ListOffsetsRequestTopicPartition, rp *kmsg.ListOffsetsResponseTopicPartition) error {
	groups := internalTopicGroups(b.engine, tenant)
	if lp.Partition < 0 || int(lp.Partition) >= len(groups) {
		return wire.ErrPartitionNotFound
	}
	if _, err := b.listingLeader(groups[lp.Partition], 0, lp, rp); err != nil {
		return err
	}
	switch ts := lp.Timestamp; {
	case ts == listEarliest, ts == listLatest:
		rp.Offset = 0
	case ts < 0:
		return fmt.Errorf("%w: timestamp %d", wire.ErrBadRequest, ts)
	}
	return nil
}

// listingLeader checks that this node leads raft group n in the epoch the
// client believes current, and answers with that epoch; caughtUp is
// whether the leader has applied everything committed before its term.
func (b *Broker) listingLeader(n int, base uint32, lp kmsg.ListOffsetsRequestTopicPartition, rp *kmsg.ListOffsetsResponseTopicPartition) (caughtUp bool, err error) {
	term, caughtUp, err := b.leadingAt(n, base, lp.CurrentLeaderEpoch)
	if err != nil {
		return false, err
	}
	rp.LeaderEpoch = epochOf(term)
	return caughtUp, nil
}
