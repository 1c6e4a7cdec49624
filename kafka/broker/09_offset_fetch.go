package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

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
	tenant, kErr := b.positionsReader(ctx, c, req.Group)
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

// positionsReader is the tenant of a group coordinated here once every
// raft group of the tenant has applied what it committed before
// (catchUpStoredGroups), so the group's positions read from local replicas
// are current; or the error to answer with.
func (b *Broker) positionsReader(ctx context.Context, c *kafka.Conn, group string) (wire.ID, *kerr.Error) {
	tenant, _, kErr := b.groupCoordinator(c, group)
	if kErr != nil {
		return tenant, kErr
	}
	return tenant, b.catchUpStoredGroups(ctx, tenant)
}
