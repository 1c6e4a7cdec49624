package storage

import (
	"github.com/queen-mq/queen/wire"
)

// applyAck records each item's outcome in its partition's lease. When the
// last message of a lease is acknowledged the lease closes: the cursor moves
// past the completed prefix, exhausted messages go to the dead-letter queue,
// and the rest is redelivered by the next pop.
func (s *Store) applyAck(ctx *applyCtx, c *wire.AckCmd) wire.AckResult {
	res := wire.AckResult{Items: make([]wire.AckOutcome, len(c.Items))}
	var last *queueState // counts one ack command per queue it touches in a row
	for i := range c.Items {
		res.Items[i] = s.ackOne(ctx, c.Tenant, c.Group, &c.Items[i])
		if p := s.parts[c.Items[i].PartitionID]; p != nil && p.q != last {
			last = p.q
			last.count(ctx.nowMs, Activity{AckOps: 1})
		}
	}
	return res
}

func (s *Store) ackOne(ctx *applyCtx, tenant wire.ID, group string, it *wire.AckItem) wire.AckOutcome {
	p := s.parts[it.PartitionID]
	if p == nil || p.q.tenant != tenant {
		return wire.AckOutcome{Code: wire.CodePartitionNotFound}
	}
	q := p.q
	c := p.cursors[group]
	if c == nil {
		return wire.AckOutcome{Code: wire.CodeNotLeased}
	}
	// A lease past its expiry is already over: its messages go back to the
	// group, and an ack naming it is stale.
	if c.lease != nil && c.lease.expiresMs <= ctx.nowMs {
		s.closeLease(ctx, q, p, c)
	}
	off, found := s.findOffset(ctx, p, c, it.TxnID)
	if !found {
		return wire.AckOutcome{Code: wire.CodeMessageNotFound}
	}
	if off < c.pos {
		return wire.AckOutcome{Code: wire.CodeNoop}
	}
	l := c.lease
	if l == nil || off < l.from || off >= l.to {
		if !it.LeaseID.IsZero() {
			return wire.AckOutcome{Code: wire.CodeLeaseMismatch}
		}
		return wire.AckOutcome{Code: wire.CodeNotLeased}
	}
	if !it.LeaseID.IsZero() && it.LeaseID != l.id {
		return wire.AckOutcome{Code: wire.CodeLeaseMismatch}
	}
	i := off - l.from
	if l.states[i] != msgPending {
		return wire.AckOutcome{Code: wire.CodeNoop}
	}
	out := wire.AckOutcome{Code: wire.CodeOK}
	switch it.Status {
	case wire.AckFailed:
		l.states[i] = msgFailed
		q.count(ctx.nowMs, Activity{Failed: 1})
		// Failures are counted for the message at the cursor; one that
		// would exceed the queue's retry limit is dead-lettered at once so
		// this ack can say so.
		failures := uint32(1)
		if off == c.pos {
			failures += c.headFailures
		}
		if failures > q.cfg.RetryLimit {
			l.states[i] = msgDLQ
			out.DLQ = q.cfg.DLQEnabled()
		}
		l.noteError(off, it.Error)
	case wire.AckRetry:
		l.states[i] = msgRetry
	case wire.AckDLQ:
		l.states[i] = msgDLQ
		out.DLQ = q.cfg.DLQEnabled()
		l.noteError(off, it.Error)
	default:
		l.states[i] = msgCompleted
		q.count(ctx.nowMs, Activity{Completed: 1})
	}
	l.pending--
	if l.pending == 0 {
		s.closeLease(ctx, q, p, c)
		out.LeaseReleased = true
	} else {
		ctx.saveCursor(p, c)
	}
	return out
}

// findOffset resolves a transaction id to an offset in p: through the
// transaction index (explicit id, then message id), or, for records stored
// without an index (Kafka produce), by scanning the group's live lease.
func (s *Store) findOffset(ctx *applyCtx, p *partState, c *cursor, txn []byte) (uint64, bool) {
	if off, ok := s.indexedOffset(ctx, p, txn); ok {
		return off, true
	}
	id, err := wire.ParseID(string(txn))
	if err != nil || c.lease == nil {
		return 0, false
	}
	var off uint64
	found := false
	s.readRange(ctx.b, p.id, c.lease.from, c.lease.to, func(o uint64, body []byte) bool {
		h, err := wire.ParseRecordHead(body)
		if err == nil && h.MsgID == id && h.Flags&wire.FlagTxnID == 0 {
			off, found = o, true
			return false
		}
		return true
	})
	return off, found
}

// closeLease ends c's lease: the cursor advances over the completed and
// dead-lettered prefix, a failed head message counts one failure (and is
// dead-lettered past the retry limit), and whatever follows the first
// message that is not done is delivered again by a later pop.
func (s *Store) closeLease(ctx *applyCtx, q *queueState, p *partState, c *cursor) {
	l := c.lease
walk:
	for off := l.from; off < l.to; off++ {
		if off < c.pos {
			continue // a position commit moved past it
		}
		if off > c.pos {
			break
		}
		switch l.states[off-l.from] {
		case msgCompleted:
		case msgDLQ:
			s.deadLetter(ctx, q, p, c, off, l.errors[off], c.headFailures+1)
		case msgFailed:
			c.headFailures++
			c.lastError = l.errors[off]
			if c.headFailures <= q.cfg.RetryLimit {
				break walk
			}
			s.deadLetter(ctx, q, p, c, off, l.errors[off], c.headFailures)
		default:
			break walk
		}
		c.pos, c.headFailures, c.lastError = off+1, 0, ""
	}
	delete(s.leases, l.id)
	ctx.del(leaseKey(l.id))
	c.lease = nil
	if sub := q.subs[c.group]; sub != nil && c.pos < p.next {
		sub.ready.set(p.index)
	}
	ctx.saveCursor(p, c)
	ctx.touch(q)
}

// applyExtendLease moves a live lease's expiry.
func (s *Store) applyExtendLease(ctx *applyCtx, c *wire.ExtendLeaseCmd) wire.ExtendLeaseResult {
	ref, ok := s.leases[c.LeaseID]
	if !ok || ref.part.q.tenant != c.Tenant {
		return wire.ExtendLeaseResult{Code: wire.CodeLeaseNotFound}
	}
	cur := ref.part.cursors[ref.group]
	if cur == nil || cur.lease == nil || cur.lease.id != c.LeaseID {
		return wire.ExtendLeaseResult{Code: wire.CodeLeaseNotFound}
	}
	if cur.lease.expiresMs <= ctx.nowMs {
		s.closeLease(ctx, ref.part.q, ref.part, cur)
		return wire.ExtendLeaseResult{Code: wire.CodeLeaseNotFound}
	}
	cur.lease.expiresMs = ctx.nowMs + int64(c.Ms)
	ctx.saveCursor(ref.part, cur)
	return wire.ExtendLeaseResult{Code: wire.CodeOK, ExpiresMs: cur.lease.expiresMs}
}

// noteError keeps the error text an ack gave for the message at off.
func (l *lease) noteError(off uint64, text string) {
	if text == "" {
		return
	}
	if l.errors == nil {
		l.errors = map[uint64]string{}
	}
	l.errors[off] = text
}
