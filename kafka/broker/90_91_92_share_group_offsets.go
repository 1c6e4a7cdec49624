package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// The share-group offset admin keys (KIP-932). A share group's start
// offset in a partition (Kafka's SPSO: below it every record is done with)
// is the Queen group's position there, the same position OffsetCommit and
// OffsetFetch move and read for a consumer group.

// DescribeShareGroupOffsets (key 90), v0-1: each named partition's start
// offset (-1 without a position), every position of the group when no
// topics are named, and from v1 the lag to the high-water mark.
func (b *Broker) handleDescribeShareGroupOffsets(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, g := range req.Groups {
		rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		rg.GroupID = g.GroupID
		tenant, kErr := b.positionsReader(ctx, c, g.GroupID)
		if kErr != nil {
			rg.ErrorCode = kErr.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		ids := map[string][16]byte{}
		for _, t := range topicInfos(b.engine, tenant) {
			ids[t.Name] = t.ID
		}
		topics := g.Topics
		if topics == nil {
			for _, pos := range b.engine.GroupPositions(tenant, g.GroupID, "") {
				if n := len(topics); n == 0 || topics[n-1].Topic != pos.Queue {
					topics = append(topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: pos.Queue})
				}
				topics[len(topics)-1].Partitions = append(topics[len(topics)-1].Partitions, int32(pos.Index))
			}
		}
		for _, t := range topics {
			byIndex := map[int32]storage.GroupPosition{}
			for _, pos := range b.engine.GroupPositions(tenant, g.GroupID, t.Topic) {
				byIndex[int32(pos.Index)] = pos
			}
			rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic, rt.TopicID = t.Topic, ids[t.Topic]
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, -1, -1, -1
				if pos, ok := byIndex[p]; ok {
					rp.StartOffset = int64(pos.Offset)
					if part, ok := b.partition(tenant, t.Topic, p); ok {
						rp.Lag = max(int64(part.HighWatermark())-rp.StartOffset, 0)
					}
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// AlterShareGroupOffsets (key 91), v0: sets the group's positions, while
// no share consumer is a member (NON_EMPTY_GROUP otherwise, as Kafka).
func (b *Broker) handleAlterShareGroupOffsets(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	tenant, kErr := b.quietShareGroup(c, req.GroupID)
	if kErr != nil {
		resp.ErrorCode = kErr.Code
		return resp, nil
	}
	var cmds []wire.CommitPositionCmd
	var slots []*int16
	for _, t := range req.Topics {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.AlterShareGroupOffsetsResponseTopicPartition, len(t.Partitions))
		for i, p := range t.Partitions {
			rp := &rt.Partitions[i]
			rp.Default()
			rp.Partition = p.Partition
			if rp.ErrorCode = positionRefusal(p.Partition, p.StartOffset); rp.ErrorCode == 0 {
				cmds = append(cmds, wire.CommitPositionCmd{Tenant: tenant, Queue: t.Topic, Group: req.GroupID,
					PartitionIndex: p.Partition, Offset: uint64(p.StartOffset)})
				slots = append(slots, &rp.ErrorCode)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(cmds) > 0 {
		res, err := b.engine.CommitPositions(ctx, tenant, cmds)
		answerPositions(c, "share offsets alter", req.GroupID, slots, err, func(i int) wire.Code { return res[i].Code })
	}
	return resp, nil
}

// DeleteShareGroupOffsets (key 92), v0: forgets the group's positions in
// every partition of the named topics, while no share consumer is a
// member.
func (b *Broker) handleDeleteShareGroupOffsets(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	tenant, kErr := b.quietShareGroup(c, req.GroupID)
	if kErr != nil {
		resp.ErrorCode = kErr.Code
		return resp, nil
	}
	infos := map[string]int32{}
	for _, t := range topicInfos(b.engine, tenant) {
		infos[t.Name] = t.Partitions
	}
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		parts, ok := infos[t.Topic]
		if !ok {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		cmd := wire.DeleteOffsetsCmd{Tenant: tenant, Group: req.GroupID}
		slots := make([]*int16, parts)
		codes := make([]int16, parts)
		for i := range parts {
			cmd.Items = append(cmd.Items, wire.PartitionRef{Queue: t.Topic, Partition: uint32(i)})
			slots[i] = &codes[i]
		}
		if parts > 0 {
			res, err := b.engine.DeleteOffsets(ctx, &cmd)
			if err == nil && len(res.Codes) != len(slots) {
				err = wire.ErrMalformed
			}
			answerPositions(c, "share offsets delete", req.GroupID, slots, err, func(i int) wire.Code { return res.Codes[i] })
		}
		for _, code := range codes {
			// A partition the group never had a position in is fine.
			if code != 0 && code != coordinatorCode(wire.ErrNotFound) && rt.ErrorCode == 0 {
				rt.ErrorCode = code
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// quietShareGroup checks that the connection's group may have its offsets
// changed: coordinated here, and with no live share member.
func (b *Broker) quietShareGroup(c *kafka.Conn, group string) (wire.ID, *kerr.Error) {
	tenant, _, kErr := b.groupCoordinator(c, group)
	if kErr != nil {
		return tenant, kErr
	}
	if v, ok := b.shares.describe(shareGroupKey{tenant, group}); ok && len(v.members) > 0 {
		return tenant, kerr.NonEmptyGroup
	}
	return tenant, nil
}
