package storage

import (
	"container/heap"
	"fmt"
)

// Queue totals kept as the state changes. A queue view reports every
// partition's counts added up (Counts); adding them at each view made a
// view cost one pass over every partition, so a queue with a million
// partitions took seconds to list and its dashboard with it. Each
// partition's counts are recomputed instead when an apply batch changes it
// and its queue's totals move by the difference. Leases are the only
// counts that change with time alone (a lease expires without an entry
// saying so): the totals count every lease as live and a view takes out
// those expired by its time, which a heap by expiry finds without looking
// at the others.

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
	return c.shifted(leaseShiftOf(c, l))
}

// packedCounts are one partition's Counts as its part of the totals keeps
// them: Partitions is 1 and Total the sum of the others, so neither is
// stored (a partition's state is most of what a node holds per partition).
type packedCounts struct {
	pending, processing, completed uint64
	headFailures                   uint32
	in                             bool // counted in the totals yet
}

func packCounts(c Counts) packedCounts {
	return packedCounts{c.Pending, c.Processing, c.Completed, uint32(c.HeadFailures), true}
}

func (pc packedCounts) counts() Counts {
	if !pc.in {
		return Counts{}
	}
	return Counts{Partitions: 1, Total: pc.pending + pc.processing + pc.completed, Pending: pc.pending,
		Processing: pc.processing, Completed: pc.completed, HeadFailures: uint64(pc.headFailures)}
}

// leaseShift is what a live lease moves out of pending: leased messages,
// processing of them those not acknowledged (the rest completed).
type leaseShift struct{ leased, processing uint64 }

func leaseShiftOf(base Counts, l *lease) leaseShift {
	leased := min(l.to-l.from, base.Pending)
	return leaseShift{leased, min(uint64(l.pending), leased)}
}

// shifted is base counts c with shift applied; unshifted takes it back.
func (c Counts) shifted(sh leaseShift) Counts {
	c.Pending -= sh.leased
	c.Processing += sh.processing
	c.Completed += sh.leased - sh.processing
	return c
}

func (c Counts) unshifted(sh leaseShift) Counts {
	c.Pending += sh.leased
	c.Processing -= sh.processing
	c.Completed -= sh.leased - sh.processing
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
// the offsets the batch being applied publishes. The totals take p's lease
// as live; the queue's lease heap, ordered by expiry, lets a view find the
// leases that expired since and take them back out.
func recount(p *partState) {
	q := p.q
	q.appended += p.next - p.nextCounted
	p.nextCounted = p.next
	for _, c := range p.cursors {
		q.recountLag(p, c)
	}
	q.totals.sub(p.counted.counts())
	c, worst := partBase(p, p.next, p.start)
	if worst == nil {
		p.counted, p.leased = packCounts(c), 0
		q.totals.Add(c)
		if p.heapAt >= 0 {
			heap.Remove(&q.leases, int(p.heapAt))
		}
		return
	}
	sh := leaseShiftOf(c, worst.lease)
	c = c.shifted(sh)
	p.counted, p.leased = packCounts(c), sh.leased
	q.totals.Add(c)
	p.leaseExpiry = worst.lease.expiresMs
	if p.heapAt >= 0 {
		heap.Fix(&q.leases, int(p.heapAt))
	} else {
		heap.Push(&q.leases, p)
	}
}

// GroupLag is a consumer group's cursors in a queue and the messages they
// have not consumed yet, of those retained.
type GroupLag struct {
	Cursors int
	Lag     uint64
}

// cursorLag is c's backlog in p, at most what p retains.
func cursorLag(p *partState, c *cursor) uint64 {
	if c.pos >= p.next {
		return 0
	}
	return min(p.next-c.pos, p.next-min(p.start, p.next))
}

// recountLag replaces c's part of its group's lag in q.
func (q *queueState) recountLag(p *partState, c *cursor) {
	g := q.lags[c.group]
	if g == nil {
		if q.lags == nil {
			q.lags = map[string]*GroupLag{}
		}
		g = &GroupLag{}
		q.lags[c.group] = g
	}
	if c.lagCounted == 0 {
		c.lagCounted = 1 // counted, with no lag yet
		g.Cursors++
	}
	lag := cursorLag(p, c)
	g.Lag += lag - (c.lagCounted - 1)
	c.lagCounted = lag + 1
}

// dropLag takes a cursor being deleted out of its group's lag in q.
func (q *queueState) dropLag(c *cursor) {
	g := q.lags[c.group]
	if c.lagCounted == 0 || g == nil {
		return
	}
	g.Lag -= c.lagCounted - 1
	c.lagCounted = 0
	if g.Cursors--; g.Cursors == 0 {
		delete(q.lags, c.group)
	}
}

// queueTotals are q's totals with the leases live at nowMs: the kept
// totals less the leases expired by then, found at the top of the heap.
func queueTotals(q *queueState, nowMs int64) Counts {
	t := q.totals
	h := q.leases
	var expired func(i int)
	expired = func(i int) {
		if i >= len(h) || h[i].leaseExpiry > nowMs {
			return
		}
		p := h[i]
		c := p.counted.counts()
		t.sub(c)
		t.Add(c.unshifted(leaseShift{leased: p.leased, processing: c.Processing}))
		expired(2*i + 1)
		expired(2*i + 2)
	}
	expired(0)
	return t
}

// leaseHeap is a queue's partitions whose most-behind cursor holds a
// lease, a min-heap by the lease's expiry; each partition knows its place
// (heapAt, -1 when out of it).
type leaseHeap []*partState

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].leaseExpiry < h[j].leaseExpiry }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapAt, h[j].heapAt = int32(i), int32(j)
}
func (h *leaseHeap) Push(x any) {
	p := x.(*partState)
	p.heapAt = int32(len(*h))
	*h = append(*h, p)
}
func (h *leaseHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	p.heapAt = -1
	return p
}

