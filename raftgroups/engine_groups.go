package raftgroups

import (
	"context"

	"github.com/queen-mq/queen/wire"
)

// Engine methods for Kafka consumer groups: offset deletion, and who
// coordinates a tenant's groups.

// DeleteOffsets forgets a group's positions in the named partitions.
func (e *Engine) DeleteOffsets(ctx context.Context, c *wire.DeleteOffsetsCmd) (wire.CodesResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindDeleteOffsets, c.Encode(nil), wire.DecodeCodesResult)
}

// GroupLeader reports the node leading the raft group that holds tenant's
// data, and its term: the Kafka group and transaction coordinator for the
// tenant (spec decision 8). ok is false while the group has no known
// leader. A coordinator compares terms to notice it lost leadership and
// won it back in between, which makes its in-memory state stale.
func (e *Engine) GroupLeader(tenant wire.ID) (leader, term uint64, ok bool) {
	g := e.group(tenant)
	leader, term, valid, err := g.nh.GetLeaderID(g.shardID)
	if err != nil || !valid || leader == 0 {
		return 0, 0, false
	}
	return leader, term, true
}
