package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// Heartbeat (key 12), v0-4: keeps a member's session alive;
// REBALANCE_IN_PROGRESS tells it to join again, FENCED_INSTANCE_ID (v3+)
// that a newer incarnation of its static instance replaced it.
func (b *Broker) handleHeartbeat(_ context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	_, coord, kErr := b.groupCoordinator(c, req.Group)
	if kErr == nil {
		kErr = coord.Heartbeat(req.Group, req.MemberID, deref(req.InstanceID), req.Generation)
	}
	resp.ErrorCode = errCode(kErr)
	return resp, nil
}
