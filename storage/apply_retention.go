package storage

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/queen-mq/queen/wire"
)

// Intervals and per-tick budgets of the queue sweepers (spec §4.10:
// retention every 5 s with a visit budget of 8192; the expiry sweeper every
// second, 1000 messages a batch).
const (
	retentionIntervalMs = 5000
	maxWaitIntervalMs   = 1000
)

// Budgets are variables only so tests can spread a pass over many ticks.
var (
	retentionBudget = 8192
	maxWaitBudget   = 1000
)

// maxWaitError is the DLQ error text of a message expired by
// maxWaitTimeSeconds.
const maxWaitError = "maxWaitTimeSeconds exceeded"

// sweepDue is sweepState.passDue for a sweeper that may never have run;
// it only reads, so due can call it under the read lock.
func (s *Store) sweepDue(name string, nowMs, intervalMs int64) bool {
	st := s.sweeps[name]
	if st == nil {
		return true
	}
	return st.passDue(nowMs, intervalMs)
}

// partitionSweeper is a sweeper that walks the partitions of the queues
// that match (sweepPartitions) every intervalMs with a budget per tick.
type partitionSweeper struct {
	id         string
	intervalMs int64
	budget     *int
	match      func(*queueState) bool
	visit      func(*Store, *applyCtx, *queueState, *partState, int) (int, bool)
}

func (w partitionSweeper) name() string { return w.id }

func (w partitionSweeper) due(s *Store, nowMs int64) bool {
	return s.anyTimed(w.match) && s.sweepDue(w.id, nowMs, w.intervalMs)
}

func (w partitionSweeper) sweep(s *Store, ctx *applyCtx) {
	s.sweepPartitions(ctx, w.id, w.intervalMs, *w.budget, s.timed, w.match, true, func(ctx *applyCtx, q *queueState, p *partState, budget int) (int, bool) {
		return w.visit(s, ctx, q, p, budget)
	})
}

// retentionSweeper deletes old messages of queues with retentionEnabled:
// everything older than retentionSeconds, and what every consumer has
// consumed once it is older than completedRetentionSeconds.
var retentionSweeper = partitionSweeper{id: "retention", intervalMs: retentionIntervalMs, budget: &retentionBudget,
	match: func(q *queueState) bool { return retentionOn(&q.cfg) }, visit: (*Store).retainPartition}

// retainPartition deletes p's oldest chunks while they are past the
// queue's retention, with their transaction-index entries, and moves the
// log start past them. Chunks are deleted whole: a chunk's records share
// one append time, and both rules hold for a prefix of the log.
func (s *Store) retainPartition(ctx *applyCtx, q *queueState, p *partState, budget int) (int, bool) {
	if p.start >= p.next {
		return 0, true
	}
	pendingCut, doneCut := int64(math.MinInt64), int64(math.MinInt64)
	if q.cfg.RetentionSec > 0 {
		pendingCut = ctx.nowMs - int64(q.cfg.RetentionSec)*1000
	}
	if q.cfg.CompletedRetentionSec > 0 {
		doneCut = ctx.nowMs - int64(q.cfg.CompletedRetentionSec)*1000
	}
	consumed := consumedUpTo(q, p)
	return s.dropPrefix(ctx, ctx.chunksOf(p.id), q, p, budget, 0, func(m chunkMeta, end uint64) bool {
		return m.appendMs < pendingCut || (m.appendMs < doneCut && end <= consumed)
	})
}

// dropPrefix deletes p's chunks from its log start while old says so, with
// their transaction-index entries, spending at most budget records (at
// least one chunk's), and moves the log start past them, or up to at when
// that is further. It reads the chunks through ci, an iterator over p the
// caller owns. It returns the records spent and whether it stopped only
// because old did.
func (s *Store) dropPrefix(ctx *applyCtx, ci *chunkIter, q *queueState, p *partState, budget int, at uint64, old func(m chunkMeta, end uint64) bool) (int, bool) {
	type chunkRef struct {
		base  uint64
		seq   uint64
		count int
		body  []byte
	}
	var drop []chunkRef
	spent, done := 0, true
	// The chunk reaching p.next is the last: stepping past it would only
	// find the bound, a quarter of a one-message partition's cost.
	for ok := ci.SeekBase(p.start); ok && ci.Base() < p.next; ok = ci.End() < p.next && ci.Next() {
		m := ci.Meta()
		if !old(m, ci.End()) {
			break
		}
		// Always make progress on a partition, even when one chunk holds
		// more records than a tick's budget.
		if spent > 0 && spent+m.count > budget {
			done = false
			break
		}
		records, err := ci.Records()
		if err != nil {
			ctx.fail(err)
			break
		}
		spent += m.count
		drop = append(drop, chunkRef{base: ci.Base(), seq: m.seq, count: m.count, body: records}) // Records reads into a buffer of its own
	}
	ctx.fail(ci.err)
	if ctx.err != nil || (len(drop) == 0 && at <= p.start) {
		return spent, done
	}
	for _, c := range drop {
		s.dropTxnIndex(ctx, p, c.base, c.body)
		deleteChunk(ctx, p.id, c.base, c.seq)
	}
	if !done {
		at = 0 // the chunks past the budget are still there
	}
	if len(drop) > 0 {
		last := drop[len(drop)-1]
		at = max(at, last.base+uint64(last.count))
	}
	p.start = max(p.start, min(at, p.next))
	ctx.markDirty(p)
	s.moveCursorsToStart(ctx, q, p)
	ctx.touch(q)
	return spent, done
}

