package storage

import (
	"slices"

	"github.com/queen-mq/queen/wire"
)

// QueuesLabelled returns the names of a tenant's queues labelled with
// namespace and task, sorted; an empty label matches any (discovery pop).
func (s *Store) QueuesLabelled(tenant wire.ID, namespace, task string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for k, q := range s.queues {
		if k.tenant == tenant && (namespace == "" || q.namespace == namespace) && (task == "" || q.task == task) {
			out = append(out, k.name)
		}
	}
	slices.Sort(out)
	return out
}

// OffsetForTime finds the first committed record of p the state machine
// appended at or after ms: its offset and append time. found is false when
// there is none (offset is then the high-water mark). Append times grow
// with offsets and a chunk's records share one, so a binary search over
// offsets, one seek per step, finds it.
func (s *Store) OffsetForTime(p Partition, ms int64) (offset uint64, appendMs int64, found bool, err error) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return 0, 0, false, ErrClosed
	}
	hwm := p.HighWatermark()
	it := newChunkIter(s.db, s.segs, p.ID)
	defer it.Close()
	// chunkAt returns the append time, base and end of the chunk holding
	// the first record at or after off: compaction leaves gaps between
	// chunks.
	chunkAt := func(off uint64) (int64, uint64, uint64, bool) {
		ok := it.SeekLE(off)
		switch {
		case !ok:
			ok = it.First() // off precedes every chunk
		case it.End() <= off:
			ok = it.Next()
		}
		if !ok {
			return 0, 0, 0, false
		}
		return it.Meta().appendMs, it.Base(), it.End(), true
	}
	lo, hi := p.LogStart(), hwm
	for lo < hi {
		mid := lo + (hi-lo)/2
		at, _, end, ok := chunkAt(mid)
		switch {
		case !ok:
			lo = hi // nothing stored at or after mid
		case at >= ms:
			hi = mid
		default:
			lo = min(end, hi)
		}
	}
	if lo >= hwm {
		return hwm, 0, false, it.err
	}
	at, base, _, ok := chunkAt(lo)
	if !ok || base >= hwm {
		return hwm, 0, false, it.err
	}
	return max(lo, base), at, true, it.err
}

// ChangedPartitions lists the partitions of a tenant's queue with a
// committed write at or after sinceMs, in index order, starting after
// index after (-1 for the first), at most limit of them. more reports
// that partitions after the last one returned were not looked at. ok is
// false when the queue does not exist.
func (s *Store) ChangedPartitions(tenant wire.ID, queue string, sinceMs int64, after int64, limit int) (parts []Partition, more, ok bool) {
	defer s.readLock()()
	q := s.queue(tenant, queue)
	if q == nil {
		return nil, false, false
	}
	src := s.peekSource()
	defer src.close()
	for i := int(after + 1); i < len(q.pids); i++ {
		p := s.peekVia(src, q, uint32(i))
		if p == nil || p.lastWrite.Load() < sinceMs || p.hwm.Load() == 0 {
			continue
		}
		if len(parts) == limit {
			return parts, true, true
		}
		parts = append(parts, s.handle(p))
	}
	return parts, false, true
}
