package storage

import (
	"bytes"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// What the mover (raftgroups/move.go) reads from this node's replicas:
// the records at a home, the source's partition as committed, the
// target's incoming partition. Every read is of committed state; the
// mover reads after a barrier when it must see what its leader wrote.

// Moves lists the move records this group holds as a home (every tenant
// when tenant is zero).
func (s *Store) Moves(tenant wire.ID) []wire.MoveInfo {
	var out []wire.MoveInfo
	_ = s.scanPrefix([]byte{tagMove, moveRecord}, func(_, v []byte) bool {
		if m, err := wire.DecodeMoveInfo(v); err == nil && (tenant.IsZero() || m.Tenant == tenant) {
			out = append(out, m)
		}
		return true
	})
	return out
}

// MoveOf is the move record of a queue's partition at its home.
func (s *Store) MoveOf(tenant wire.ID, queue string, index uint32) (wire.MoveInfo, bool) {
	s.mu.RLock()
	q := s.queue(tenant, queue)
	var qid uint64
	if q != nil {
		qid = q.id
	}
	s.mu.RUnlock()
	if q == nil {
		return wire.MoveInfo{}, false
	}
	v, ok := s.getCommitted(moveKey(moveRecord, qid, index))
	if !ok {
		return wire.MoveInfo{}, false
	}
	m, err := wire.DecodeMoveInfo(v)
	return m, err == nil
}

// MovedOut is the partition id a sealed partition of a queue had here,
// and whether it is sealed (its keys still stored).
func (s *Store) MovedOut(tenant wire.ID, queue string, index uint32) (pid uint64, sealed, ok bool) {
	defer s.readLock()()
	q := s.queue(tenant, queue)
	if q == nil {
		return 0, false, false
	}
	m := s.moved[moveRef{q.id, index}]
	if m == nil {
		return 0, false, false
	}
	return m.pid, m.sealed, true
}

// Incoming is the target's incoming partition of a queue: its id and the
// offset after what it holds.
func (s *Store) Incoming(tenant wire.ID, queue string, index uint32) (pid, next uint64, ok bool) {
	s.mu.RLock()
	q := s.queue(tenant, queue)
	var qid uint64
	if q != nil {
		qid = q.id
	}
	s.mu.RUnlock()
	if q == nil {
		return 0, 0, false
	}
	v, found := s.getCommitted(moveKey(moveIncoming, qid, index))
	if !found {
		return 0, 0, false
	}
	in, err := decodeIncoming(v)
	return in.pid, in.next, err == nil
}

// MoveChunks reads partition pid's chunks as stored from the chunk
// holding from (or the first one left), in order, until about maxBytes,
// and stops before to. A chunk larger than maxBytes alone still goes.
func (s *Store) MoveChunks(pid, from, to uint64, maxBytes int) ([]wire.MoveChunk, error) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return nil, ErrClosed
	}
	ci := newChunkIter(s.db, s.segs, pid)
	var out []wire.MoveChunk
	size := 0
	for ok := ci.Seek(from); ok; ok = ci.Next() {
		if ci.Base() >= to {
			break
		}
		if ci.End() <= from {
			continue
		}
		m := ci.Meta()
		if len(out) > 0 && size+m.size > maxBytes {
			break
		}
		data, err := ci.Stored()
		if err != nil {
			ci.Close()
			return nil, err
		}
		out = append(out, wire.MoveChunk{Base: ci.Base(), AppendMs: m.appendMs, Count: uint32(m.count), Kept: m.kafkaBatch, Data: data})
		size += len(data)
	}
	return out, ci.Close()
}

// MoveStateKeys reads partition pid's state keys a move carries, of every
// kind in order (kind, then key), from after the key (kind, after) up to
// about maxBytes; more says whether keys are left.
func (s *Store) MoveStateKeys(pid uint64, kind uint8, after []byte, maxBytes int) (keys []wire.MoveKey, more bool, err error) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return nil, false, ErrClosed
	}
	prefixes := moveStatePrefixes(pid)
	size := 0
	for k := kind; k <= wire.MoveKeyAborted; k++ {
		prefix := prefixes[k]
		it := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
		ok := it.First()
		if k == kind && after != nil {
			ok = it.SeekGE(append(append([]byte(nil), prefix...), after...))
			if ok && bytes.Equal(it.Key()[len(prefix):], after) {
				ok = it.Next()
			}
		}
		for ; ok; ok = it.Next() {
			if size >= maxBytes {
				it.Close()
				return keys, true, nil
			}
			suffix := append([]byte(nil), it.Key()[len(prefix):]...)
			value := append([]byte(nil), it.Value()...)
			keys = append(keys, wire.MoveKey{Kind: k, Suffix: suffix, Value: value})
			size += len(suffix) + len(value) + 8
		}
		if err := it.Close(); err != nil {
			return nil, false, err
		}
	}
	return keys, false, nil
}
