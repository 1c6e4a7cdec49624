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
// offsets reach a partition's position only when their transaction commits
// there, so every offset read here is committed; but with v7's
// require_stable (KIP-447) a partition where the group has offsets staged
// by a transaction not yet resolved answers UNSTABLE_OFFSET_COMMIT, and
// the client asks again: its position is about to move, and a consumer
// starting from the old one would read again what that transaction
// consumed (a new session of a read-process-write loop, after its
// coordinator died between the commit's decision and its resolution).
func (b *Broker) handleOffsetFetch(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	tenant, kErr := b.positionsReader(ctx, c, req.Group)
	if kErr != nil {
		return kafka.ErrorResponse(req, kErr.Code), nil
	}
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Topics == nil {
		unstable := b.unstablePositions(req, tenant, "")
		var rt *kmsg.OffsetFetchResponseTopic
		for _, pos := range b.engine.GroupPositions(tenant, req.Group, "") {
			if rt == nil || rt.Topic != pos.Queue {
				resp.Topics = append(resp.Topics, kmsg.NewOffsetFetchResponseTopic())
				rt = &resp.Topics[len(resp.Topics)-1]
				rt.Topic = pos.Queue
			}
			rp := fetchedOffset(int32(pos.Index), &pos)
			markUnstable(&rp, unstable[storage.StagedPosition{Queue: pos.Queue, Index: pos.Index}])
			rt.Partitions = append(rt.Partitions, rp)
		}
		return resp, nil
	}
	for _, t := range req.Topics {
		unstable := b.unstablePositions(req, tenant, t.Topic)
		byIndex := map[int32]*storage.GroupPosition{}
		positions := b.engine.GroupPositions(tenant, req.Group, t.Topic)
		for i := range positions {
			byIndex[int32(positions[i].Index)] = &positions[i]
		}
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := fetchedOffset(p, byIndex[p])
			markUnstable(&rp, p >= 0 && unstable[storage.StagedPosition{Queue: t.Topic, Index: uint32(p)}])
			rt.Partitions = append(rt.Partitions, rp)
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

// unstablePositions is, for a require_stable request, the partitions of
// queue (every queue when "") where the group has offsets staged by a
// transaction not yet resolved; nil otherwise, which costs nothing.
func (b *Broker) unstablePositions(req *kmsg.OffsetFetchRequest, tenant wire.ID, queue string) map[storage.StagedPosition]bool {
	if !req.RequireStable {
		return nil
	}
	var out map[storage.StagedPosition]bool
	for _, sp := range b.engine.TxnStagedPositions(tenant, req.Group, queue) {
		if out == nil {
			out = map[storage.StagedPosition]bool{}
		}
		out[sp] = true
	}
	return out
}

// markUnstable answers a partition whose position a pending transaction
// may move with UNSTABLE_OFFSET_COMMIT and no offset, as Kafka does.
func markUnstable(rp *kmsg.OffsetFetchResponseTopicPartition, unstable bool) {
	if unstable {
		rp.Offset, rp.Metadata, rp.ErrorCode = -1, nil, kerr.UnstableOffsetCommit.Code
	}
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
