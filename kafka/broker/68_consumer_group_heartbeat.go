package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/broker/groups"
)

// ConsumerGroupHeartbeat (key 68), v0-1: KIP-848's consumer group
// protocol, where the coordinator assigns partitions and each heartbeat
// moves the member one step towards its share (groups/consumer.go). v1
// members name themselves and may subscribe by regular expression.
func (b *Broker) handleConsumerGroupHeartbeat(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	tenant, coord, kErr := b.groupCoordinator(c, req.Group)
	if kErr == nil && req.MemberEpoch == 0 { // a join
		kErr = b.admitGroup(tenant, coord, req.Group)
	}
	if kErr != nil {
		resp.ErrorCode = kErr.Code
		return resp, nil
	}
	h := groups.ConsumerHeartbeat{Group: req.Group, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
		InstanceID: deref(req.InstanceID), RackID: deref(req.RackID), ClientHost: "/" + hostOf(c),
		RebalanceTimeout: -1, SubscribedTopics: req.SubscribedTopicNames, SubscribedRegex: req.SubscribedTopicRegex,
		ServerAssignor: req.ServerAssignor}
	if req.RebalanceTimeoutMillis >= 0 {
		h.RebalanceTimeout = millis(req.RebalanceTimeoutMillis)
	}
	if hdr, ok := kafka.RequestHeaderFromContext(ctx); ok {
		h.ClientID = hdr.ClientID
	}
	if req.Topics != nil {
		h.Owned = make(map[[16]byte][]int32, len(req.Topics))
		for _, t := range req.Topics {
			h.Owned[t.TopicID] = append(h.Owned[t.TopicID], t.Partitions...)
		}
	}
	res := coord.ConsumerHeartbeat(h)
	resp.ErrorCode = errCode(res.Err)
	if res.Message != "" {
		resp.ErrorMessage = kmsg.StringPtr(res.Message)
	}
	if res.Err != nil {
		return resp, nil
	}
	resp.MemberID = kmsg.StringPtr(res.MemberID)
	resp.MemberEpoch = res.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval / time.Millisecond)
	if res.Assignment != nil {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for id, parts := range res.Assignment {
			t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			t.TopicID, t.Partitions = id, parts
			a.Topics = append(a.Topics, t)
		}
		resp.Assignment = &a
	}
	return resp, nil
}
