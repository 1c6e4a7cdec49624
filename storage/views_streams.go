package storage

import (
	"bytes"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// StreamsUsage is what this replica holds of the Streams namespace
// (wire.StreamsNamespace) over every tenant: queries, state rows and the
// state rows' stored bytes (keys and values). One pass over the namespace,
// skipping every tenant's other KV by seeking: for a scrape. Keys follow
// the Streams routes' layout (http/api/streams.go): "q/<id>" a query,
// "s/..." a state row.
func (s *Store) StreamsUsage() (queries, rows, stored uint64, err error) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return 0, 0, 0, ErrClosed
	}
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagKV}, UpperBound: []byte{tagKV + 1}})
	defer it.Close()
	for valid := it.First(); valid; {
		k := it.Key()
		if len(k) < 17 {
			valid = it.Next()
			continue
		}
		var tenant wire.ID
		copy(tenant[:], k[1:17])
		pre := kvKey(tenant, wire.StreamsNamespace, nil)
		for valid = it.SeekGE(pre); valid && bytes.HasPrefix(it.Key(), pre); valid = it.Next() {
			key := it.Key()[len(pre):]
			switch {
			case bytes.HasPrefix(key, []byte("q/")):
				queries++
			case bytes.HasPrefix(key, []byte("s/")):
				rows++
				stored += uint64(len(key) + len(it.Value()))
			}
		}
		valid = it.SeekGE(prefixEnd(append([]byte{tagKV}, tenant[:]...)))
	}
	return queries, rows, stored, it.Error()
}
