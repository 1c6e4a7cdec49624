package storage

import (
	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// KVGet reads one key as of the last applied entry (expired keys are
// absent). Callers that need a linearizable read call Engine.Barrier first.
func (s *Store) KVGet(tenant wire.ID, ns string, key []byte) (wire.KVItem, bool, error) {
	now := s.ClockMs()
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return wire.KVItem{}, false, ErrClosed
	}
	v, closer, err := s.db.Get(kvKey(tenant, ns, key))
	if err == pebble.ErrNotFound {
		return wire.KVItem{Key: key}, false, nil
	}
	if err != nil {
		return wire.KVItem{}, false, err
	}
	defer closer.Close()
	e, ok := decodeKVEntry(v)
	if !ok || !e.live(now) {
		return wire.KVItem{Key: key}, false, nil
	}
	return item(key, &e), true, nil
}

// KVList lists live keys of a namespace with a prefix, after a cursor key.
func (s *Store) KVList(tenant wire.ID, ns string, prefix, after []byte, limit int) ([]wire.KVItem, error) {
	now := s.ClockMs()
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return nil, ErrClosed
	}
	return s.kvScan(s.db, tenant, ns, prefix, after, limit, now), nil
}

// KVEach calls fn with every live entry of ns under prefix, in key
// order, a page of wire.MaxKVPrefixResult at a time (each page under the
// store's read lock, fn outside it); fn's error stops the walk.
func (s *Store) KVEach(tenant wire.ID, ns string, prefix []byte, fn func(wire.KVItem) error) error {
	var after []byte
	for {
		items, err := s.KVList(tenant, ns, prefix, after, wire.MaxKVPrefixResult)
		if err != nil {
			return err
		}
		for _, it := range items {
			if err := fn(it); err != nil {
				return err
			}
		}
		if len(items) < wire.MaxKVPrefixResult {
			return nil
		}
		after = items[len(items)-1].Key
	}
}

// KVNamespaces lists the tenant's namespaces that hold at least one key.
func (s *Store) KVNamespaces(tenant wire.ID) ([]string, error) {
	return s.distinctNames(append([]byte{tagKV}, tenant[:]...), 1<<20)
}
