package storage

import (
	"encoding/binary"

	"github.com/cockroachdb/pebble"
)

// kvSweepLimit bounds the expired keys one tick removes
// (QUEEN_RAFT_KV_SWEEP_LIMIT default).
const kvSweepLimit = 512

// kvTTLSweeper removes KV keys whose TTL passed, in expiry order, at the
// tick's replicated clock. Reads treat an expired key as absent before the
// sweeper gets to it, so the sweep only reclaims space.
type kvTTLSweeper struct{}

func (kvTTLSweeper) name() string { return "kv-ttl" }

func (kvTTLSweeper) due(s *Store, nowMs int64) bool {
	first, ok := s.firstKeyHeld([]byte{tagKVTTL})
	return ok && len(first) >= 9 && int64(binary.BigEndian.Uint64(first[1:9])) <= nowMs
}

func (kvTTLSweeper) sweep(s *Store, ctx *applyCtx) {
	lower := []byte{tagKVTTL}
	it := ctx.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	var expired [][]byte
	for it.First(); it.Valid() && len(expired) < kvSweepLimit; it.Next() {
		k := it.Key()
		if len(k) < 9 || int64(binary.BigEndian.Uint64(k[1:9])) > ctx.nowMs {
			break
		}
		expired = append(expired, append([]byte(nil), k...))
	}
	ctx.closeIter(it)
	for _, k := range expired {
		ctx.del(k)
		// The index entry may be stale (the key was rewritten with another
		// expiry): only delete a value that still expires here.
		vk := append([]byte{tagKV}, k[9:]...)
		if v, ok := ctx.get(vk); ok {
			if e, ok := decodeKVEntry(v); ok && e.expiresMs == int64(binary.BigEndian.Uint64(k[1:9])) {
				ctx.del(vk)
			}
		}
	}
}

// firstKey returns the first committed key with prefix.
func (s *Store) firstKey(prefix []byte) ([]byte, bool) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	return s.firstKeyHeld(prefix)
}

// firstKeyHeld is firstKey for a caller holding the database lock
// (TickDue's sweeper checks): a second read lock taken while Close waits
// for the write lock would never be granted.
func (s *Store) firstKeyHeld(prefix []byte) ([]byte, bool) {
	if s.db == nil {
		return nil, false
	}
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	defer it.Close()
	if !it.First() {
		return nil, false
	}
	return append([]byte(nil), it.Key()...), true
}
