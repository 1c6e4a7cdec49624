package raftgroups

import (
	"context"
	"fmt"

	"github.com/queen-mq/queen/wire"
)

// Transaction commits a transaction's operations together in one raft
// entry, or none of them (the result says why).
func (e *Engine) Transaction(ctx context.Context, c *wire.TxnCmd) (wire.TxnResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindTransaction, c.Encode(nil), wire.DecodeTxnResult)
}

// AckGroups applies ack commands of several consumer groups of one tenant
// in one raft entry (a batch ack whose items name different groups).
func (e *Engine) AckGroups(ctx context.Context, tenant wire.ID, cmds []wire.AckCmd) ([]wire.AckResult, error) {
	return proposeAll(ctx, e, tenant, wire.KindAck, cmds, wire.DecodeAckResult)
}

// proposeAll proposes commands of one kind in one raft entry and decodes
// their results; a command the state machine could not decode is an error.
func proposeAll[C any, PC interface {
	*C
	Encode([]byte) []byte
}, R any](ctx context.Context, e *Engine, tenant wire.ID, kind wire.Kind, cmds []C, decode func([]byte) (R, error)) ([]R, error) {
	enc := make([]wire.Command, len(cmds))
	for i := range cmds {
		enc[i] = wire.Command{Kind: kind, Body: PC(&cmds[i]).Encode(nil)}
	}
	res, err := e.Propose(ctx, tenant, enc...)
	if err != nil {
		return nil, err
	}
	out := make([]R, len(res))
	for i, b := range res {
		if code, bare := wire.ResultCode(b); bare && code != wire.CodeOK {
			return nil, fmt.Errorf("raftgroups: %w", code.Err())
		}
		if out[i], err = decode(b); err != nil {
			return nil, fmt.Errorf("raftgroups: result of a kind %d command: %w", kind, err)
		}
	}
	return out, nil
}
