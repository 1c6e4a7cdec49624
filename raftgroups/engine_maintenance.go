package raftgroups

import (
	"fmt"
	"sync/atomic"

	"github.com/queen-mq/queen/wire"
)

// Maintenance mode (docs/http-api.md, "Maintenance mode"). The switches
// are stored replicated by the HTTP API (the system tenant's KV); each node
// mirrors them here, so the paths they change pay one atomic load:
//   - push: Kafka produce is refused with a retriable error, nothing
//     written (ErrMaintenance); the client keeps its records and retries.
//   - hold: HTTP pushes are committed to the replicated hold instead of
//     their queues (on while push is, and until the hold is drained).
//   - pop: every pop answers nothing (HTTP pops and Kafka share fetches).
type maintenance struct {
	push, hold, pop atomic.Bool
}

// ErrMaintenance refuses a Kafka produce while maintenance mode is on. It
// is an ErrOverloaded: nothing was proposed, the client retries (Kafka's
// NOT_ENOUGH_REPLICAS), and an idempotent producer keeps its order.
var ErrMaintenance = fmt.Errorf("%w: maintenance mode is on; produce again once it is off", ErrOverloaded)

// SetMaintenance mirrors the stored switches on this node.
func (e *Engine) SetMaintenance(push, hold, pop bool) {
	e.maint.push.Store(push)
	e.maint.hold.Store(hold)
	e.maint.pop.Store(pop)
}

// Holding says whether an HTTP push goes to the maintenance hold.
func (e *Engine) Holding() bool { return e.maint.hold.Load() }

// PopPaused says whether pops answer nothing (pop maintenance).
func (e *Engine) PopPaused() bool { return e.maint.pop.Load() }

// produceRefused says whether KafkaProduce must refuse bodies: maintenance
// is on and one of them appends records (an offset commit riding the same
// path is not a produce and goes through).
func (e *Engine) produceRefused(bodies []KafkaBody) bool {
	if !e.maint.push.Load() {
		return false
	}
	for _, b := range bodies {
		if b.Kind == 0 || b.Kind == wire.KindKafkaProduce {
			return true
		}
	}
	return false
}
