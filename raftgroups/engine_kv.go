package raftgroups

import (
	"context"

	"github.com/queen-mq/queen/wire"
)

// KV applies KV operations as one unit.
func (e *Engine) KV(ctx context.Context, c *wire.KVCmd) (wire.KVResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindKV, c.Encode(nil), wire.DecodeKVResult)
}

// Locks applies lock operations.
func (e *Engine) Locks(ctx context.Context, c *wire.LocksCmd) (wire.LocksResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindLocks, c.Encode(nil), wire.DecodeLocksResult)
}

// Timers applies timer operations.
func (e *Engine) Timers(ctx context.Context, c *wire.TimersCmd) (wire.TimersResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindTimers, c.Encode(nil), wire.DecodeTimersResult)
}

// Trace records a trace event.
func (e *Engine) Trace(ctx context.Context, c *wire.TraceCmd) (wire.TraceResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindTrace, c.Encode(nil), wire.DecodeTraceResult)
}
