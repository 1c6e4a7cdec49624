package storage

import (
	"github.com/queen-mq/queen/wire"
)

// MaxPopBatch bounds how many messages one pop may lease.
const MaxPopBatch = 10000

// applyPop claims partitions for a consumer group and leases their next
// messages. At most one lease exists per (partition, group): a partition
// leased to the group is skipped, which is what keeps order within a
// partition even with competing consumers.
func (s *Store) applyPop(ctx *applyCtx, c *wire.PopCmd) wire.PopResult {
	var res wire.PopResult
	q := s.queue(c.Tenant, c.Queue)
	if q == nil {
		res.Code = wire.CodeQueueNotFound
		return res
	}
	if c.Batch == 0 || c.Batch > MaxPopBatch || c.Group == "" || (len(c.LeaseIDs) == 0 && !c.CommitOnDelivery) {
		res.Code = wire.CodeBadRequest
		return res
	}
	// One id for several partitions is a shared lease, which a build
	// before FormatV4 would index as one partition's: refused below it
	// (the proposer never sends one there).
	shared := c.SharedLease()
	if shared && !s.at(wire.FormatV4) {
		res.Code = wire.CodeBadRequest
		return res
	}
	// A retried proposal finds its leases already taken: answer with them.
	if claims := s.replayedClaims(c, q, shared); claims != nil {
		res.Claims = claims
		return res
	}
	q.count(ctx.nowMs, Activity{PopOps: 1})
	sub := s.subscribe(ctx, q, c.Group, c.SubMode, c.SubFromMs, c.SubCreatedMs)
	leaseMs := int64(c.LeaseMs)
	if leaseMs == 0 {
		leaseMs = int64(q.cfg.LeaseTimeSec) * 1000
	}
	maxClaims := c.PartitionLimit()
	remaining := uint64(c.Batch)
	claim := func(p *partState) {
		var id wire.ID
		if !c.CommitOnDelivery {
			id = c.LeaseIDs[len(res.Claims)]
		}
		if cl, ok := s.claim(ctx, q, p, sub, id, remaining, leaseMs, c.CommitOnDelivery); ok {
			res.Claims = append(res.Claims, cl)
			remaining -= cl.To - cl.From
			a := Activity{Popped: cl.To - cl.From}
			if c.CommitOnDelivery {
				a.Completed = a.Popped
			}
			q.count(ctx.nowMs, a)
		}
	}
	if c.Partition != "" {
		if p := s.partNamed(ctx, q, c.Partition); p != nil {
			claim(p)
		}
		return res
	}
	if len(q.pids) == 0 {
		return res
	}
	sub.ready.forEachFrom(c.StartHint%uint32(len(q.pids)), func(i uint32) bool {
		p := s.partAt(ctx, q, i)
		if p == nil {
			sub.ready.clear(i)
			return true
		}
		claim(p)
		return len(res.Claims) < maxClaims && remaining > 0
	})
	return res
}

// replayedClaims returns the claims of a pop whose lease ids already exist,
// or nil. A shared lease's claims are its holders in this group, in claim
// order; they must be the group's on the queue, so that an id some other
// pop happened to draw is never taken for this one's.
func (s *Store) replayedClaims(c *wire.PopCmd, q *queueState, shared bool) []wire.Claim {
	var out []wire.Claim
	ids := c.LeaseIDs
	if shared {
		ids = ids[:1]
	}
	for _, id := range ids {
		if _, ok := s.leases[id]; !ok {
			continue // the first attempt: nothing to look through
		}
		s.leaseHolders(id, func(ref leaseRef) bool {
			cur := ref.part.cursors.get(ref.group)
			if ref.part.q != q || ref.group != c.Group || cur == nil || cur.lease == nil || cur.lease.id != id {
				return true
			}
			out = append(out, claimOf(ref.part, cur, cur.lease.from, cur.lease.to, cur.redeliverTo))
			return true
		})
	}
	return out
}

// claimOf describes a claim of [from, to); messages below redeliverTo are
// redeliveries counted by c.attempt.
func claimOf(p *partState, c *cursor, from, to, redeliverTo uint64) wire.Claim {
	cl := wire.Claim{PartitionID: p.id, PartitionIndex: p.index, Partition: p.name, From: from, To: to}
	if c.lease != nil {
		cl.LeaseID = c.lease.id
		cl.LeaseExpiresMs = c.lease.expiresMs
	}
	if c.attempt > 1 {
		cl.RedeliverTo, cl.Attempt = min(redeliverTo, to), c.attempt
	}
	return cl
}

