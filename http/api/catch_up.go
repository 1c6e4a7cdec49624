package api

import (
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

// Read-your-writes across nodes (raftgroups/catchup.go, docs/decisions.md):
// views catch up on every group of the tenant before they read (views.go);
// the data path reads this node's replicas and catches up only for what it
// does not find, before answering that it is unknown.

// catchUpUnknown catches this node up on a queue's home, and on the group
// holding the partition, when this node does not hold the partition
// (created through another node a moment ago, perhaps). A catch-up that
// fails leaves the answer to this node's replica.
func (s *Server) catchUpUnknown(tenant wire.ID, queue, partition string) {
	if _, ok := s.engine.PartitionNamed(tenant, queue, partition); ok {
		return
	}
	ctx, cancel := s.requestCtx(raftgroups.CatchUpWait)
	defer cancel()
	_ = s.engine.CatchUpPartitionsNamed(ctx, tenant, queue, partition)
}
