package broker

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/broker/groups"
	"github.com/queen-mq/queen/wire"
)

// ListGroups (key 16), v0-5. As in Kafka, a node lists the consumer groups
// it coordinates (those whose ids hash onto a raft group it leads), and
// clients ask every node and merge the answers. A coordinator lists the
// groups in its memory with their states, and every other Queen group of
// the tenant (groups with positions) it coordinates as Empty, since a
// Kafka consumer group IS a Queen consumer group; the queue-mode group is
// not one. v4's state filter and v5's type filter are honoured, ignoring
// case as Kafka does: a group is "consumer" while it has KIP-848 members,
// "share" (and Stable) while it has share consumers, else "classic".
func (b *Broker) handleListGroups(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	tenant := b.tenantOf(c)
	coords, kErr := b.ledCoordinators(tenant)
	if kErr == nil {
		kErr = b.catchUpStoredGroups(ctx, tenant)
	}
	if kErr != nil {
		resp.ErrorCode = kErr.Code
		return resp, nil
	}
	matches := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	wanted := func(l groups.Listing) bool {
		return matches(req.StatesFilter, l.State.String()) && matches(req.TypesFilter, groupType(l))
	}
	listed := map[string]bool{}
	add := func(l groups.Listing) {
		listed[l.Group] = true
		if wanted(l) {
			rg := kmsg.NewListGroupsResponseGroup()
			rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = l.Group, l.ProtocolType, l.State.String(), groupType(l)
			resp.Groups = append(resp.Groups, rg)
		}
	}
	for _, coord := range coords {
		for _, l := range coord.List() {
			add(l)
		}
	}
	for _, name := range b.shares.names(tenant) {
		if _, coordinated := coords[b.engine.CoordinatorGroup(tenant, 'g', name)]; coordinated && !listed[name] {
			listed[name] = true
			if matches(req.StatesFilter, "Stable") && matches(req.TypesFilter, "share") {
				rg := kmsg.NewListGroupsResponseGroup()
				rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = name, "share", "Stable", "share"
				resp.Groups = append(resp.Groups, rg)
			}
		}
	}
	for _, name := range b.engine.GroupNames(tenant) {
		_, coordinated := coords[b.engine.CoordinatorGroup(tenant, 'g', name)]
		if coordinated && !listed[name] && name != wire.QueueModeGroup {
			add(groups.Listing{Group: name, State: groups.Empty})
		}
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return resp, nil
}

// groupType is a group's type as ListGroups v5 names it.
func groupType(l groups.Listing) string {
	if l.Consumer {
		return "consumer"
	}
	return "classic"
}
