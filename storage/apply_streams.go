package storage

import (
	"github.com/queen-mq/queen/wire"
)

// Streams' cumulative acknowledgment (wire.StreamAckOp), the source side of
// a streaming cycle. It is only ever a transaction operation: the cycle's
// state writes and sink pushes commit with it or not at all.

// streamAckDefaultError is the DLQ row's error when a failed cycle gives
// none (Queen's text).
const streamAckDefaultError = "Streaming cycle reported failure"

// streamAckTarget is what a stream acknowledgment names.
type streamAckTarget struct {
	p    *partState
	c    *cursor
	l    *lease // the group's live lease there, or nil
	off  uint64
	code wire.Code
}

// resolveStreamAck finds what o names without changing anything, so the
// transaction's check can refuse it before anything applied: the message
// must be in the partition at or past the group's cursor, and a lease id,
// when given, must be the group's live lease in the partition.
func (s *Store) resolveStreamAck(ctx *applyCtx, tenant wire.ID, o *wire.StreamAckOp) streamAckTarget {
	if !s.at(wire.FormatV3) {
		return streamAckTarget{code: wire.CodeBadRequest} // as every build before the kind answers
	}
	p := s.partByID(ctx, o.PartitionID)
	if p == nil || p.q.tenant != tenant || o.Group == "" || len(o.TxnID) == 0 {
		return streamAckTarget{code: wire.CodePartitionNotFound}
	}
	c := p.cursors.get(o.Group)
	if c == nil {
		return streamAckTarget{code: wire.CodeNotLeased}
	}
	if s.cursorPinned(ctx, p.id, o.Group) {
		return streamAckTarget{code: wire.CodeConflict} // another prepared transaction acknowledges here
	}
	l := c.lease
	if l != nil && l.expiresMs <= ctx.nowMs && !s.cursorOwnPin(ctx, p.id, o.Group) {
		l = nil
	}
	if !o.LeaseID.IsZero() && (l == nil || l.id != o.LeaseID) {
		return streamAckTarget{code: wire.CodeLeaseMismatch}
	}
	off, found := s.findOffset(ctx, p, l, o.TxnID)
	t := streamAckTarget{p: p, c: c, l: l, off: off}
	switch {
	case !found:
		t.code = wire.CodeMessageNotFound
	case off < c.pos:
		t.code = wire.CodeNoop // acknowledged already: the cycle is a repeat
	case off >= p.next:
		t.code = wire.CodeMessageNotFound
	default:
		t.code = wire.CodeOK
	}
	return t
}

// applyStreamAck applies a stream acknowledgment the transaction's check
// resolved.
func (s *Store) applyStreamAck(ctx *applyCtx, tenant wire.ID, o *wire.StreamAckOp) wire.StreamAckResult {
	t := s.resolveStreamAck(ctx, tenant, o)
	if t.code != wire.CodeOK {
		return wire.StreamAckResult{Code: t.code}
	}
	p, q, c, l, off := t.p, t.p.q, t.c, t.l, t.off
	if c.lease != nil && l == nil {
		// Expired: its messages are back with the group, as an ack finds.
		s.closeLease(ctx, q, p, c)
	}
	// Closing an expired lease may have moved the cursor past off already.
	next := max(off+1, c.pos)
	res := wire.StreamAckResult{Code: wire.CodeOK, Offset: off}
	sub := s.subscribe(ctx, q, o.Group, wire.SubAll, 0, 0)
	q.count(ctx.nowMs, Activity{AckOps: 1})
	switch o.Status {
	case wire.AckFailed, wire.AckDLQ:
		text := o.Error
		if text == "" {
			text = streamAckDefaultError
		}
		res.DLQ = q.cfg.DLQEnabled()
		s.deadLetter(ctx, q, p, c, off, text, c.headFailures+1)
		q.count(ctx.nowMs, Activity{Failed: 1})
		s.setPosition(ctx, p, sub, c, next)
		res.LeaseReleased = true
	default:
		q.count(ctx.nowMs, Activity{Completed: uint64(o.Count)})
		if l == nil || o.Release || off+1 >= l.to {
			s.setPosition(ctx, p, sub, c, next)
			res.LeaseReleased = true
			break
		}
		// The lease stays: what it holds past off comes back, in order,
		// when it expires (closeLease skips what the cursor passed).
		for i := l.from; i <= off && i < l.to; i++ {
			if l.states[i-l.from] == msgPending {
				l.states[i-l.from] = msgCompleted
				l.pending--
			}
		}
		c.pos, c.headFailures, c.lastError = next, 0, ""
		if c.redeliverTo <= c.pos {
			c.redeliverTo, c.attempt = 0, 0
		}
		ctx.saveCursor(p, c)
		ctx.touch(q)
	}
	return res
}
