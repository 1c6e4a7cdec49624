package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/broker/groups"
)

// SyncGroup (key 14), v0-5. The leader brings every member's assignment;
// followers park until it does. v3 adds the static member's instance id
// (an old incarnation is fenced), v5 the protocol type and name, which
// must be the group's. The broker only relays the bytes: which
// assignor the group uses (eager or cooperative) is the clients' affair.
// As for JoinGroup, the answer waits for the membership record and is
// NOT_COORDINATOR from a coordinator deposed meanwhile (members_writer.go).
func (b *Broker) handleSyncGroup(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	tenant, coord, kErr := b.groupCoordinator(c, req.Group)
	if kErr != nil {
		resp.ErrorCode = kErr.Code
		return resp, nil
	}
	sr := groups.SyncRequest{Group: req.Group, MemberID: req.MemberID, InstanceID: deref(req.InstanceID),
		Generation: req.Generation, ProtocolType: deref(req.ProtocolType), Protocol: deref(req.Protocol)}
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
		if kErr := b.groups.confirm(ctx, b.groupKey(tenant, req.Group), req.Group, coord); kErr != nil {
			resp.ErrorCode = kErr.Code
			return resp, nil
		}
	}
	resp.ErrorCode = errCode(res.Err)
	resp.MemberAssignment = res.Assignment
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(res.ProtocolType), kmsg.StringPtr(res.Protocol)
	return resp, nil
}
