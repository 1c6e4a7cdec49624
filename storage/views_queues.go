package storage

import (
	"cmp"
	"slices"

	"github.com/queen-mq/queen/wire"
)

// Views of queues, partitions and consumer cursors. Each copies what it
// needs under the store's read lock and never mutates: the copies are the
// caller's to render, sort and page without holding up the apply loop.

// CursorView is a reader's copy of one group's position in a partition.
type CursorView struct {
	Group          string
	Pos            uint64 // next offset the group consumes
	LeaseSize      uint64 // messages of a live lease
	InLease        uint64 // of them, those not acknowledged yet
	LeaseID        wire.ID
	LeaseExpiresMs int64 // 0 without a live lease
	HeadFailures   uint32
	LastError      string
	Metadata       string
	UpdatedMs      int64
}

// Backlog is how many messages the cursor has not consumed yet.
func (c *CursorView) Backlog(hwm uint64) uint64 {
	if c.Pos >= hwm {
		return 0
	}
	return hwm - c.Pos
}

// PartitionView is a reader's copy of one partition with its cursors.
type PartitionView struct {
	ID            uint64
	Index         uint32
	Name          string
	CreatedMs     int64
	LastWriteMs   int64
	LogStart      uint64
	HighWatermark uint64
	Cursors       []CursorView // by group name
	counts        Counts       // partCounts, read with the fields above
}

// Retained is how many messages the partition still stores.
func (p *PartitionView) Retained() uint64 { return p.HighWatermark - min(p.LogStart, p.HighWatermark) }

// Cursor returns the group's cursor, or nil.
func (p *PartitionView) Cursor(group string) *CursorView {
	for i := range p.Cursors {
		if p.Cursors[i].Group == group {
			return &p.Cursors[i]
		}
	}
	return nil
}

// Depth is the partition's state seen from its most-behind consumer group
// (the queue-level view Queen's dashboard shows): pending messages not yet
// delivered, processing messages of a live lease not yet acknowledged,
// completed ones consumed or acknowledged. A partition no group has read
// is all pending. Of groups equally behind, the first by name counts.
func (p *PartitionView) Depth() (pending, processing, completed uint64) {
	return p.counts.Pending, p.counts.Processing, p.counts.Completed
}

// Counts add up partitions as their most-behind groups see them (Depth).
type Counts struct {
	Partitions                            int
	Total, Pending, Processing, Completed uint64
	// HeadFailures counts (partition, group) pairs whose head message
	// failed and waits for a retry.
	HeadFailures uint64
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	c.Partitions += o.Partitions
	c.Total += o.Total
	c.Pending += o.Pending
	c.Processing += o.Processing
	c.Completed += o.Completed
	c.HeadFailures += o.HeadFailures
}

// Counts are the partition's counts.
func (p *PartitionView) Counts() Counts { return p.counts }

// SubscriptionView is a reader's copy of a group's subscription to a queue.
type SubscriptionView struct {
	Group     string
	Mode      uint8
	FromMs    int64
	CreatedMs int64
}

// QueueView is a reader's copy of a queue: metadata, partitions (when
// asked for), subscriptions, live dead-letter rows and activity counters.
type QueueView struct {
	QueueInfo
	Tenant     wire.ID
	Partitions []PartitionView // by index; nil unless asked for
	Totals     Counts          // every partition's, whichever were copied
	// Appended adds up the partitions' high-water marks (every message
	// ever appended); Lags is each consumer group's cursors and backlog.
	Appended      uint64
	Lags          map[string]GroupLag
	Subscriptions []SubscriptionView
	DLQRows       int
	Activity      Activity // since this store opened
}

// QueueFilter selects the queues a view copies.
type QueueFilter struct {
	Name      string // exact queue name, "" for all
	Namespace string
	Task      string
	// Partitions asks for partitions and cursors (the costly part):
	// those from index PartitionsFrom on, at most PartitionLimit of them
	// (0: all).
	Partitions     bool
	PartitionsFrom uint32
	PartitionLimit int
}

