package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// FindCoordinator (key 10), v0-3. Every group and every transactional id
// of a tenant is coordinated by the node leading the tenant's raft group
// (decision 8), whichever node is asked, so the key itself is not looked
// at: the answer points at that leader.
func (b *Broker) handleFindCoordinator(_ context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.NodeID = -1
	fail := func(err *kerr.Error, why string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = err.Code, kmsg.StringPtr(why)
		return resp, nil
	}
	if req.CoordinatorType != 0 && req.CoordinatorType != 1 {
		return fail(kerr.InvalidRequest, "coordinator type must be 0 (group) or 1 (transaction)")
	}
	leader, ok := b.leader(b.tenantOf(c))
	if !ok {
		return fail(kerr.CoordinatorNotAvailable, "no leader, or its Kafka address is not registered yet")
	}
	host, port, _ := b.brokerAddr(uint64(leader))
	resp.NodeID, resp.Host, resp.Port = leader, host, port
	return resp, nil
}
