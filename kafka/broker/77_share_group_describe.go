package broker

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// ShareGroupDescribe (key 77), v0-1: a share group's epoch and members
// with their assignments. A group with no live member here answers
// GROUP_ID_NOT_FOUND, as Kafka does for an unknown group.
func (b *Broker) handleShareGroupDescribe(_ context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, name := range req.GroupIDs {
		rg := kmsg.NewShareGroupDescribeResponseGroup()
		rg.GroupID, rg.AuthorizedOperations = name, math.MinInt32
		tenant, _, kErr := b.groupCoordinator(c, name)
		if kErr != nil {
			rg.ErrorCode = kErr.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		v, ok := b.shares.describe(shareGroupKey{tenant, name})
		if !ok {
			rg.ErrorCode = kerr.GroupIDNotFound.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		names := topicNames(b.engine, tenant)
		rg.GroupState, rg.GroupEpoch, rg.AssignmentEpoch, rg.Assignor = "Stable", v.epoch, v.epoch, "simple"
		for _, m := range v.members {
			rm := kmsg.NewShareGroupDescribeResponseGroupMember()
			rm.MemberID, rm.RackID, rm.MemberEpoch = m.id, nullable(m.rackID), m.epoch
			rm.ClientID, rm.ClientHost, rm.SubscribedTopicNames = m.clientID, m.clientHost, m.subscribed
			for id, parts := range m.assigned {
				tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				tp.TopicID, tp.Topic, tp.Partitions = id, names[id], parts
				rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions, tp)
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
