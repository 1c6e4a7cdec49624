package storage

import (
	"encoding/binary"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// StoredMessage is a reader's copy of one record with where it is.
type StoredMessage struct {
	PartitionID uint64
	Offset      uint64
	AppendMs    int64
	Body        []byte // the record body (wire.ParseRecord)
}

// Newest returns the records of p appended within [fromMs, toMs), newest
// first, at most limit of them. It walks chunks back from the head and
// stops at the first chunk older than fromMs: append times only grow
// along a partition.
func (s *Store) Newest(p PartitionView, fromMs, toMs int64, limit int) ([]StoredMessage, error) {
	if limit <= 0 || p.LastWriteMs < fromMs || p.HighWatermark <= p.LogStart {
		return nil, nil
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return nil, ErrClosed
	}
	it := newChunkIter(s.db, s.segs, p.ID)
	defer it.Close()
	var out []StoredMessage
	for ok := it.SeekLE(p.HighWatermark - 1); ok && len(out) < limit; ok = it.Prev() {
		appendMs := it.Meta().appendMs
		if appendMs < fromMs {
			break
		}
		if appendMs >= toMs {
			continue
		}
		records, err := it.Records()
		if err != nil {
			return out, err
		}
		base := it.Base()
		var recs []StoredMessage
		ri := wire.NewRecordIter(records)
		for off := base; ; off++ {
			body, _, ok := ri.Next()
			if !ok {
				break
			}
			if off >= p.LogStart && off < p.HighWatermark {
				recs = append(recs, StoredMessage{PartitionID: p.ID, Offset: off, AppendMs: appendMs, Body: append([]byte(nil), body...)})
			}
		}
		for i := len(recs) - 1; i >= 0 && len(out) < limit; i-- {
			out = append(out, recs[i])
		}
	}
	return out, nil
}

// MessageByTxn finds the record a transaction id addresses in partition
// pid of tenant: by its explicit id, else by the message id it is the text
// of. ok is false when no indexed record has that id.
func (s *Store) MessageByTxn(tenant wire.ID, pid uint64, txn string) (StoredMessage, bool, error) {
	p, ok := s.PartitionByID(tenant, pid)
	if !ok {
		return StoredMessage{}, false, nil
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return StoredMessage{}, false, ErrClosed
	}
	keys := [][]byte{txnKey(pid, true, []byte(txn))}
	if id, err := wire.ParseID(txn); err == nil {
		keys = append(keys, txnKey(pid, false, id[:]))
	}
	for _, k := range keys {
		v, closer, err := s.db.Get(k)
		if err == pebble.ErrNotFound {
			continue
		}
		if err != nil {
			return StoredMessage{}, false, err
		}
		off := binary.BigEndian.Uint64(v[:8])
		closer.Close()
		var m StoredMessage
		found := false
		err = readRange(s.db, s.segs, pid, off, min(off+1, p.HighWatermark()), func(o uint64, appendMs int64, body []byte) bool {
			m, found = StoredMessage{PartitionID: pid, Offset: o, AppendMs: appendMs, Body: append([]byte(nil), body...)}, true
			return false
		})
		return m, found, err
	}
	return StoredMessage{}, false, nil
}

// AppendTime is when the record at off of partition pid was appended.
func (s *Store) AppendTime(pid, off uint64) (int64, bool) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return 0, false
	}
	var at int64
	found := false
	_ = readRange(s.db, s.segs, pid, off, off+1, func(_ uint64, appendMs int64, _ []byte) bool {
		at, found = appendMs, true
		return false
	})
	return at, found
}

// PartitionBytes is how many bytes partition pid's stored records take
// (before pebble's compression), from the chunk index: a scan of the
// partition's index, not of its records.
func (s *Store) PartitionBytes(pid uint64) (uint64, error) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return 0, ErrClosed
	}
	it := newChunkIter(s.db, s.segs, pid)
	var n uint64
	for ok := it.First(); ok; ok = it.Next() {
		n += uint64(it.Meta().size)
	}
	return n, it.Close()
}
