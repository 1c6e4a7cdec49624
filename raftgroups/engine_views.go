package raftgroups

import (
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Stores lists this node's store of every group, for views that span all
// tenants (metrics). Reads only: writes go through proposals.
func (e *Engine) Stores() []*storage.Store {
	out := make([]*storage.Store, len(e.host.groups))
	for i, g := range e.host.groups {
		out[i] = g.store
	}
	return out
}

// Parked counts the requests parked on each queue's change notifications
// on this node (long-polling pops and fetches), by tenant and queue.
func (e *Engine) Parked() map[wire.ID]map[string]int {
	e.watch.mu.Lock()
	defer e.watch.mu.Unlock()
	out := map[wire.ID]map[string]int{}
	for k, l := range e.watch.m {
		if out[k.tenant] == nil {
			out[k.tenant] = map[string]int{}
		}
		out[k.tenant][k.queue] += l.waiters
	}
	return out
}