// recountLater schedules p's counts to be recomputed when the batch
// finishes: for changes that mark neither its meta nor a cursor dirty.
func (ctx *applyCtx) recountLater(p *partState) {
	ctx.recounts = append(ctx.recounts, p)
}

// recountBatch recomputes the counts of every partition the batch changed,
// once each: a partition whose meta and cursors both changed is on more
// than one list.
func (ctx *applyCtx) recountBatch() {
	once := func(p *partState) {
		if !p.recounted && !p.deleted.Load() { // a removed partition left the totals (cleanup.go)
			p.recounted = true
			recount(p)
		}
	}
	for _, p := range ctx.dirty {
		once(p)
	}
	for _, d := range ctx.cursors {
		once(d.p)
	}
	for _, p := range ctx.recounts {
		once(p)
	}
	for _, p := range ctx.dirty {
		p.recounted = false
	}
	for _, d := range ctx.cursors {
		d.p.recounted = false
	}
	for _, p := range ctx.recounts {
		p.recounted = false
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
// partitions' counts added up at the published offsets, or its lease heap
// from the leases held: a change that reached a partition without
// recounting it.
func (s *Store) checkTotals() {
	defer s.readLock()()
	for _, q := range s.queuesByID {
		var want Counts
		leased := 0
		parts := make([]*partState, 0, len(q.pids))
		src := s.peekSource()
		for i := range q.pids {
			if p := s.peekVia(src, q, uint32(i)); p != nil {
				parts = append(parts, p)
			}
		}
		src.close()
		for _, p := range parts {
			c, worst := partBase(p, p.hwm.Load(), p.logStart.Load())
			if worst == nil {
				want.Add(c)
				continue
			}
			want.Add(c.shifted(leaseShiftOf(c, worst.lease)))
			leased++
			if p.heapAt < 0 || int(p.heapAt) >= len(q.leases) || q.leases[p.heapAt] != p ||
				p.leaseExpiry != worst.lease.expiresMs {
				panic(fmt.Sprintf("storage: queue %q partition %d: its lease is not in the heap as it is", q.name, p.index))
			}
		}
		for i := 1; i < len(q.leases); i++ {
			if q.leases[(i-1)/2].leaseExpiry > q.leases[i].leaseExpiry {
				panic(fmt.Sprintf("storage: queue %q: lease heap out of order at %d", q.name, i))
			}
		}
		var appended uint64
		lags := map[string]GroupLag{}
		for _, p := range parts {
			appended += p.hwm.Load()
			for _, c := range p.cursors {
				g := lags[c.group]
				g.Cursors++
				if hwm := p.hwm.Load(); c.pos < hwm {
					g.Lag += min(hwm-c.pos, hwm-min(p.logStart.Load(), hwm))
				}
				lags[c.group] = g
			}
		}
		if appended != q.appended || len(lags) != len(q.lags) {
			panic(fmt.Sprintf("storage: queue %q appended %d, lags %v; partitions add up to %d, %v", q.name, q.appended, q.lags, appended, lags))
		}
		for g, want := range lags {
			if got := q.lags[g]; got == nil || *got != want {
				panic(fmt.Sprintf("storage: queue %q group %q lag %+v, cursors add up to %+v", q.name, g, got, want))
			}
		}
		if want != q.totals || leased != len(q.leases) {
			panic(fmt.Sprintf("storage: queue %q totals %+v (%d leased), partitions add up to %+v (%d leased)", q.name, q.totals, len(q.leases), want, leased))
		}
	}
}
