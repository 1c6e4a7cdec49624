package broker

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// ConsumerGroupDescribe (key 69), v0-1: a consumer-protocol group's
// epochs, assignor and members with their current and target assignments.
// A group that is not one here (unknown, or a classic group) answers
// GROUP_ID_NOT_FOUND, as Kafka does.
func (b *Broker) handleConsumerGroupDescribe(_ context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, name := range req.Groups {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group, rg.AuthorizedOperations = name, math.MinInt32
		tenant, coord, kErr := b.groupCoordinator(c, name)
		if kErr != nil {
			rg.ErrorCode = kErr.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		d, ok := coord.DescribeConsumer(name)
		if !ok {
			rg.ErrorCode = kerr.GroupIDNotFound.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		names := topicNames(b.engine, tenant)
		rg.State, rg.Epoch, rg.AssignmentEpoch, rg.AssignorName = d.State.String(), d.Epoch, d.AssignmentEpoch, d.Assignor
		for _, m := range d.Members {
			rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			rm.MemberID, rm.InstanceID, rm.RackID = m.MemberID, nullable(m.InstanceID), nullable(m.RackID)
			rm.MemberEpoch, rm.ClientID, rm.ClientHost = m.MemberEpoch, m.ClientID, m.ClientHost
			rm.SubscribedTopics, rm.SubscribedTopicRegex = m.SubscribedTopics, nullable(m.SubscribedRegex)
			rm.Assignment, rm.TargetAssignment = describedAssignment(m.Assignment, names), describedAssignment(m.Target, names)
			rm.MemberType = 1 // a consumer (KIP-1099)
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// describedAssignment is an assignment by topic id, with the topics' names.
func describedAssignment(a map[[16]byte][]int32, names map[[16]byte]string) kmsg.Assignment {
	out := kmsg.NewAssignment()
	for id, parts := range a {
		tp := kmsg.NewAssignmentTopicPartition()
		tp.TopicID, tp.Topic, tp.Partitions = id, names[id], parts
		out.TopicPartitions = append(out.TopicPartitions, tp)
	}
	return out
}
