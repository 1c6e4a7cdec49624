package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/broker/groups"
)

// SyncGroup (key 14), v0-2. The leader brings every member's assignment;
// followers park until it does. The broker only relays the bytes: which
// assignor the group uses (eager or cooperative) is the clients' affair.
func (b *Broker) handleSyncGroup(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	tenant, coord, kErr := b.groupCoordinator(c, req.Group)
	if kErr != nil {
		resp.ErrorCode = kErr.Code
		return resp, nil
	}
	sr := groups.SyncRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation}
	if len(req.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			sr.Assignments[a.MemberID] = a.MemberAssignment
		}
	}
	res, err := coord.Sync(ctx, sr)
	if err != nil {
		return nil, err // the connection is closing
	}
	if res.Err == nil {
		k := coordKey{tenant, b.engine.CoordinatorGroup(tenant, 'g', req.Group)}
		b.groups.awaitRecorded(ctx, k, req.Group, req.Generation)
	}
	resp.ErrorCode = errCode(res.Err)
	resp.MemberAssignment = res.Assignment
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(res.ProtocolType), kmsg.StringPtr(res.Protocol)
	return resp, nil
}
