package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// LeaveGroup (key 13), v0-2: one member leaves and the others rebalance
// without waiting for its session to time out. (The batched v3+ form is
// outside the window, but its member list is honoured if it arrives.)
func (b *Broker) handleLeaveGroup(_ context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	_, coord, kErr := b.groupCoordinator(c, req.Group)
	if kErr != nil {
		resp.ErrorCode = kErr.Code
		return resp, nil
	}
	ids := []string{req.MemberID}
	if req.Version >= 3 {
		ids = ids[:0]
		for _, m := range req.Members {
			ids = append(ids, m.MemberID)
		}
	}
	codes := coord.Leave(req.Group, ids)
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
