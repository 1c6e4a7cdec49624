package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/storage"
)

// offsetFetchBarrier bounds the read barrier before an OffsetFetch: past
// it the client hears COORDINATOR_LOAD_IN_PROGRESS and asks again.
const offsetFetchBarrier = 5 * time.Second

// OffsetFetch (key 9), v1-7. The committed offsets are the Queen group's
// positions, each kept in the raft group of its partition, read from the
// local replicas after a read barrier on every raft group of the tenant,
// so a coordinator that just took over answers with every commit the group
// made before, through whichever node (a new coordinator has nothing to
// load). A partition without a position answers offset -1, as Kafka does;
// v2+ with no topics lists every position the group has. Transactional
// offsets reach a partition's group only when their transaction commits
// there, so every offset read here is committed (v7's require_stable needs
// no waiting).
func (b *Broker) handleOffsetFetch(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	tenant, _, kErr := b.groupCoordinator(c, req.Group)
	if kErr == nil {
		bctx, cancel := context.WithTimeout(ctx, offsetFetchBarrier)
		if err := b.engine.BarrierGroups(bctx, b.engine.TenantGroups(tenant)); err != nil {
			kErr = kerr.CoordinatorLoadInProgress
		}
		cancel()
	}
	if kErr != nil {
		return kafka.ErrorResponse(req, kErr.Code), nil
	}
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Topics == nil {
		var rt *kmsg.OffsetFetchResponseTopic
		for _, pos := range b.engine.GroupPositions(tenant, req.Group, "") {
			if rt == nil || rt.Topic != pos.Queue {
				resp.Topics = append(resp.Topics, kmsg.NewOffsetFetchResponseTopic())
				rt = &resp.Topics[len(resp.Topics)-1]
				rt.Topic = pos.Queue
			}
			rt.Partitions = append(rt.Partitions, fetchedOffset(int32(pos.Index), &pos))
		}
		return resp, nil
	}
	for _, t := range req.Topics {
		byIndex := map[int32]*storage.GroupPosition{}
		positions := b.engine.GroupPositions(tenant, req.Group, t.Topic)
		for i := range positions {
			byIndex[int32(positions[i].Index)] = &positions[i]
		}
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, fetchedOffset(p, byIndex[p]))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// fetchedOffset answers one partition: its position, or -1 without one.
func fetchedOffset(partition int32, pos *storage.GroupPosition) kmsg.OffsetFetchResponseTopicPartition {
	rp := kmsg.NewOffsetFetchResponseTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = partition, -1, -1
	if pos != nil {
		rp.Offset = int64(pos.Offset)
		rp.Metadata = kmsg.StringPtr(pos.Metadata)
	}
	return rp
}
