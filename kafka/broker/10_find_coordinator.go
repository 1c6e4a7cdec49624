package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// FindCoordinator (key 10), v0-3. A consumer group or a transactional id
// is coordinated by the node leading the raft group its id hashes onto
// (docs/placement.md), as Kafka hashes them onto __consumer_offsets and
// __transaction_state partitions; any node answers, from its view of the
// leaders.
func (b *Broker) handleFindCoordinator(_ context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.NodeID = -1
	fail := func(err *kerr.Error, why string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = err.Code, kmsg.StringPtr(why)
		return resp, nil
	}
	kind := byte('g')
	switch req.CoordinatorType {
	case 0:
	case 1:
		kind = 't'
	default:
		return fail(kerr.InvalidRequest, "coordinator type must be 0 (group) or 1 (transaction)")
	}
	leader, _, ok := b.groupLeader(b.engine.CoordinatorGroup(b.tenantOf(c), kind, req.CoordinatorKey))
	if !ok {
		return fail(kerr.CoordinatorNotAvailable, "no leader, or its Kafka address is not registered yet")
	}
	host, port, _ := b.brokerAddr(uint64(leader))
	resp.NodeID, resp.Host, resp.Port = leader, host, port
	return resp, nil
}
