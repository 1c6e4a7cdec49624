package api

import (
	"sync"
	"time"

	"github.com/queen-mq/queen/wire"
)

// probeSlots bounds how many parked pops of one (queue, group) on this
// node look at the store and propose a pop at the same time after a
// wake-up. One push wakes every parked pop of its queue; without a bound,
// thousands of them would each propose a pop for the one message.
const probeSlots = 8

type gateKey struct {
	tenant       wire.ID
	queue, group string
}

// probeGates hands out probe slots per (queue, group). A key with no
// waiters costs nothing.
type probeGates struct {
	mu sync.Mutex
	m  map[gateKey]*probeGate
}

type probeGate struct {
	slots chan struct{}
	refs  int
}

func (g *probeGates) get(k gateKey) *probeGate {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[gateKey]*probeGate{}
	}
	pg := g.m[k]
	if pg == nil {
		pg = &probeGate{slots: make(chan struct{}, probeSlots)}
		g.m[k] = pg
	}
	pg.refs++
	return pg
}

func (g *probeGates) put(k gateKey, pg *probeGate) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if pg.refs--; pg.refs == 0 && g.m[k] == pg {
		delete(g.m, k)
	}
}

// parkUntilPoppable waits until this node's replicas of the queue's groups
// say a pop could find messages, and returns holding one of the (queue,
// group)'s probe slots: the caller proposes its pop, then calls release.
// ok is false when the deadline (or shutdown) came first.
//
// Parking costs a goroutine, a timer and a share of one channel per queue:
// the apply loop closes that channel after each batch touching the queue
// (Engine.Changed). An empty pop costs a raft round trip, so it is not
// retried blindly: after an unfruitful one the caller passes a backoff that
// must pass (or a change must arrive) before the store is asked again.
func (s *Server) parkUntilPoppable(tenant wire.ID, queue, partition, group string, deadline time.Time, backoff time.Duration) (release func(), ok bool) {
	s.parked.Add(1)
	defer s.parked.Add(-1)
	key := gateKey{tenant, queue, group}
	gate := s.gates.get(key)
	defer s.gates.put(key, gate)
	notBefore := time.Now().Add(backoff)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// Register before looking, so a change between the look and the
		// wait is not missed.
		changed, unwatch := s.engine.Changed(tenant, queue)
		wait := time.Until(deadline)
		if b := time.Until(notBefore); b > 0 {
			wait = min(wait, b)
		} else if s.takeSlot(gate, timer, deadline) {
			// Replicated times are compared with the node's clock, which
			// stamps entries, not with the wall clock (raftgroups/clock).
			now := s.engine.NowMs()
			ready, retryAt := s.engine.PopReadiness(tenant, queue, group, partition, now)
			if ready {
				unwatch()
				return func() { <-gate.slots }, true
			}
			<-gate.slots
			if retryAt > 0 {
				wait = min(wait, time.Duration(retryAt-now)*time.Millisecond)
			}
		}
		// A lease expiring makes its messages deliverable again.
		now := s.engine.NowMs()
		if exp := s.engine.NextLeaseExpiry(tenant, queue, group, now); exp > 0 {
			wait = min(wait, time.Duration(exp-now)*time.Millisecond+10*time.Millisecond)
		}
		if !time.Now().Before(deadline) || s.base.Err() != nil {
			unwatch()
			return nil, false
		}
		wait = max(wait, time.Millisecond)
		resetTimer(timer, wait)
		select {
		case <-changed:
			notBefore = time.Time{}
		case <-timer.C:
		case <-s.base.Done():
		}
		unwatch()
	}
}

// takeSlot waits for a probe slot until the deadline or shutdown.
func (s *Server) takeSlot(gate *probeGate, timer *time.Timer, deadline time.Time) bool {
	select {
	case gate.slots <- struct{}{}:
		return true
	default:
	}
	resetTimer(timer, time.Until(deadline))
	select {
	case gate.slots <- struct{}{}:
		return true
	case <-timer.C:
	case <-s.base.Done():
	}
	return false
}

// resetTimer re-arms t for d (Go 1.23 timers need no draining).
func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	t.Reset(max(d, 0))
}

// parkedPops is how many pops are parked right now.
func (s *Server) parkedPops() int { return int(s.parked.Load()) }
