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
	// A lease past its expiry is already over: its messages go back to the
	// group, and an ack naming it is stale.
	if p := s.parts[it.PartitionID]; p != nil && p.q.tenant == tenant {
		if c := p.cursors.get(group); c != nil && c.lease != nil && c.lease.expiresMs <= ctx.nowMs && !s.anyPin(p.id, group) {
			s.closeLease(ctx, p.q, p, c)
		}
	}
	t := s.resolveAck(ctx, tenant, group, it)
	if t.code != wire.CodeOK {
		return wire.AckOutcome{Code: t.code}
	}
	p, q, c, off := t.p, t.p.q, t.c, t.off
	l := c.lease
	i := off - l.from
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

// ackTarget is what an ack item names: the partition, the group's cursor
// and the message's offset; code is OK only when the item can be applied.
type ackTarget struct {
	p    *partState
	c    *cursor
	off  uint64
	code wire.Code
}

// resolveAck finds what an ack item names without changing anything, so a
// transaction can check all its acks before applying any. The item can be
// applied when its message is pending in the group's live lease and the
// item names that lease or no lease at all (an unfenced ack). An expired
// lease counts as over.
func (s *Store) resolveAck(ctx *applyCtx, tenant wire.ID, group string, it *wire.AckItem) ackTarget {
	p := s.partByID(ctx, it.PartitionID)
	if p == nil && s.movedPID(it.PartitionID) {
		// Its leases ended at the seal (move.go): answered as an
		// expired lease is.
		if !it.LeaseID.IsZero() {
			return ackTarget{code: wire.CodeLeaseMismatch}
		}
		return ackTarget{code: wire.CodeNotLeased}
	}
	if p == nil || p.q.tenant != tenant {
		return ackTarget{code: wire.CodePartitionNotFound}
	}
	c := p.cursors.get(group)
	if c == nil {
		return ackTarget{code: wire.CodeNotLeased}
	}
	if s.cursorPinned(ctx, p.id, group) {
		// A prepared cross-group transaction acknowledges in this lease.
		return ackTarget{code: wire.CodeConflict}
	}
	l := c.lease
	if l != nil && l.expiresMs <= ctx.nowMs && !s.cursorOwnPin(ctx, p.id, group) {
		l = nil
	}
	var off uint64
	var found bool
	if l != nil && it.Resolved && it.LeaseID == l.id && it.LeaseFrom == l.from && it.LeaseTo == l.to &&
		it.Offset >= l.from && it.Offset < l.to && it.Offset >= p.start {
		// Its proposer found it in this very lease (ResolveAckOffsets).
		off, found = it.Offset, true
	} else {
		off, found = s.findOffset(ctx, p, l, it.TxnID)
	}
	t := ackTarget{p: p, c: c, off: off}
	switch {
	case !found:
		t.code = wire.CodeMessageNotFound
	case off < c.pos:
		t.code = wire.CodeNoop
	case l == nil || off < l.from || off >= l.to:
		t.code = wire.CodeNotLeased
		if !it.LeaseID.IsZero() {
			t.code = wire.CodeLeaseMismatch
		}
	case !it.LeaseID.IsZero() && it.LeaseID != l.id:
		t.code = wire.CodeLeaseMismatch
	case l.states[off-l.from] != msgPending:
		t.code = wire.CodeNoop
	}
	return t
}

// findOffset resolves a transaction id to an offset in p. An ack nearly
// always names a message of the group's live lease l, so l's records are
// looked at first, through an index of them built once per apply batch:
// one sequential read of the chunks the pop just read, instead of a random
// transaction-index lookup per message (most of an ack's cost otherwise).
// Then the transaction index: explicit id, then message id.
func (s *Store) findOffset(ctx *applyCtx, p *partState, l *lease, txn []byte) (uint64, bool) {
	if l != nil {
		if off, ok := s.leaseIndex(ctx, p, l)[string(txn)]; ok {
			return off, true
		}
	}
	return s.indexedOffset(ctx, p, txn)
}

// leaseKeyT identifies a lease's records: a lease id with its range (a
// retried pop may reuse an id once its first lease is gone).
type leaseKeyT struct {
	id       wire.ID
	from, to uint64
}

// leaseIndex maps the transaction ids of l's records (explicit, or the
// message id's text) to their offsets. Records without a transaction
// index (Kafka produce) are found this way too.
func (s *Store) leaseIndex(ctx *applyCtx, p *partState, l *lease) txnOffsets {
	k := leaseKeyT{l.id, l.from, l.to}
	if idx, ok := ctx.leaseIdx[k]; ok {
		return idx
	}
	idx := make(txnOffsets, l.to-l.from)
	s.readRange(ctx, p.id, l.from, l.to, idx.add)
	if ctx.leaseIdx == nil {
		ctx.leaseIdx = map[leaseKeyT]txnOffsets{}
	}
	ctx.leaseIdx[k] = idx
	return idx
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
	s.unindexLease(l.id, p)
	c.lease = nil
	if sub := q.subs[c.group]; sub != nil {
		// Consumed to the head: nothing left for the group here until a
		// push marks it again. A mark left behind made every long poll's
		// readiness check read the partition back (partcache.go), for
		// each partition a drain had finished.
		if c.pos < p.next {
			sub.ready.set(p.index)
		} else {
			sub.ready.clear(p.index)
		}
	}
	ctx.saveCursor(p, c)
	ctx.touch(q)
}

// applyExtendLease moves a live lease's expiry: of each partition holding
// it in this group when it is shared. A holder whose lease expired before
// the extend is closed instead (its messages go back to the group); the
// extend answers not found when none was renewed.
func (s *Store) applyExtendLease(ctx *applyCtx, c *wire.ExtendLeaseCmd) wire.ExtendLeaseResult {
	res := wire.ExtendLeaseResult{Code: wire.CodeLeaseNotFound}
	s.leaseHolders(c.LeaseID, func(ref leaseRef) bool {
		if ref.part.q.tenant != c.Tenant {
			return true
		}
		cur := ref.part.cursors.get(ref.group)
		if cur == nil || cur.lease == nil || cur.lease.id != c.LeaseID {
			return true
		}
		if cur.lease.expiresMs <= ctx.nowMs && !s.anyPin(ref.part.id, ref.group) {
			s.closeLease(ctx, ref.part.q, ref.part, cur)
			return true
		}
		cur.lease.expiresMs = ctx.nowMs + int64(c.Ms)
		ctx.saveCursor(ref.part, cur)
		res.Code, res.ExpiresMs = wire.CodeOK, cur.lease.expiresMs
		res.Renewed++
		return true
	})
	return res
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
