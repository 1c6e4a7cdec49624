package raftgroups

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/queen-mq/queen/crypto/envelope"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// Engine is the one produce/consume API behind both front doors. Every
// method takes the tenant the request belongs to; tenancy.Placement and the
// queue's catalog decide which raft group each part of the request goes to
// (docs/placement.md). Writes are proposals and return once applied on
// this node, so a read on this node right after sees them.
type Engine struct {
	host       *Host
	place      tenancy.Placement
	watch      watchers
	payloadKey *envelope.Key // nil: payload encryption off
	pops       popRotor
	caught     []caughtUp  // per group: whether this node, leading, caught up (leader_epoch.go)
	walks      stepWalks   // stepped commands running to their end (steps.go)
	maint      maintenance // maintenance mode's switches (engine_maintenance.go)
}

// NewEngine serves requests from h's groups, placing data with place.
func NewEngine(h *Host, place tenancy.Placement) (*Engine, error) {
	if place.Groups() != h.Groups() {
		return nil, fmt.Errorf("raftgroups: placement over %d groups, host has %d", place.Groups(), h.Groups())
	}
	e := &Engine{host: h, place: place, caught: make([]caughtUp, h.Groups())}
	e.watch.m = map[watchKey]*watchList{}
	e.walks.running = map[string]*stepWalk{}
	for _, g := range h.groups {
		g.store.OnChange(e.watch.notify)
	}
	h.startEngineLoops(e)
	e.watchLeaders()
	return e, nil
}

// NowMs is this node's clock (Host.NowMs): compare replicated times, such
// as lease expiries, with it rather than with the wall clock.
func (e *Engine) NowMs() int64 { return e.host.clock.NowMs() }

// Host is the node the engine runs on.
func (e *Engine) Host() *Host { return e.host }

// Placement is the rule placing tenants' state on groups.
func (e *Engine) Placement() tenancy.Placement { return e.place }

// GroupStore is group n's local state machine, for reads.
func (e *Engine) GroupStore(n int) *storage.Store { return e.host.groups[n].store }

// Propose applies cmds as one unit in group n and returns their results in
// order.
func (e *Engine) Propose(ctx context.Context, n int, cmds ...wire.Command) ([][]byte, error) {
	if n < 0 || n >= len(e.host.groups) {
		return nil, fmt.Errorf("raftgroups: no group %d", n)
	}
	size := 0
	for _, c := range cmds {
		size += c.EncodedLen()
	}
	if size > e.host.cfg.MaxEntryBytes {
		return nil, ErrTooLarge
	}
	if e.host.closed.Load() {
		return nil, ErrClosed
	}
	return e.host.groups[n].prop.submit(ctx, cmds)
}

func proposeOne[R any](ctx context.Context, e *Engine, group int, kind wire.Kind, body []byte, decode func([]byte) (R, error)) (R, error) {
	var zero R
	res, err := e.Propose(ctx, group, wire.Command{Kind: kind, Body: body})
	if err != nil {
		return zero, err
	}
	if code, bare := wire.ResultCode(res[0]); bare && code != wire.CodeOK {
		return zero, fmt.Errorf("raftgroups: %w", code.Err())
	}
	return decode(res[0])
}

// Barrier waits until this node has applied everything group n had
// committed when Barrier was called (a ReadIndex), so the reads of that
// group that follow are linearizable. Each attempt is short: a ReadIndex
// lost in a leader change is retried rather than waited out.
func (e *Engine) Barrier(ctx context.Context, n int) error {
	g := e.host.groups[n]
	backoff := 5 * time.Millisecond
	for {
		rs, err := g.nh.ReadIndex(g.shardID, 500*time.Millisecond)
		if err == nil {
			select {
			case r := <-rs.ResultC():
				rs.Release()
				if r.Completed() {
					return nil
				}
			case <-ctx.Done():
				rs.Release()
				return fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
			}
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		}
		backoff = min(backoff*2, 100*time.Millisecond)
	}
}

// BarrierGroups runs Barrier on several groups at once.
func (e *Engine) BarrierGroups(ctx context.Context, groups []int) error {
	if len(groups) == 1 {
		return e.Barrier(ctx, groups[0])
	}
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.Barrier(ctx, g)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Leader reports which node leads group n and in which term; ok is false
// while there is no leader (an election).
func (e *Engine) Leader(n int) (node, term uint64, ok bool) {
	g := e.host.groups[n]
	id, term, valid, err := g.nh.GetLeaderID(g.shardID)
	if err != nil || !valid || id == 0 {
		return 0, 0, false
	}
	return id, term, true
}

// NodeLive reports whether node id looks alive from here: this node, the
// leader of a group as this replica sees it, or a node heard from within
// three election timeouts (at least 2 s). Kafka's Metadata lists live
// brokers only, and clients rely on it: franz-go keeps a dead broker as a
// transaction coordinator until the broker leaves the list. A node that
// hears from less than a majority of the voters cannot tell a dead peer
// from its own isolation, so every node counts as live then: a cut-off
// node listing only itself would capture clients that adopt its list.
func (e *Engine) NodeLive(id uint64) bool {
	for n := range e.host.groups {
		if node, _, ok := e.Leader(n); ok && node == id {
			return true
		}
	}
	window := max(2*time.Second, 3*e.host.ElectionTimeout())
	if e.host.HeardFrom(id, window) {
		return true
	}
	voters := e.host.voterIDs()
	heard := 0
	for _, v := range voters {
		if e.host.HeardFrom(v, window) {
			heard++
		}
	}
	return heard <= len(voters)/2
}

// Leads reports whether this node leads group n.
func (e *Engine) Leads(n int) bool { return e.host.leads(e.host.groups[n]) }

// Changed returns a channel closed the next time an applied entry, in any
// group, touches the queue, and a release function the caller must call
// when it stops waiting. Long polls park on it instead of polling.
func (e *Engine) Changed(tenant wire.ID, queue string) (<-chan struct{}, func()) {
	return e.watch.wait(watchKey{tenant, queue})
}

type watchKey struct {
	tenant wire.ID
	queue  string
}

type watchList struct {
	ch      chan struct{}
	waiters int
}

// watchers broadcasts apply-loop changes to parked requests. A queue with
// no waiters costs nothing; one with thousands costs one channel.
type watchers struct {
	mu sync.Mutex
	m  map[watchKey]*watchList
}

func (w *watchers) wait(k watchKey) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.m[k]
	if l == nil {
		l = &watchList{ch: make(chan struct{})}
		w.m[k] = l
	}
	l.waiters++
	released := false
	return l.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if released {
			return
		}
		released = true
		if l.waiters--; l.waiters == 0 && w.m[k] == l {
			delete(w.m, k)
		}
	}
}

func (w *watchers) notify(changes []storage.Change) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range changes {
		k := watchKey{c.Tenant, c.Queue}
		if l := w.m[k]; l != nil {
			close(l.ch)
			delete(w.m, k)
		}
	}
}

// fanOut runs f for each of n items at once and waits for all.
func fanOut(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}
