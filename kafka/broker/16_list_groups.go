package broker

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/broker/groups"
	"github.com/queen-mq/queen/wire"
)

// ListGroups (key 16), v0-4. Clients ask every broker and merge the
// answers; a node that does not coordinate the tenant answers an empty
// list. The coordinator lists the groups in its memory with their states,
// and every other Queen group of the tenant (groups with positions) as
// Empty, since a Kafka consumer group IS a Queen consumer group; the
// queue-mode group is not one. v4's state filter is honoured, ignoring
// case as Kafka does.
func (b *Broker) handleListGroups(_ context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	tenant, coord, kErr := b.groupCoordinator(c, "")
	if kErr == kerr.NotCoordinator {
		return resp, nil
	}
	if kErr != nil {
		resp.ErrorCode = kErr.Code
		return resp, nil
	}
	wanted := func(s groups.State) bool {
		return len(req.StatesFilter) == 0 || slices.ContainsFunc(req.StatesFilter, func(f string) bool { return strings.EqualFold(f, s.String()) })
	}
	listed := map[string]bool{}
	add := func(l groups.Listing) {
		listed[l.Group] = true
		if wanted(l.State) {
			rg := kmsg.NewListGroupsResponseGroup()
			rg.Group, rg.ProtocolType, rg.GroupState = l.Group, l.ProtocolType, l.State.String()
			resp.Groups = append(resp.Groups, rg)
		}
	}
	for _, l := range coord.List() {
		add(l)
	}
	for _, name := range b.engine.Store(tenant).GroupNames(tenant) {
		if !listed[name] && name != wire.QueueModeGroup {
			add(groups.Listing{Group: name, State: groups.Empty})
		}
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return resp, nil
}
