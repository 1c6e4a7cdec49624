package storage

import (
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// iterSource is what records can be read from: the database, a snapshot of
// it, or the apply loop's batch.
type iterSource interface {
	NewIter(*pebble.IterOptions) *pebble.Iterator
}

// RecordFunc receives one stored record: its offset, the time the state
// machine appended it, and its body (see wire.ParseRecord). body is only
// valid during the call. Returning false stops the read.
type RecordFunc func(offset uint64, appendMs int64, body []byte) bool

// readRange calls f for the records of partition pid in [from, to).
func readRange(src iterSource, segs *segments, pid, from, to uint64, f RecordFunc) error {
	if from >= to {
		return nil
	}
	ci := newChunkIter(src, segs, pid)
	err := ci.readRecords(from, to, f)
	if cerr := ci.Close(); err == nil {
		err = cerr
	}
	return err
}

// readRecords calls f for the records of ci's partition in [from, to).
func (ci *chunkIter) readRecords(from, to uint64, f RecordFunc) error {
	pid := ci.pid
	// The chunk holding from starts at or before it; when retention
	// removed it, reading starts at the first chunk left. A pop's lease
	// mostly starts at a chunk's base: a forward seek finds it.
	for ok := ci.SeekBase(from); ok; ok = ci.Next() {
		base := ci.Base()
		if base >= to {
			return nil
		}
		if ci.End() <= from {
			continue
		}
		records, err := ci.Records()
		if err != nil {
			return err
		}
		appendMs := ci.Meta().appendMs
		ri := wire.NewRecordIter(records)
		for off := base; ; off++ {
			body, _, ok := ri.Next()
			if !ok {
				break
			}
			if off >= to {
				return nil
			}
			if off >= from && !f(off, appendMs, body) {
				return nil
			}
		}
		if err := ri.Err(); err != nil {
			return fmt.Errorf("storage: chunk %d/%d: %w", pid, base, err)
		}
		if ci.End() >= to {
			// Done: stepping the index on would load the block after
			// this chunk's entry for nothing (a one-chunk read is the
			// common case with many partitions).
			return nil
		}
	}
	return nil
}

// readRange inside the apply loop, over its batch: a record that cannot be
// read fails the batch.
func (s *Store) readRange(ctx *applyCtx, pid, from, to uint64, f func(off uint64, appendMs int64, body []byte) bool) {
	ctx.fail(readRange(ctx.b, s.segs, pid, from, to, f))
}

// Partition is a reader's handle on one partition. Its fields never change;
// its offsets are read from the committed state at each call.
type Partition struct {
	ID      uint64
	Index   uint32
	Name    string
	QueueID uint64
	Queue   string
	p       *partState
	s       *Store
}

// Store is the group store holding the partition, to read it from.
func (p Partition) Store() *Store { return p.s }

// HighWatermark is the offset after the last committed record.
func (p Partition) HighWatermark() uint64 { return p.live().hwm.Load() }

// LogStart is the first offset still stored.
func (p Partition) LogStart() uint64 { return p.live().logStart.Load() }

// LastWriteMs is when the last record was appended (replicated clock).
func (p Partition) LastWriteMs() int64 { return p.live().lastWrite.Load() }

// Deleted reports whether the partition's queue was deleted.
func (p Partition) Deleted() bool { return p.live().deleted.Load() }

// live is the partition's state as committed now. The handle's own may
// have left memory since (partcache.go): the store has it then, in memory
// again or not; a partition gone altogether answers as deleted.
func (p Partition) live() *partState {
	if p.own() {
		return p.p
	}
	defer p.s.readLock()()
	return p.s.current(p)
}

// own reports whether the handle's state is the partition's: in memory,
// or deleted for good.
func (p Partition) own() bool { return !p.p.evicted.Load() || p.p.deleted.Load() }

// current is live for a caller holding the store's read locks.
func (s *Store) current(p Partition) *partState {
	if p.own() {
		return p.p
	}
	if now := s.peekByID(p.ID); now != nil {
		return now
	}
	gone := &partState{}
	gone.deleted.Store(true)
	gone.hwm.Store(p.p.hwm.Load())
	gone.logStart.Store(p.p.logStart.Load())
	gone.lastWrite.Store(p.p.lastWrite.Load())
	return gone
}

func (s *Store) handle(p *partState) Partition {
	return Partition{ID: p.id, Index: p.index, Name: p.name, QueueID: p.q.id, Queue: p.q.name, p: p, s: s}
}

// PartitionByIndex resolves a partition of a tenant's queue by permanent
// index. ok is false when the queue or partition does not exist.
func (s *Store) PartitionByIndex(tenant wire.ID, queue string, index uint32) (Partition, bool) {
	defer s.readLock()()
	q := s.queue(tenant, queue)
	if q == nil {
		return Partition{}, false
	}
	p := s.peekAt(q, index)
	if p == nil {
		return Partition{}, false
	}
	return s.handle(p), true
}

// PartitionByName resolves a partition of a tenant's queue by name.
func (s *Store) PartitionByName(tenant wire.ID, queue, name string) (Partition, bool) {
	defer s.readLock()()
	q := s.queue(tenant, queue)
	if q == nil {
		return Partition{}, false
	}
	p := s.peekNamed(q, name)
	if p == nil {
		return Partition{}, false
	}
	return s.handle(p), true
}

// PartitionByID resolves a partition by its id, checking it belongs to
// tenant.
func (s *Store) PartitionByID(tenant wire.ID, pid uint64) (Partition, bool) {
	defer s.readLock()()
	p := s.peekByID(pid)
	if p == nil || p.q.tenant != tenant {
		return Partition{}, false
	}
	return s.handle(p), true
}

// Read calls f for the committed records of p from offset from, stopping
// at the high-water mark or when f returns false. It returns the
// high-water mark it read up to.
func (s *Store) Read(p Partition, from uint64, f RecordFunc) (uint64, error) {
	hwm := p.HighWatermark()
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return hwm, ErrClosed
	}
	return hwm, readRange(s.db, s.segs, p.ID, from, hwm, f)
}

