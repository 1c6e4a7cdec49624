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
// method takes the tenant the request belongs to; the tenant decides the
// raft group. Writes are proposals and return once applied on this node, so
// a read on this node right after sees them.
type Engine struct {
	host       *Host
	place      tenancy.Placement
	watch      watchers
	payloadKey *envelope.Key // nil: payload encryption off
}

// NewEngine serves requests from h's groups, placing tenants with place.
func NewEngine(h *Host, place tenancy.Placement) (*Engine, error) {
	if place.Groups() != h.Groups() {
		return nil, fmt.Errorf("raftgroups: placement over %d groups, host has %d", place.Groups(), h.Groups())
	}
	e := &Engine{host: h, place: place}
	e.watch.m = map[watchKey]*watchList{}
	for _, g := range h.groups {
		g.store.OnChange(e.watch.notify)
	}
	return e, nil
}

// Host is the node the engine runs on.
func (e *Engine) Host() *Host { return e.host }

func (e *Engine) group(tenant wire.ID) *group { return e.host.groups[e.place.GroupOf(tenant)] }

// Store is the local state machine holding tenant's data, for reads.
func (e *Engine) Store(tenant wire.ID) *storage.Store { return e.group(tenant).store }

// Propose applies cmds as one unit in tenant's group and returns their
// results in order.
func (e *Engine) Propose(ctx context.Context, tenant wire.ID, cmds ...wire.Command) ([][]byte, error) {
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
	return e.group(tenant).prop.submit(ctx, cmds)
}

func proposeOne[R any](ctx context.Context, e *Engine, tenant wire.ID, kind wire.Kind, body []byte, decode func([]byte) (R, error)) (R, error) {
	var zero R
	res, err := e.Propose(ctx, tenant, wire.Command{Kind: kind, Body: body})
	if err != nil {
		return zero, err
	}
	if code, bare := wire.ResultCode(res[0]); bare && code != wire.CodeOK {
		return zero, fmt.Errorf("raftgroups: %w", code.Err())
	}
	return decode(res[0])
}

// Push appends each command's records; all commands commit together.
func (e *Engine) Push(ctx context.Context, tenant wire.ID, cmds []wire.PushCmd) ([]wire.PushResult, error) {
	return proposeAll(ctx, e, tenant, wire.KindPush, cmds, wire.DecodePushResult)
}

// Pop leases messages for a consumer group.
func (e *Engine) Pop(ctx context.Context, c *wire.PopCmd) (wire.PopResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindPop, c.Encode(nil), wire.DecodePopResult)
}

// Ack acknowledges leased messages.
func (e *Engine) Ack(ctx context.Context, c *wire.AckCmd) (wire.AckResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindAck, c.Encode(nil), wire.DecodeAckResult)
}

// ExtendLease moves a lease's expiry.
func (e *Engine) ExtendLease(ctx context.Context, c *wire.ExtendLeaseCmd) (wire.ExtendLeaseResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindExtendLease, c.Encode(nil), wire.DecodeExtendLeaseResult)
}

// CommitPosition sets a consumer group's position in a partition.
func (e *Engine) CommitPosition(ctx context.Context, c *wire.CommitPositionCmd) (wire.CodeResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindCommitPosition, c.Encode(nil), wire.DecodeCodeResult)
}

// Configure creates a queue or changes its options.
func (e *Engine) Configure(ctx context.Context, c *wire.ConfigureCmd) (wire.ConfigureResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindConfigure, c.Encode(nil), wire.DecodeConfigureResult)
}

// DeleteQueue removes a queue and everything in it.
func (e *Engine) DeleteQueue(ctx context.Context, c *wire.DeleteQueueCmd) (wire.CodeResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindDeleteQueue, c.Encode(nil), wire.DecodeCodeResult)
}

// Barrier waits until this node has applied everything the group had
// committed when Barrier was called (a ReadIndex), so the reads that follow
// are linearizable. Each attempt is short: a ReadIndex lost in a leader
// change is retried rather than waited out.
func (e *Engine) Barrier(ctx context.Context, tenant wire.ID) error {
	g := e.group(tenant)
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

// Changed returns a channel closed the next time an applied entry touches
// the queue, and a release function the caller must call when it stops
// waiting. Long polls park on it instead of polling.
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
