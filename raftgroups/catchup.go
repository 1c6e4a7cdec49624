package raftgroups

import (
	"context"
	"slices"
	"time"

	"github.com/queen-mq/queen/wire"
)

// Read-your-writes across nodes (docs/decisions.md, "Read-your-writes
// across nodes"). A write is answered once the node that proposed it has
// applied it; every other replica applies it a moment later. A client that
// creates a topic through one node and describes it through another must
// still see it, so what a node answers about the catalog (what exists, how
// it is configured, where it lives) is read after a Barrier on the group
// holding it:
//   - answers about metadata (Kafka Metadata, DescribeConfigs, admin
//     requests; HTTP views) catch up first, always;
//   - the data path (produce, fetch, pop, offsets) reads the local replica
//     and catches up only when it misses, before it answers that a queue or
//     a partition does not exist: a miss is rare, a barrier per record
//     batch would cost every request a round trip.

// CatchUpWait bounds a catch-up a reader makes before answering from its
// own replica. A group without a leader answers no ReadIndex: past this,
// an answer that could only say "not found" says the group is unavailable
// instead, and one that may be served stale (a Metadata listing, whose
// clients refresh on their own) is served.
const CatchUpWait = 5 * time.Second

// CatchUpQueues makes this node's replicas of the homes of queues (their
// catalogs and directories) current: a Barrier on each distinct home.
func (e *Engine) CatchUpQueues(ctx context.Context, tenant wire.ID, queues ...string) error {
	return e.BarrierGroups(ctx, e.homesOf(tenant, queues))
}

// CatchUpTenant makes this node's replicas of every group holding tenant's
// data current, group 0 (the Kafka node registry) included.
func (e *Engine) CatchUpTenant(ctx context.Context, tenant wire.ID) error {
	groups := e.TenantGroups(tenant)
	if !slices.Contains(groups, 0) {
		groups = append(groups, 0)
	}
	return e.BarrierGroups(ctx, groups)
}

// CatchUpQueuesAndNodes is CatchUpQueues and a catch-up of group 0, which
// holds the Kafka node registry.
func (e *Engine) CatchUpQueuesAndNodes(ctx context.Context, tenant wire.ID, queues ...string) error {
	groups := e.homesOf(tenant, queues)
	if !slices.Contains(groups, 0) {
		groups = append(groups, 0)
	}
	return e.BarrierGroups(ctx, groups)
}

// homesOf lists the distinct homes of queues.
func (e *Engine) homesOf(tenant wire.ID, queues []string) []int {
	out := make([]int, 0, 1)
	for _, q := range queues {
		if h := e.Home(tenant, q); !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// CatchUpPartitions makes this node's replica of a queue's home current,
// then those of the groups its directory places the partitions at indexes
// in (each created there by an entry of its own).
func (e *Engine) CatchUpPartitions(ctx context.Context, tenant wire.ID, queue string, indexes ...uint32) error {
	return e.catchUpDir(ctx, tenant, queue, len(indexes), func(i int) (wire.DirEntry, bool) {
		return e.DirByIndex(tenant, queue, indexes[i])
	})
}

// CatchUpPartitionsNamed is CatchUpPartitions for partitions by name.
func (e *Engine) CatchUpPartitionsNamed(ctx context.Context, tenant wire.ID, queue string, names ...string) error {
	return e.catchUpDir(ctx, tenant, queue, len(names), func(i int) (wire.DirEntry, bool) {
		return e.DirByName(tenant, queue, names[i])
	})
}

// catchUpDir catches up a queue's home, then the groups holding the n
// partitions entry finds in its directory.
func (e *Engine) catchUpDir(ctx context.Context, tenant wire.ID, queue string, n int, entry func(int) (wire.DirEntry, bool)) error {
	home := e.Home(tenant, queue)
	if err := e.Barrier(ctx, home); err != nil {
		return err
	}
	var groups []int
	for i := range n {
		if d, ok := entry(i); ok && int(d.Group) != home && !slices.Contains(groups, int(d.Group)) {
			groups = append(groups, int(d.Group))
		}
	}
	return e.BarrierGroups(ctx, groups)
}