// ReadRange calls f for the committed records of p in [from, to).
func (s *Store) ReadRange(p Partition, from, to uint64, f RecordFunc) error {
	if hwm := p.HighWatermark(); to > hwm {
		to = hwm
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return ErrClosed
	}
	return readRange(s.db, s.segs, p.ID, from, to, f)
}

// QueueInfo is a reader's copy of a queue's metadata.
type QueueInfo struct {
	ID         uint64
	Name       string
	Namespace  string
	Task       string
	CreatedMs  int64
	Kafka      bool
	Config     wire.QueueConfig
	Partitions int
	// Home: this group holds the queue's catalog (and Partitions counts
	// the whole queue).
	Home bool
}

// Queue returns a copy of a tenant's queue metadata.
func (s *Store) Queue(tenant wire.ID, name string) (QueueInfo, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q := s.queue(tenant, name)
	if q == nil {
		return QueueInfo{}, false
	}
	return queueInfo(q), true
}

// queueInfo copies a queue's metadata. Partitions counts the whole queue's
// at its home, this group's own in a shard; Home says which.
func queueInfo(q *queueState) QueueInfo {
	n := q.dirNames.len() // live entries: a removed partition leaves a hole (cleanup.go)
	if !q.home {
		n = q.partitionCount()
	}
	return QueueInfo{ID: q.id, Name: q.name, Namespace: q.namespace, Task: q.task, CreatedMs: q.createdMs,
		Kafka: q.kafka, Config: q.cfg, Partitions: n, Home: q.home}
}

// MayPop reports whether a pop by group on the queue (optionally one
// partition) could find messages at nowMs (see PopReadiness).
func (s *Store) MayPop(tenant wire.ID, queue, group, partition string, nowMs int64) bool {
	ok, _ := s.PopReadiness(tenant, queue, group, partition, nowMs)
	return ok
}

