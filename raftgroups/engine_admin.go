package raftgroups

import (
	"context"

	"github.com/queen-mq/queen/wire"
)

// Consumer-group, DLQ and message administration: each is one command in
// the tenant's group.

// Seek moves a group's cursors to the end or to a time.
func (e *Engine) Seek(ctx context.Context, c *wire.SeekCmd) (wire.CountResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindSeek, c.Encode(nil), wire.DecodeCountResult)
}

// DeleteGroup drops a group's cursors (and with DeleteMetadata its
// subscriptions) on one queue or all of the tenant's queues.
func (e *Engine) DeleteGroup(ctx context.Context, c *wire.DeleteGroupCmd) (wire.CountResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindDeleteGroup, c.Encode(nil), wire.DecodeCountResult)
}

// UpdateSubscription changes where a group starts untouched partitions.
func (e *Engine) UpdateSubscription(ctx context.Context, c *wire.SubscriptionCmd) (wire.CountResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindSubscription, c.Encode(nil), wire.DecodeCountResult)
}

// PurgeDLQ deletes matching dead-letter rows, one bounded command at a
// time until none is left, and returns how many it deleted.
func (e *Engine) PurgeDLQ(ctx context.Context, c *wire.DLQPurgeCmd) (uint64, error) {
	var n uint64
	for {
		r, err := proposeOne(ctx, e, c.Tenant, wire.KindDLQPurge, c.Encode(nil), wire.DecodeCountResult)
		if err != nil {
			return n, err
		}
		n += r.N
		if r.Code != wire.CodeOK || !r.More {
			return n, r.Code.Err()
		}
	}
}

// ReplayDLQ pushes a dead-lettered message again.
func (e *Engine) ReplayDLQ(ctx context.Context, c *wire.DLQReplayCmd) (wire.DLQReplayResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindDLQReplay, c.Encode(nil), wire.DecodeDLQReplayResult)
}

// DeleteMessage erases one message's payload.
func (e *Engine) DeleteMessage(ctx context.Context, c *wire.DeleteMessageCmd) (wire.CodeResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindDeleteMessage, c.Encode(nil), wire.DecodeCodeResult)
}

// CommitPositions sets several group positions in one raft entry; each
// answers its own code (a missing queue fails only its own position).
func (e *Engine) CommitPositions(ctx context.Context, tenant wire.ID, cmds []wire.CommitPositionCmd) ([]wire.CodeResult, error) {
	enc := make([]wire.Command, len(cmds))
	for i := range cmds {
		enc[i] = wire.Command{Kind: wire.KindCommitPosition, Body: cmds[i].Encode(nil)}
	}
	res, err := e.Propose(ctx, tenant, enc...)
	if err != nil {
		return nil, err
	}
	out := make([]wire.CodeResult, len(res))
	for i, b := range res {
		code, _ := wire.ResultCode(b)
		out[i] = wire.CodeResult{Code: code}
	}
	return out, nil
}
