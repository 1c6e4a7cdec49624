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
// is none.
func (b *Broker) handleListOffsets(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	tenant := b.tenantOf(c)
	store := b.engine.Store(tenant)
	leads := b.leads(tenant)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		t := &req.Topics[ti]
		rt := &resp.Topics[ti]
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(t.Partitions))
		for pi, lp := range t.Partitions {
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.Timestamp, rp.Offset = lp.Partition, -1, -1
			err := func() error {
				if !leads {
					return errNotLeader
				}
				p, ok := store.PartitionByIndex(tenant, t.Topic, uint32(lp.Partition))
				if lp.Partition < 0 || !ok {
					return wire.ErrPartitionNotFound
				}
				switch ts := lp.Timestamp; {
				case ts == listLatest:
					rp.Offset = int64(p.HighWatermark())
				case ts == listEarliest:
					rp.Offset = int64(p.LogStart())
				case ts < 0:
					return fmt.Errorf("%w: timestamp %d", wire.ErrBadRequest, ts)
				default:
					off, at, found, err := store.OffsetForTime(p, ts)
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