// consumedUpTo is the offset below which every consumer of p is done: the
// smallest cursor position, or the log start while a subscribed group has
// not touched a partition that holds messages for it.
func consumedUpTo(q *queueState, p *partState) uint64 {
	if len(p.cursors) == 0 {
		return p.start
	}
	for g, sub := range q.subs {
		if p.cursors.get(g) == nil && mayHaveNewFor(p, sub) {
			return p.start
		}
	}
	pos := uint64(math.MaxUint64)
	for _, c := range p.cursors {
		pos = min(pos, c.pos)
	}
	return pos
}

// dropTxnIndex deletes the transaction-index entries of the records of a
// chunk at base. An explicit id's entry is deleted only while it still
// points at this record: the same id pushed again after its dedup window
// points at the newer message.
func (s *Store) dropTxnIndex(ctx *applyCtx, p *partState, base uint64, records []byte) {
	ri := wire.NewRecordIter(records)
	for off := base; ; off++ {
		body, _, ok := ri.Next()
		if !ok {
			return
		}
		dropRecordTxnIndex(ctx, p, off, body)
	}
}

// dropRecordTxnIndex deletes the transaction-index entry of the record at
// off (see dropTxnIndex).
func dropRecordTxnIndex(ctx *applyCtx, p *partState, off uint64, body []byte) {
	h, err := wire.ParseRecordHead(body)
	if err != nil {
		return
	}
	explicit, id := h.TxnKey()
	k := txnKey(p.id, explicit, id)
	if explicit {
		if v, ok := ctx.get(k); !ok || len(v) != 16 || binary.BigEndian.Uint64(v[:8]) != off {
			return
		}
	}
	ctx.del(k)
}

// moveCursorsToStart moves every cursor behind p's log start up to it. A
// lease reaching below the start is dropped (its remaining messages are
// redelivered, and an ack naming it is stale). Each cursor changes on its
// own, so the map's order decides nothing.
func (s *Store) moveCursorsToStart(ctx *applyCtx, q *queueState, p *partState) {
	for _, c := range p.cursors {
		if c.pos >= p.start {
			continue
		}
		if l := c.lease; l != nil && l.from < p.start {
			s.unindexLease(l.id, p)
			c.lease = nil
		}
		c.pos, c.headFailures, c.lastError = p.start, 0, ""
		if c.redeliverTo <= p.start {
			c.attempt, c.redeliverTo = 0, 0
		}
		if sub := q.subs[c.group]; sub != nil && c.pos < p.next {
			sub.ready.set(p.index)
		}
		ctx.saveCursor(p, c)
	}
}

// maxWaitSweeper expires messages that waited longer than the queue's
// maxWaitTimeSeconds for a consumer group: they go to the dead-letter queue
// (or are dropped without one) and the group moves past them. Messages in
// a live lease are being processed and are left alone.
var maxWaitSweeper = partitionSweeper{id: "maxwait", intervalMs: maxWaitIntervalMs, budget: &maxWaitBudget,
	match: func(q *queueState) bool { return q.cfg.MaxWaitTimeSec > 0 }, visit: (*Store).expireWaiting}

func (s *Store) expireWaiting(ctx *applyCtx, q *queueState, p *partState, budget int) (int, bool) {
	if p.start >= p.next || len(q.subs) == 0 {
		return 0, true
	}
	cut := ctx.nowMs - int64(q.cfg.MaxWaitTimeSec)*1000
	// Groups in name order: dead-letter rows take ids in sequence, so the
	// order must be the same on every replica.
	groups := make([]string, 0, len(q.subs))
	for g := range q.subs {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	spent := 0
	for _, g := range groups {
		if spent >= budget {
			return spent, false
		}
		sub := q.subs[g]
		c := p.cursors.get(g)
		if c == nil {
			if !mayHaveNewFor(p, sub) {
				continue
			}
			c = s.cursorFor(ctx, p, sub)
		}
		if c.lease != nil {
			if c.lease.expiresMs > ctx.nowMs || s.anyPin(p.id, g) {
				continue
			}
			s.closeLease(ctx, q, p, c)
		}
		if c.pos < p.start {
			s.moveCursorsToStart(ctx, q, p)
		}
		// Collect first, then dead-letter: the batch is not written to
		// while an iterator over it is open.
		var expired []uint64
		s.readRange(ctx, p.id, c.pos, p.next, func(off uint64, appendMs int64, _ []byte) bool {
			if appendMs >= cut || spent >= budget {
				return false
			}
			expired = append(expired, off)
			spent++
			return true
		})
		if len(expired) == 0 || ctx.err != nil {
			continue
		}
		for _, off := range expired {
			s.deadLetter(ctx, q, p, c, off, maxWaitError, c.headFailures)
			c.pos, c.headFailures, c.lastError = off+1, 0, ""
		}
		if c.pos >= c.redeliverTo {
			c.attempt, c.redeliverTo = 0, 0
		}
		if c.pos >= p.next {
			sub.ready.clear(p.index)
		}
		ctx.saveCursor(p, c)
		ctx.touch(q)
	}
	return spent, spent < budget
}
