package storage

import "fmt"

// Queue totals kept as the state changes. A queue view reports every
// partition's counts added up (Counts); adding them at each view made a
// view cost one pass over every partition, so a queue with a million
// partitions took seconds to list and its dashboard with it. Each
// partition's counts are recomputed instead when an apply batch changes it
// and its queue's totals move by the difference, so a view costs one pass
// over the partitions holding a lease (the only counts that change with
// time alone: a lease expires without an entry saying so).

// partBase is p's counts at high-water mark hwm and log start start as if
// no lease were live, and the cursor whose lease would move some of them
// to processing (nil when the most-behind group holds no lease).
func partBase(p *partState, hwm, start uint64) (Counts, *cursor) {
	total := hwm - min(start, hwm)
	c := Counts{Partitions: 1, Total: total, Pending: total}
	var worst *cursor
	var worstBacklog uint64
	for _, cur := range p.cursors {
		if cur.headFailures > 0 {
			c.HeadFailures++
		}
		var backlog uint64
		if cur.pos < hwm {
			backlog = hwm - cur.pos
		}
		if worst == nil || backlog > worstBacklog || (backlog == worstBacklog && cur.group < worst.group) {
			worst, worstBacklog = cur, backlog
		}
	}
	if worst == nil {
		return c, nil
	}
	backlog := min(worstBacklog, total)
	c.Pending, c.Completed = backlog, total-backlog
	if worst.lease == nil {
		return c, nil
	}
	return c, worst
}

// withLease is base counts c with worst's lease, when live at nowMs:
// leased messages not acknowledged are processing, acknowledged ones
// completed, and neither is pending.
func withLease(c Counts, worst *cursor, nowMs int64) Counts {
	l := worst.lease
	if l == nil || l.expiresMs <= nowMs {
		return c
	}
	leased := min(l.to-l.from, c.Pending)
	c.Processing = min(uint64(l.pending), leased)
	c.Pending -= leased
	c.Completed += leased - c.Processing
	return c
}

// partCounts are p's counts (PartitionView.Depth) at hwm and start, leases
// live at nowMs.
func partCounts(p *partState, hwm, start uint64, nowMs int64) Counts {
	c, worst := partBase(p, hwm, start)
	if worst == nil {
		return c
	}
	return withLease(c, worst, nowMs)
}

// sub subtracts o from c.
func (c *Counts) sub(o Counts) {
	c.Partitions -= o.Partitions
	c.Total -= o.Total
	c.Pending -= o.Pending
	c.Processing -= o.Processing
	c.Completed -= o.Completed
	c.HeadFailures -= o.HeadFailures
}

// recount replaces p's part of its queue's totals by its counts now, at
// the offsets the batch being applied publishes.
func recount(p *partState) {
	q := p.q
	q.totals.sub(p.counted)
	c, worst := partBase(p, p.next, p.start)
	p.counted = c
	q.totals.Add(c)
	switch {
	case worst != nil:
		if q.leased == nil {
			q.leased = map[*partState]*cursor{}
		}
		q.leased[p] = worst
	case q.leased != nil:
		delete(q.leased, p)
	}
}

// queueTotals are q's totals with the leases live at nowMs.
func queueTotals(q *queueState, nowMs int64) Counts {
	t := q.totals
	for p, worst := range q.leased {
		t.sub(p.counted)
		t.Add(withLease(p.counted, worst, nowMs))
	}
	return t
}

// recountLater schedules p's counts to be recomputed when the batch
// finishes: for changes that mark neither its meta nor a cursor dirty.
func (ctx *applyCtx) recountLater(p *partState) {
	ctx.recounts = append(ctx.recounts, p)
}

// recountBatch recomputes the counts of every partition the batch changed.
func (ctx *applyCtx) recountBatch() {
	for _, p := range ctx.dirty {
		recount(p)
	}
	for _, d := range ctx.cursors {
		recount(d.p)
	}
	for _, p := range ctx.recounts {
		recount(p)
	}
}

// verifyTotals makes every apply batch check the kept totals against a
// full recount; tests turn it on (totals_test.go, VerifyTotals).
var verifyTotals = false

// VerifyTotals makes every apply batch from now on check the queue totals
// it keeps against a full recount, and panic when they differ. It is for
// the tests of packages built on the store; call it before opening one.
func VerifyTotals() { verifyTotals = true }

// checkTotals panics when a queue's kept totals differ from its
// partitions' counts added up at the published offsets: a change that
// reached a partition without recounting it.
func (s *Store) checkTotals() {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, q := range s.queuesByID {
		var want Counts
		leased := 0
		for _, p := range q.parts {
			if p == nil {
				continue
			}
			c, worst := partBase(p, p.hwm.Load(), p.logStart.Load())
			want.Add(c)
			if worst != nil {
				leased++
				if q.leased[p] != worst {
					panic(fmt.Sprintf("storage: queue %q partition %d: leased cursor not tracked", q.name, p.index))
				}
			}
		}
		if want != q.totals || leased != len(q.leased) {
			panic(fmt.Sprintf("storage: queue %q totals %+v (%d leased), partitions add up to %+v (%d leased)", q.name, q.totals, len(q.leased), want, leased))
		}
	}
}
