package storage

import (
	"github.com/queen-mq/queen/wire"
)

// maxWaitEvictSweeper deletes what waited longer than the queue's
// maxWaitTimeSeconds, as Queen evicts it (from FormatV5: a build before it
// only dead-letters for subscribed groups, and every replica must apply a
// tick alike). It runs after maxWaitSweeper, which moves every subscribed
// group past its expired messages (dead-lettering them), with a budget of
// its own, so deleting never slows the dead-lettering down.
var maxWaitEvictSweeper = evictSweeper{partitionSweeper{id: "maxwait-evict", intervalMs: maxWaitIntervalMs, budget: &maxWaitBudget,
	match: func(q *queueState) bool { return q.cfg.MaxWaitTimeSec > 0 }, visit: (*Store).evictWaiting}}

// evictSweeper is a partition sweeper that waits for FormatV5.
type evictSweeper struct{ partitionSweeper }

func (w evictSweeper) due(s *Store, nowMs int64) bool {
	return s.at(wire.FormatV5) && w.partitionSweeper.due(s, nowMs)
}

// sweep runs at every tick whatever due said (due decides whether a tick
// is proposed at all), so it checks the format itself.
func (w evictSweeper) sweep(s *Store, ctx *applyCtx) {
	if s.at(wire.FormatV5) {
		w.partitionSweeper.sweep(s, ctx)
	}
}

// evictWaiting deletes p's chunks, from the log start, while they are
// older than maxWaitTimeSeconds and every subscribed group is past them
// (consumed, or dead-lettered by maxWaitSweeper): in a partition of a
// queue no group has subscribed to, everything that old. A lease keeps
// what it reaches into (a group's position is at most its lease's start),
// and so does a group that has not yet been moved past. Whole chunks go,
// as retention deletes them.
func (s *Store) evictWaiting(ctx *applyCtx, q *queueState, p *partState, budget int) (int, bool) {
	if p.start >= p.next {
		return 0, true
	}
	floor := p.next
	if len(q.subs) > 0 {
		floor = consumedUpTo(q, p)
	}
	for _, c := range p.cursors {
		if c.lease != nil {
			floor = min(floor, c.lease.from)
		}
		if s.anyPin(p.id, c.group) {
			return 0, true // a transaction holds a position here: next pass
		}
	}
	if floor <= p.start {
		return 0, true
	}
	cut := ctx.nowMs - int64(q.cfg.MaxWaitTimeSec)*1000
	return s.dropPrefix(ctx, ctx.chunksOf(p.id), q, p, budget, 0, func(m chunkMeta, end uint64) bool {
		return m.appendMs < cut && end <= floor
	})
}
