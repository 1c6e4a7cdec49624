package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/broker/groups"
	"github.com/queen-mq/queen/wire"
)

// OffsetCommit (key 8), v2-9 (v9: the generation is a consumer-protocol
// member's epoch). A committed offset IS the Queen group's
// position in the partition (spec §3.2): every partition of the request is
// one CommitPosition command, proposed to the raft group holding the
// partition (one raft entry per group), so a commit is durable on a quorum
// before it is acknowledged. The coordinator first
// checks the member and generation as Kafka does (ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, and from v7 FENCED_INSTANCE_ID
// for an old incarnation of a static member); a commit with generation -1
// and no member (an admin tool, a consumer without group management) is
// taken while the group has no live members.
func (b *Broker) handleOffsetCommit(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	cm := groups.Commit{Group: req.Group, MemberID: req.MemberID, InstanceID: deref(req.InstanceID),
		Generation: req.Generation, Version: req.Version, Partitions: map[string][]int32{}}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			cm.Partitions[t.Topic] = append(cm.Partitions[t.Topic], p.Partition)
		}
	}
	tenant, kErr := b.admitGroupCommit(c, cm)
	if kErr != nil {
		return kafka.ErrorResponse(req, kErr.Code), nil
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	var cmds []wire.CommitPositionCmd
	var slots []*int16 // the response code each command answers
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		for i, p := range t.Partitions {
			rp := &rt.Partitions[i]
			rp.Default()
			rp.Partition = p.Partition
			switch code := positionRefusal(p.Partition, p.Offset); {
			case code != 0:
				rp.ErrorCode = code
			case p.Metadata != nil && len(*p.Metadata) > maxOffsetMetadata:
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				cmd := wire.CommitPositionCmd{Tenant: tenant, Queue: t.Topic, Group: req.Group,
					PartitionIndex: p.Partition, Offset: uint64(p.Offset)}
				if p.Metadata != nil {
					cmd.Metadata = *p.Metadata
				}
				cmds = append(cmds, cmd)
				slots = append(slots, &rp.ErrorCode)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(cmds) == 0 {
		return resp, nil
	}
	// Pipelined commits of one connection apply in the order they were
	// sent, as Kafka serves one request of a connection at a time: an
	// older commit must not land after a newer one.
	var res []wire.CodeResult
	var err error
	if oerr := c.Ordered(ctx, func() { res, err = b.engine.CommitPositions(ctx, tenant, cmds) }); oerr != nil {
		return nil, oerr // the connection is closing
	}
	answerPositions(c, "commit", req.Group, slots, err, func(i int) wire.Code { return res[i].Code })
	return resp, nil
}

// positionRefusal is the error of a position written for a partition
// index, 0 when it may be written: a partition index or a position is
// never negative.
func positionRefusal(partition int32, offset int64) int16 {
	switch {
	case partition < 0:
		return kerr.UnknownTopicOrPartition.Code
	case offset < 0:
		return kerr.OffsetOutOfRange.Code
	}
	return 0
}
