package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/broker/groups"
)

// LeaveGroup (key 13), v0-5: members leave and the others rebalance
// without waiting for their sessions to time out. From v3 a request lists
// several, each by member id, instance id or both (admin tools remove
// static members by instance id alone).
func (b *Broker) handleLeaveGroup(_ context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	_, coord, kErr := b.groupCoordinator(c, req.Group)
	if kErr != nil {
		resp.ErrorCode = kErr.Code
		return resp, nil
	}
	leaving := []groups.Leaving{{MemberID: req.MemberID}}
	if req.Version >= 3 {
		leaving = leaving[:0]
		for _, m := range req.Members {
			leaving = append(leaving, groups.Leaving{MemberID: m.MemberID, InstanceID: deref(m.InstanceID)})
		}
	}
	codes := coord.Leave(req.Group, leaving)
	if req.Version < 3 {
		resp.ErrorCode = errCode(codes[0])
		return resp, nil
	}
	for i, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, errCode(codes[i])
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}