// Queues copies the tenant's queues that match f, in name order. nowMs
// decides which leases are live.
func (s *Store) Queues(tenant wire.ID, f QueueFilter, nowMs int64) []QueueView {
	defer s.readLock()()
	var qs []*queueState
	if f.Name != "" {
		if q := s.queue(tenant, f.Name); q != nil {
			qs = append(qs, q)
		}
	} else {
		qs = s.tenantQueues(tenant)
	}
	out := make([]QueueView, 0, len(qs))
	for _, q := range qs {
		if (f.Namespace != "" && q.namespace != f.Namespace) || (f.Task != "" && q.task != f.Task) {
			continue
		}
		out = append(out, s.queueView(q, f, nowMs))
	}
	slices.SortFunc(out, func(a, b QueueView) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// AllQueues copies every queue of every tenant in this store for metrics,
// in id order, with its partitions when it has at most maxPartitions here
// (its totals, high-water marks and group lags are kept as it changes, so
// a queue of millions of partitions costs a scrape no more than one).
// Each queue is copied whole under the read lock, but the lock is let go
// after every viewBatchWork
// partitions and cursors: a scrape of a store with many queues otherwise
// kept the apply loop (which takes the lock for writing) waiting for the
// whole copy, and with it every reader queued behind that writer. Queues
// created meanwhile are left for the next scrape, deleted ones skipped:
// metrics are a sample.
func (s *Store) AllQueues(nowMs int64, maxPartitions int) []QueueView {
	s.mu.RLock()
	ids := make([]uint64, 0, len(s.queuesByID))
	for id := range s.queuesByID {
		ids = append(ids, id)
	}
	s.mu.RUnlock()
	slices.Sort(ids)
	out := make([]QueueView, 0, len(ids))
	for i := 0; i < len(ids); {
		unlock := s.readLock()
		for work := 0; i < len(ids) && work < viewBatchWork; i++ {
			q := s.queuesByID[ids[i]]
			if q == nil {
				continue
			}
			v := s.queueView(q, QueueFilter{Partitions: q.totals.Partitions <= maxPartitions}, nowMs)
			work++
			for _, p := range v.Partitions {
				work += 1 + len(p.Cursors)
			}
			out = append(out, v)
		}
		unlock()
		if s.viewHook != nil {
			s.viewHook()
		}
	}
	return out
}

// viewBatchWork bounds the partitions and cursors AllQueues copies under
// one hold of the read lock.
const viewBatchWork = 1024

func (s *Store) queueView(q *queueState, f QueueFilter, nowMs int64) QueueView {
	v := QueueView{QueueInfo: queueInfo(q), Tenant: q.tenant, DLQRows: q.dlqRows, Appended: q.appended}
	if len(q.lags) > 0 {
		v.Lags = make(map[string]GroupLag, len(q.lags))
		for g, l := range q.lags {
			v.Lags[g] = *l
		}
	}
	if q.stats != nil {
		v.Activity = q.stats.total
	}
	for _, sub := range q.subs {
		v.Subscriptions = append(v.Subscriptions, SubscriptionView{Group: sub.group, Mode: sub.mode, FromMs: sub.fromMs, CreatedMs: sub.createdMs})
	}
	slices.SortFunc(v.Subscriptions, func(a, b SubscriptionView) int { return cmp.Compare(a.Group, b.Group) })
	v.Totals = queueTotals(q, nowMs)
	if !f.Partitions {
		return v
	}
	v.Partitions = []PartitionView{}
	src := s.peekSource()
	defer src.close()
	for i := int(f.PartitionsFrom); i < len(q.pids); i++ {
		if f.PartitionLimit > 0 && len(v.Partitions) == f.PartitionLimit {
			break
		}
		if p := s.peekVia(src, q, uint32(i)); p != nil {
			v.Partitions = append(v.Partitions, partitionView(p, nowMs))
		}
	}
	return v
}

func partitionView(p *partState, nowMs int64) PartitionView {
	hwm, start := p.hwm.Load(), p.logStart.Load()
	v := PartitionView{ID: p.id, Index: p.index, Name: p.name, CreatedMs: p.createdMs,
		LastWriteMs: p.lastWrite.Load(), LogStart: start, HighWatermark: hwm, counts: partCounts(p, hwm, start, nowMs)}
	if len(p.cursors) > 0 {
		v.Cursors = make([]CursorView, 0, len(p.cursors))
	}
	for _, c := range p.cursors {
		cv := CursorView{Group: c.group, Pos: c.pos, HeadFailures: c.headFailures, LastError: c.lastError,
			Metadata: c.metadata, UpdatedMs: c.updatedMs}
		if l := c.lease; l != nil && l.expiresMs > nowMs {
			cv.LeaseSize, cv.InLease, cv.LeaseID, cv.LeaseExpiresMs = l.to-l.from, uint64(l.pending), l.id, l.expiresMs
		}
		v.Cursors = append(v.Cursors, cv)
	}
	slices.SortFunc(v.Cursors, func(a, b CursorView) int { return cmp.Compare(a.Group, b.Group) })
	return v
}

// Series is the per-minute activity of the tenant's queues (one queue when
// queue is set) within [fromMs, toMs), oldest first. Only this store's
// in-memory history is there: at most the last hour since it opened.
func (s *Store) Series(tenant wire.ID, queue string, fromMs, toMs int64) []MinuteActivity {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []MinuteActivity
	for _, q := range s.tenantQueues(tenant) {
		if (queue == "" || q.name == queue) && q.stats != nil {
			out = MergeSeries(out, q.stats.series(fromMs, toMs))
		}
	}
	return out
}

// AllSeries is Series over every tenant of this store.
func (s *Store) AllSeries(fromMs, toMs int64) []MinuteActivity {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []MinuteActivity
	for _, q := range s.queuesByID {
		if q.stats != nil {
			out = MergeSeries(out, q.stats.series(fromMs, toMs))
		}
	}
	return out
}