// PopReadiness is the cheap local check a long poll makes before proposing
// a pop: whether one by group on the queue (optionally one partition)
// could find messages at nowMs. It may say yes when the pop then finds
// nothing, never no when it would find something. When it says no only
// because messages are held back by the queue's windowBuffer or
// delayedProcessing, retryAtMs is when the first of them becomes visible
// (0 otherwise), so the poll can sleep until then instead of probing.
func (s *Store) PopReadiness(tenant wire.ID, queue, group, partition string, nowMs int64) (ok bool, retryAtMs int64) {
	defer s.readLock()() // the database lock before mu: the order RecoverFromSnapshot takes them in
	q := s.queue(tenant, queue)
	if q == nil || s.db == nil {
		return false, 0
	}
	sub := q.subs[group]
	// check reports a partition with messages for the group: ready now, or
	// visible at retryAtMs.
	check := func(p *partState) bool {
		if p == nil {
			return false
		}
		c := p.cursors.get(group)
		pos := p.start
		switch {
		case c == nil:
			if p.next <= p.start || (sub != nil && !mayHaveNewFor(p, sub)) {
				return false
			}
		case c.lease != nil && c.lease.expiresMs > nowMs:
			return false
		case c.lease == nil && c.pos >= p.next:
			return false
		default:
			pos = max(c.pos, p.start)
		}
		if t := s.kafka.txnsOf(p.id); t != nil {
			var end uint64
			if pos, end = t.popWindow(pos, p.next); pos >= end {
				return false
			}
		}
		at := s.visibleAt(q, p, pos)
		if at <= nowMs {
			ok = true
			return true
		}
		if retryAtMs == 0 || at < retryAtMs {
			retryAtMs = at
		}
		return false
	}
	src := s.peekSource()
	defer src.close()
	switch {
	case partition != "":
		check(s.peekNamed(q, partition))
	case sub == nil:
		q.stored.forEachFrom(0, func(i uint32) bool { return !check(s.peekVia(src, q, i)) })
	default:
		sub.ready.forEachFrom(0, func(i uint32) bool { return !check(s.peekVia(src, q, i)) })
	}
	if ok {
		retryAtMs = 0
	}
	return ok, retryAtMs
}

// visibleAt is when the message at pos in p becomes visible to consumers
// (the apply loop's visibleUpTo, seen from outside): after the partition
// has been quiet for windowBuffer and the message is delayedProcessing old.
func (s *Store) visibleAt(q *queueState, p *partState, pos uint64) int64 {
	var at int64
	if w := int64(q.cfg.WindowBufferSec) * 1000; w > 0 {
		at = p.lastWriteMs + w
	}
	if d := int64(q.cfg.DelayedProcessingSec) * 1000; d > 0 {
		ci := newChunkIter(s.db, s.segs, p.id)
		if ci.Seek(pos) {
			at = max(at, ci.Meta().appendMs+d)
		}
		_ = ci.Close()
	}
	return at
}

// NextLeaseExpiry returns the earliest expiry after afterMs (replicated
// clock, ms) among the group's leases on the queue, or 0: a parked pop
// must look again then, because an expired lease makes its messages
// deliverable. Leases already expired at afterMs count as free elsewhere.
func (s *Store) NextLeaseExpiry(tenant wire.ID, queue, group string, afterMs int64) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q := s.queue(tenant, queue)
	if q == nil {
		return 0
	}
	var next int64
	for _, p := range q.parts {
		if p == nil {
			continue
		}
		if c := p.cursors.get(group); c != nil && c.lease != nil && c.lease.expiresMs > afterMs && (next == 0 || c.lease.expiresMs < next) {
			next = c.lease.expiresMs
		}
	}
	return next
}

// ClockMs is the replicated clock as of the last applied entry.
func (s *Store) ClockMs() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.clockMs
}
