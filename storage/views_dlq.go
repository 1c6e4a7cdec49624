package storage

import (
	"encoding/binary"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// DLQRow is a reader's copy of a dead-lettered message.
type DLQRow struct {
	ID          uint64
	Queue       string
	Partition   string
	PartitionID uint64
	Offset      uint64
	Group       string
	Error       string
	RetryCount  uint32
	FailedMs    int64 // when it was dead-lettered (replicated clock)
	AppendMs    int64 // when the message was appended
	Record      []byte
	Replayed    bool
}

func rowView(r *dlqRow) DLQRow {
	return DLQRow{ID: r.id, Queue: r.queue, Partition: r.partition, PartitionID: r.partID, Offset: r.offset,
		Group: r.group, Error: r.errText, RetryCount: r.retryCount, FailedMs: r.createdMs, AppendMs: r.appendMs,
		Record: r.record, Replayed: r.replayedMs != 0}
}

// DLQFilter selects dead-letter rows; zero fields match everything.
type DLQFilter struct {
	Queue       string
	Group       string
	PartitionID uint64
	Offset      int64 // -1: any
	Replayed    bool  // include rows already replayed
	// After, when set, keeps only rows listed after it (newest first):
	// the rest of a listing paged there. Total still counts them all.
	After *DLQPos
}

// DLQPos is a row's place in DLQ listings, newest first: by failure time
// then id, both descending. A store gives row ids in apply order under a
// clock that never goes back, so its rows by id descending are in this
// order too.
type DLQPos struct {
	FailedMs int64
	ID       uint64
}

// Follows reports whether a row at q is listed after p.
func (p DLQPos) Follows(q DLQPos) bool {
	return q.FailedMs < p.FailedMs || (q.FailedMs == p.FailedMs && q.ID < p.ID)
}

func (f *DLQFilter) match(r *dlqRow) bool {
	return (f.Queue == "" || r.queue == f.Queue) && (f.Group == "" || r.group == f.Group) &&
		(f.PartitionID == 0 || r.partID == f.PartitionID) && (f.Offset < 0 || r.offset == uint64(f.Offset)) &&
		(f.Replayed || r.replayedMs == 0)
}

// DLQ returns the tenant's rows matching f, newest first, skipping skip
// and returning at most limit, with the number of all matching rows.
func (s *Store) DLQ(tenant wire.ID, f DLQFilter, skip, limit int) ([]DLQRow, int, error) {
	var out []DLQRow
	total, skipped := 0, 0
	err := s.eachStoredDLQRow(tenant, func(r *dlqRow) {
		if !f.match(r) {
			return
		}
		total++
		if f.After != nil && !f.After.Follows(DLQPos{FailedMs: r.createdMs, ID: r.id}) {
			return
		}
		if skipped < skip {
			skipped++
			return
		}
		if len(out) < limit {
			out = append(out, rowView(r))
		}
	})
	return out, total, err
}

// DLQRowByID returns one row, replayed or not.
func (s *Store) DLQRowByID(tenant wire.ID, id uint64) (DLQRow, bool, error) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return DLQRow{}, false, ErrClosed
	}
	v, closer, err := s.db.Get(dlqKey(tenant, id))
	if err == pebble.ErrNotFound {
		return DLQRow{}, false, nil
	}
	if err != nil {
		return DLQRow{}, false, err
	}
	defer closer.Close()
	r, err := decodeDLQRow(id, v)
	if err != nil {
		return DLQRow{}, false, err
	}
	return rowView(&r), true, nil
}

// eachStoredDLQRow walks the tenant's rows newest first.
func (s *Store) eachStoredDLQRow(tenant wire.ID, f func(*dlqRow)) error {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return ErrClosed
	}
	prefix := dlqPrefix(tenant)
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	for it.Last(); it.Valid(); it.Prev() {
		r, err := decodeDLQRow(binary.BigEndian.Uint64(it.Key()[17:]), it.Value())
		if err == nil {
			f(&r)
		}
	}
	return it.Close()
}