// claim leases up to limit messages of p for the group, if p is free.
func (s *Store) claim(ctx *applyCtx, q *queueState, p *partState, sub *subscription, id wire.ID, limit uint64, leaseMs int64, commitOnDelivery bool) (wire.Claim, bool) {
	if s.anyPin(p.id, sub.group) {
		return wire.Claim{}, false // a prepared transaction holds the cursor
	}
	c := p.cursors.get(sub.group)
	if c == nil {
		pos := s.initialPosition(ctx, p, sub)
		if pos >= p.next {
			// Nothing for the group: leave no cursor behind. A pop may
			// visit a partition only because a ready set rebuilt after a
			// restart (or with partitions out of memory) marks more than
			// it must, so what such a visit changes would differ between
			// replicas.
			sub.ready.clear(p.index)
			return wire.Claim{}, false
		}
		c = newCursor(ctx, p, sub, pos)
	}
	if c.lease != nil {
		if c.lease.expiresMs > ctx.nowMs {
			return wire.Claim{}, false
		}
		s.closeLease(ctx, q, p, c)
	}
	if c.pos < p.start {
		// Retention removed messages the group had not reached.
		s.moveCursorsToStart(ctx, q, p)
	}
	end := s.stepOverSkips(ctx, p, c)
	if c.pos >= p.next {
		sub.ready.clear(p.index)
		return wire.Claim{}, false
	}
	to := end
	if to-c.pos > limit {
		to = c.pos + limit
	}
	to = s.visibleUpTo(ctx, q, p, c.pos, to)
	if to <= c.pos {
		return wire.Claim{}, false
	}
	// Messages below redeliverTo were delivered before: count this delivery.
	redeliverTo := c.redeliverTo
	if redeliverTo > c.pos {
		c.attempt++
	} else {
		c.attempt = 1
	}
	c.redeliverTo = max(redeliverTo, to)
	from := c.pos
	if commitOnDelivery {
		cl := claimOf(p, c, from, to, redeliverTo)
		c.pos, c.headFailures, c.lastError = to, 0, ""
		if c.pos >= p.next {
			sub.ready.clear(p.index)
		}
		ctx.saveCursor(p, c)
		ctx.touch(q)
		return cl, true
	}
	c.lease = &lease{id: id, from: from, to: to, expiresMs: ctx.nowMs + leaseMs,
		states: make([]uint8, to-from), pending: int(to - from)}
	s.indexLease(id, p, c.group)
	ctx.saveCursor(p, c)
	return claimOf(p, c, from, to, redeliverTo), true
}

// stepOverSkips moves the group's cursor in p past the offsets of Kafka
// transactions no pop delivers (aborted batches, markers) and returns where
// what a pop may claim from there ends: the next skipped range, the first
// offset of a transaction still open (the last stable offset), or the head.
func (s *Store) stepOverSkips(ctx *applyCtx, p *partState, c *cursor) uint64 {
	t := s.kafka.txnsOf(p.id)
	if t == nil {
		return p.next
	}
	pos, end := t.popWindow(c.pos, p.next)
	if pos != c.pos {
		c.pos, c.headFailures, c.lastError = pos, 0, ""
		ctx.saveCursor(p, c)
	}
	return max(end, c.pos)
}

// visibleUpTo trims [from, to) to the messages the queue lets consumers see
// now: a partition inside its windowBuffer shows nothing, and with
// delayedProcessing only messages older than the delay are visible.
func (s *Store) visibleUpTo(ctx *applyCtx, q *queueState, p *partState, from, to uint64) uint64 {
	if w := int64(q.cfg.WindowBufferSec) * 1000; w > 0 && ctx.nowMs-p.lastWriteMs < w {
		return from
	}
	d := int64(q.cfg.DelayedProcessingSec) * 1000
	if d == 0 {
		return to
	}
	cutoff := ctx.nowMs - d
	ci := newChunkIter(ctx.b, ctx.s.segs, p.id)
	defer ctx.closeIter(ci)
	limit := from
	for ok := ci.Seek(from); ok && ci.Base() < to && ci.Meta().appendMs <= cutoff; ok = ci.Next() {
		limit = ci.End()
	}
	if limit > to {
		limit = to
	}
	if limit < from {
		limit = from
	}
	return limit
}
