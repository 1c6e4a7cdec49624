package raftgroups

import "sync/atomic"

// Maintenance mode (docs/http-api.md, "Maintenance mode"). The switches
// are stored replicated by the HTTP API (the system tenant's KV); each node
// mirrors them here, so the paths they change pay one atomic load:
//   - Kafka produce is not held and not refused: a produce must answer
//     offsets, so its records are written as always (docs/decisions.md).
//   - hold: HTTP pushes are committed to the replicated hold instead of
//     their queues (on while push is, and until the hold is drained).
//   - pop: every pop answers nothing (HTTP pops and Kafka share fetches).
type maintenance struct {
	hold, pop atomic.Bool
}

// SetMaintenance mirrors the stored switches on this node: hold (HTTP
// pushes go to the hold) and pop (pops answer nothing).
func (e *Engine) SetMaintenance(hold, pop bool) {
	e.maint.hold.Store(hold)
	e.maint.pop.Store(pop)
}

// Holding says whether an HTTP push goes to the maintenance hold.
func (e *Engine) Holding() bool { return e.maint.hold.Load() }

// PopPaused says whether pops answer nothing (pop maintenance).
func (e *Engine) PopPaused() bool { return e.maint.pop.Load() }
