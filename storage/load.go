package storage

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// load rebuilds the in-memory model from the database: queues, partitions,
// subscriptions, cursors and leases, then every subscription's ready set.
// Ready sets are derived state: rebuilding them conservatively (a superset of
// the partitions with messages) keeps every replica's pop choices equal.
func (s *Store) load() error { return s.loadState(true) }

// loadState is load, from the store's load image when useImage is set and
// there is one that fits (image.go); a refused one starts it over without.
func (s *Store) loadState(useImage bool) error {
	s.queues = map[queueKeyT]*queueState{}
	s.queuesByID = map[uint64]*queueState{}
	s.parts = map[uint64]*partState{}
	s.cache = partCache{limit: s.cfg.PartitionCache}
	s.leases = map[wire.ID]leaseRef{}
	s.timed = map[uint64]*queueState{}
	s.counters = counters{nextQueueID: 1, nextPartID: 1, nextDLQID: 1, nextChunkSeq: 1}
	s.clockMs = 0

	if v, ok, err := s.getU64(keyApplied); err != nil {
		return err
	} else if ok {
		s.applied.Store(v)
	} else {
		s.applied.Store(0)
	}
	if v, ok, err := s.getU64(keyClock); err != nil {
		return err
	} else if ok {
		s.clockMs = int64(v)
	}
	if err := s.loadFormat(); err != nil {
		return err
	}
	if err := s.loadLink(); err != nil {
		return err
	}
	for _, c := range []struct {
		key []byte
		dst *uint64
	}{{keyKVVersion, &s.kvVersion}, {keyTraceSeq, &s.traceSeq}} {
		v, _, err := s.getU64(c.key)
		if err != nil {
			return err
		}
		*c.dst = v
	}
	if b, closer, err := s.db.Get(keyCounters); err == nil {
		r := wire.NewReader(b)
		s.counters = counters{nextQueueID: r.Uvarint(), nextPartID: r.Uvarint(), nextDLQID: r.Uvarint(), nextChunkSeq: r.Uvarint()}
		err := r.Done()
		closer.Close()
		if err != nil {
			return fmt.Errorf("storage: counters: %w", err)
		}
	} else if err != pebble.ErrNotFound {
		return fmt.Errorf("storage: read counters: %w", err)
	}
	if err := s.loadSweeps(); err != nil {
		return fmt.Errorf("storage: sweeps: %w", err)
	}
	if err := s.loadTxnDone(); err != nil {
		return fmt.Errorf("storage: transaction results: %w", err)
	}
	if err := s.loadRetries(); err != nil {
		return fmt.Errorf("storage: retried proposals: %w", err)
	}

	err := s.scan([]byte{tagQueue}, func(k, v []byte) error {
		q, err := decodeQueueMeta(binary.BigEndian.Uint64(k[1:]), v)
		if err != nil {
			return fmt.Errorf("queue %x: %w", k, err)
		}
		s.queues[queueKeyT{q.tenant, q.name}] = q
		s.queuesByID[q.id] = q
		s.noteQueueConfig(q)
		return nil
	})
	if err == nil {
		err = s.scan([]byte{tagSub}, func(k, v []byte) error {
			q := s.queuesByID[binary.BigEndian.Uint64(k[1:9])]
			if q == nil {
				return fmt.Errorf("subscription %x of a missing queue", k)
			}
			sub, err := decodeSub(string(k[9:]), v)
			if err != nil {
				return fmt.Errorf("subscription %x: %w", k, err)
			}
			q.subs[sub.group] = sub
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("storage: load: %w", err)
	}
	imaged := false
	if useImage {
		img, err := s.readImage()
		if err == nil && img != nil {
			err = s.installImage(img)
		}
		if err != nil {
			// A shortcut, never the record: the walk is always right.
			s.log.Warn("boot: load image not used, reading every partition instead", "err", err)
			return s.loadState(false)
		}
		imaged = img != nil
	}
	s.loadedFrom = "load image"
	if !imaged {
		s.loadedFrom = "walk"
		if err := s.loadDir(); err != nil {
			return fmt.Errorf("storage: load: %w", err)
		}
		if err := s.loadGone(); err != nil {
			return fmt.Errorf("storage: load: %w", err)
		}
	}
	if err := s.loadMoves(); err != nil {
		return fmt.Errorf("storage: load: %w", err)
	}
	// Kafka and cross-group transaction state before the walk: they say
	// which partitions must stay in memory (partcache.go).
	if err := s.loadKafka(); err != nil {
		return err
	}
	if err := s.loadXTxn(); err != nil {
		return fmt.Errorf("storage: cross-group transactions: %w", err)
	}
	if !imaged {
		if err := s.loadPartitions(); err != nil {
			return fmt.Errorf("storage: load: %w", err)
		}
		if err := s.countDLQRows(); err != nil {
			return err
		}
	}
	s.repin()
	return nil
}

// loadPartitions reads every partition with its cursors (both keyed by
// partition id first, so two iterators walk them together), counts it in
// its queue's totals and ready sets, and keeps it in memory only when it
// cannot leave (with a cache; without one, every partition stays).
func (s *Store) loadPartitions() error {
	parts := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagPartition}, UpperBound: []byte{tagPartition + 1}})
	curs := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagCursor}, UpperBound: []byte{tagCursor + 1}})
	// The partition and cursors the walk just let go are decoded into
	// again: nothing refers to them, and at millions of partitions their
	// garbage was most of what a boot allocated.
	var spare *partState
	var spareCursors []*cursor
	err := func() error {
		cok := curs.First()
		for ok := parts.First(); ok; ok = parts.Next() {
			k := parts.Key()
			p, qid, err := decodePartMetaInto(spare, binary.BigEndian.Uint64(k[1:]), parts.Value())
			spare = nil
			if err != nil {
				return fmt.Errorf("partition %x: %w", k, err)
			}
			q := s.queuesByID[qid]
			if q == nil {
				return fmt.Errorf("partition %d of missing queue %d", p.id, qid)
			}
			p.q = q
			p.hwm.Store(p.next)
			p.logStart.Store(p.start)
			p.lastWrite.Store(p.lastWriteMs)
			for ; cok; cok = curs.Next() {
				ck := curs.Key()
				pid := binary.BigEndian.Uint64(ck[1:9])
				if pid < p.id {
					return fmt.Errorf("cursor %x of a missing partition", ck)
				}
				if pid > p.id {
					break
				}
				var reuse *cursor
				if n := len(spareCursors); n > 0 {
					reuse, spareCursors = spareCursors[n-1], spareCursors[:n-1]
				}
				c, err := decodeCursorInto(reuse, q.groupNameOf(ck[9:]), curs.Value())
				if err != nil {
					return fmt.Errorf("cursor %x: %w", ck, err)
				}
				p.cursors.put(c)
				if c.lease != nil {
					s.indexLease(c.lease.id, p, c.group)
				}
			}
			if s.sealedPID(p.id) || !s.bringLoaded(q, p) {
				// A sealed partition is kept for its move (move.go)
				// but is no longer its queue's.
				spare = p
				spareCursors = append(spareCursors, p.cursors...)
			}
		}
		if cok {
			return fmt.Errorf("cursor %x of a missing partition", curs.Key())
		}
		return nil
	}()
	for _, it := range []*pebble.Iterator{parts, curs} {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// bringLoaded counts a partition load read in its queue's totals and
// ready sets, then keeps it in memory or lets it go (false).
func (s *Store) bringLoaded(q *queueState, p *partState) bool {
	s.tablePart(q, p)
	recount(p)
	// With a cache, only what cannot leave stays: a boot starts cold, as
	// from a load image, and the cache fills with what commands ask for.
	// Keeping the cache's share here held it all through the walk, and the
	// walk's garbage on top took a ten million partition boot past its
	// memory budget.
	if s.cache.limit > 0 && s.evictable(p) {
		s.evict(p)
		return false
	}
	s.cache.add(p)
	return true
}

// tablePart puts p in its queue's tables and the store's: its index, its
// id, and the ready set of every subscription it may hold messages for.
// detachPart undoes it.
func (s *Store) tablePart(q *queueState, p *partState) {
	q.addPart(p)
	s.parts[p.id] = p
	for _, sub := range q.subs {
		if readyFor(p, sub) {
			sub.ready.set(p.index)
		}
	}
}

// readyFor reports whether p may hold messages for sub: its cursor is
// behind the head or holds a lease, or, untouched, p holds messages the
// subscription would deliver.
func readyFor(p *partState, sub *subscription) bool {
	if c := p.cursors.get(sub.group); c != nil {
		return c.pos < p.next || c.lease != nil
	}
	return mayHaveNewFor(p, sub)
}

// rebuildReady marks every partition that may hold messages for sub. A
// partition out of memory is marked when its log holds records: more than
// it must, which a pop then clears without changing anything else.
func (s *Store) rebuildReady(q *queueState, sub *subscription) {
	sub.ready = readySet{}
	for i, pid := range q.pids {
		p := q.inMemory(uint32(i))
		if p == nil {
			if pid != 0 && q.stored.has(uint32(i)) {
				sub.ready.set(uint32(i))
			}
			continue
		}
		if readyFor(p, sub) {
			sub.ready.set(p.index)
		}
	}
}

// mayHaveNewFor reports whether an untouched partition may hold messages a
// subscription would deliver.
func mayHaveNewFor(p *partState, sub *subscription) bool {
	if p.next <= p.start {
		return false
	}
	switch sub.mode {
	case wire.SubAll:
		return true
	case wire.SubFrom:
		return p.lastWriteMs >= sub.fromMs
	default:
		return p.lastWriteMs >= sub.createdMs
	}
}

func (s *Store) getU64(key []byte) (uint64, bool, error) {
	b, closer, err := s.db.Get(key)
	if err == pebble.ErrNotFound {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("storage: read %q: %w", key, err)
	}
	defer closer.Close()
	if len(b) != 8 {
		return 0, false, fmt.Errorf("storage: key %q holds %d bytes, want 8", key, len(b))
	}
	return binary.BigEndian.Uint64(b), true, nil
}

// scan calls f for every key with the given prefix, in key order.
func (s *Store) scan(prefix []byte, f func(k, v []byte) error) error {
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	for it.First(); it.Valid(); it.Next() {
		if err := f(it.Key(), it.Value()); err != nil {
			it.Close()
			return err
		}
	}
	return it.Close()
}
