package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble"
)

// Partition state in memory (docs/placement.md, "Partition state in
// memory"). A group keeps at most a budget of its HTTP queues' partitions
// in memory (Config.PartitionCache); the others live only in the store,
// where their meta and cursors always are, and cost a group 8 bytes an
// index (their id) plus their name's slot in the queue's name table and a
// bit in each ready set (and at the home, a directory slot: placement.go).
//
// This file owns which partitions are in memory and reading them back; it
// never decides what a command does to a partition.
//
// A partition leaves memory after the batch that last changed it was
// committed, and only when reading it back gives the same state: nothing
// about it is held only in memory (no lease, no prepared transaction's pin,
// no Kafka producer or transaction state, no change waiting for the
// batch's end), and its part of its queue's totals is what its stored state
// counts. Reading it back is then what a restart does for every partition,
// so whether a partition was in memory never changes an answer
// (TestAnEvictingStoreAnswersLikeOneThatKeepsAll). The apply loop reads a
// partition back when a command needs it; readers decode a copy of their
// own from the committed store and leave the cache alone.
//
// Queues created through Kafka keep every partition in memory: they have
// few, and the Kafka paths reach them by index everywhere.

// DefaultPartitionCache is how many partitions a group keeps in memory when
// the configuration does not say.
const DefaultPartitionCache = 65536

// partCache orders the partitions a group holds in memory, first in first
// out; a partition that cannot leave yet goes to the back again.
type partCache struct {
	limit int          // most partitions kept (0: every one)
	order []*partState // in memory, in the order they came in; some left since
	head  int
	n     int // partitions in order not known to have left
}

// over reports whether the cache holds more than its limit.
func (c *partCache) over() bool { return c.limit > 0 && c.n > c.limit }

func (c *partCache) add(p *partState) {
	if c.limit > 0 && !p.q.kafka {
		c.order = append(c.order, p)
		c.n++
	}
}

// trimCache takes partitions out of memory, oldest first, until the cache
// holds no more than its limit, looking at a bounded number of them per
// batch so that many busy partitions do not make every batch long. It runs
// after a batch is committed and published: what leaves is in the store.
func (s *Store) trimCache() {
	c := &s.cache
	if !c.over() {
		return
	}
	for looks := max(2*(c.n-c.limit), 256); c.n > c.limit && looks > 0 && c.head < len(c.order); looks-- {
		p := c.order[c.head]
		c.order[c.head] = nil
		c.head++
		switch {
		case p.deleted.Load() || p.evicted.Load() || s.parts[p.id] != p:
			c.n-- // removed, or its queue deleted, since it came in
		case s.evictable(p):
			s.evict(p)
			c.n--
		default:
			c.order = append(c.order, p)
		}
	}
	if c.head > 1024 && c.head > len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		clear(c.order[len(c.order):cap(c.order)])
		c.head = 0
	}
}

// evictable reports whether p's state is all in the store and reading it
// back would count it as it is counted now (see the file comment).
func (s *Store) evictable(p *partState) bool {
	if p.q.kafka || p.dirty || p.heapAt >= 0 || p.leased != 0 || !p.counted.in {
		return false
	}
	if _, ok := s.kafka.producers[p.id]; ok {
		return false
	}
	if _, ok := s.kafka.partTxns[p.id]; ok {
		return false
	}
	for _, c := range p.cursors {
		if c.lease != nil || s.anyPin(p.id, c.group) {
			return false
		}
	}
	counted, ok := countsOfStored(p)
	return ok && counted == p.counted && p.nextCounted == p.next && lagsCounted(p)
}

// countsOfStored is p's part of the totals as a partition read back from
// the store is given it (restoreCounts); ok is false when a lease would
// count, which a stored partition never has.
func countsOfStored(p *partState) (packedCounts, bool) {
	base, worst := partBase(p, p.next, p.start)
	return packCounts(base), worst == nil
}

// lagsCounted reports whether each cursor's part of its group's lag is
// what restoreCounts gives it.
func lagsCounted(p *partState) bool {
	for _, c := range p.cursors {
		if c.lagCounted != cursorLag(p, c)+1 {
			return false
		}
	}
	return true
}

// restoreCounts gives a partition read back from the store the part of
// the totals it had when it left memory, without moving the totals: they
// never stopped counting it.
func restoreCounts(p *partState) {
	p.counted, _ = countsOfStored(p)
	p.nextCounted = p.next
	for _, c := range p.cursors {
		c.lagCounted = cursorLag(p, c) + 1
	}
}

// evict takes p out of memory. Handles readers hold on it find it again
// through the store (Partition.live).
func (s *Store) evict(p *partState) {
	if verifyTotals {
		s.checkStored(p)
	}
	delete(p.q.parts, p.index)
	delete(s.parts, p.id)
	p.evicted.Store(true)
}

// checkStored panics when p's state differs from what reading it back
// gives: something about it was held only in memory, and a replica that
// evicted it would answer unlike one that did not. Tests turn it on with
// VerifyTotals.
func (s *Store) checkStored(p *partState) {
	src := s.peekSource()
	defer src.close()
	back, err := s.readPart(src, p.id)
	if err != nil {
		panic(fmt.Sprintf("storage: partition %d: read back: %v", p.id, err))
	}
	restoreCounts(back)
	if string(back.encodeMeta()) != string(p.encodeMeta()) || len(back.cursors) != len(p.cursors) ||
		back.counted != p.counted || back.nextCounted != p.nextCounted {
		panic(fmt.Sprintf("storage: partition %d of %q leaves memory unlike it is stored", p.id, p.q.name))
	}
	for _, c := range p.cursors {
		b := back.cursors.get(c.group)
		if b == nil || string(b.encode()) != string(c.encode()) || b.lagCounted != c.lagCounted {
			panic(fmt.Sprintf("storage: partition %d of %q: cursor %q leaves memory unlike it is stored", p.id, p.q.name, c.group))
		}
	}
}

// partSource reads partitions back from the committed store, with one
// iterator for all the partitions it reads. The apply loop reads there too,
// not through its batch: a partition out of memory was not written by the
// batch being applied (every command that writes it reads it back first,
// and it leaves memory only after a commit), so the store holds what the
// batch would show, without the batch's own index to look through.
type partSource struct {
	db    *pebble.DB
	metas *pebble.Iterator // over partition metas
	it    *pebble.Iterator // over one partition's cursors at a time
}

// get reads one key. Partition metas are read through an iterator kept
// for the batch: a pop reads its partitions in index order, mostly in id
// order, and the iterator keeps the block it stands in where a Get looks
// every level up again (at a million partitions, Gets spent most of a pop
// loading and decompressing blocks).
func (src *partSource) get(key []byte) ([]byte, io.Closer, error) {
	if len(key) == 0 || key[0] != tagPartition {
		return src.db.Get(key)
	}
	if src.metas == nil {
		lower := []byte{tagPartition}
		src.metas = src.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	}
	if !src.metas.SeekGE(key) || !bytes.Equal(src.metas.Key(), key) {
		if err := src.metas.Error(); err != nil {
			return nil, nil, err
		}
		return nil, nil, pebble.ErrNotFound
	}
	return src.metas.Value(), io.NopCloser(nil), nil
}

// under is the iterator, bounded to the keys under prefix.
func (src *partSource) under(prefix []byte) *pebble.Iterator {
	if src.it == nil {
		src.it = src.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	} else {
		src.it.SetBounds(prefix, prefixEnd(prefix))
	}
	return src.it
}

func (src *partSource) close() error {
	var err error
	for _, it := range []**pebble.Iterator{&src.metas, &src.it} {
		if *it != nil {
			if cerr := (*it).Close(); err == nil {
				err = cerr
			}
			*it = nil
		}
	}
	return err
}

// partsBack is the apply loop's partSource for the batch being applied.
func (ctx *applyCtx) partsBack() *partSource {
	if ctx.back.db == nil {
		ctx.back.db = ctx.s.db
	}
	return &ctx.back
}

// errPartitionElsewhere is a stored partition its queue does not hold at
// its index: removed by the batch being applied, or a corrupt key.
var errPartitionElsewhere = errors.New("storage: stored partition is not at its queue's index")

// storedPart reads partition pid's meta back from r, with the high-water
// mark and log start published as stored; its queue must hold it at its
// index. A partition that is not stored answers pebble.ErrNotFound.
func (s *Store) storedPart(r *partSource, pid uint64) (*partState, error) {
	v, closer, err := r.get(partitionKey(pid))
	if err != nil {
		return nil, err
	}
	p, qid, err := decodePartMeta(pid, v)
	closer.Close()
	if err != nil {
		return nil, fmt.Errorf("storage: partition %d: %w", pid, err)
	}
	q := s.queuesByID[qid]
	if q == nil || !q.has(p.index) || q.pids[p.index] != pid {
		return nil, fmt.Errorf("%w: partition %d, queue %d index %d", errPartitionElsewhere, pid, qid, p.index)
	}
	p.q = q
	p.hwm.Store(p.next)
	p.logStart.Store(p.start)
	p.lastWrite.Store(p.lastWriteMs)
	return p, nil
}

// readPart reads partition pid back from r: its meta and cursors.
func (s *Store) readPart(r *partSource, pid uint64) (*partState, error) {
	return s.readPartWith(r, pid, false)
}

// readPartWith is readPart; a cursor holding a lease is an error unless
// leases is set (a partition that left memory never holds one; load reads
// those that stayed).
func (s *Store) readPartWith(r *partSource, pid uint64, leases bool) (*partState, error) {
	p, err := s.storedPart(r, pid)
	if err != nil {
		return nil, err
	}
	prefix := cursorPrefix(pid)
	it := r.under(prefix)
	for it.First(); it.Valid(); it.Next() {
		c, err := decodeCursor(p.q.groupName(string(it.Key()[len(prefix):])), it.Value())
		if err != nil {
			return nil, fmt.Errorf("storage: cursor of partition %d: %w", pid, err)
		}
		if c.lease != nil && !leases {
			return nil, fmt.Errorf("storage: partition %d left memory with a lease", pid)
		}
		p.cursors.put(c)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("storage: cursors of partition %d: %w", pid, err)
	}
	return p, nil
}

// groupName is the copy of a consumer group's name q's cursors share (one
// per group, however many partitions).
func (q *queueState) groupName(group string) string {
	if sub := q.subs[group]; sub != nil {
		return sub.group
	}
	return group
}

// groupNameOf is groupName of a name in a stored key, copied only when q
// has no subscription of that name.
func (q *queueState) groupNameOf(group []byte) string {
	if sub := q.subs[string(group)]; sub != nil {
		return sub.group
	}
	return string(group)
}

// has reports whether this group holds partition i of q, in memory or not.
func (q *queueState) has(i uint32) bool { return int(i) < len(q.pids) && q.pids[i] != 0 }

// partAt is this group's partition i of q for the apply loop, read back
// into memory when it is not there; nil when the group does not hold it.
func (s *Store) partAt(ctx *applyCtx, q *queueState, i uint32) *partState {
	if !q.has(i) {
		return nil
	}
	if p := q.inMemory(i); p != nil {
		return p
	}
	return s.bringBack(ctx, q.pids[i], true)
}

// bringBack reads partition pid back into memory for the apply loop; nil
// when no queue holds it. That fails the batch when its queue holds it
// (known), as any other failed read does: an answer must never depend on
// a replica's disk. A partition the batch removed is still in the
// committed store, but its queue no longer holds it.
func (s *Store) bringBack(ctx *applyCtx, pid uint64, known bool) *partState {
	p, err := s.readPart(ctx.partsBack(), pid)
	if err != nil {
		if known || !(errors.Is(err, pebble.ErrNotFound) || errors.Is(err, errPartitionElsewhere)) {
			ctx.fail(fmt.Errorf("storage: read partition %d back: %w", pid, err))
		}
		return nil
	}
	restoreCounts(p)
	p.q.keep(p)
	s.parts[p.id] = p
	s.cache.add(p)
	return p
}

// partByID is partition pid for the apply loop, read back into memory when
// it is not there; nil when no queue holds it.
func (s *Store) partByID(ctx *applyCtx, pid uint64) *partState {
	if p := s.parts[pid]; p != nil {
		return p
	}
	if pid == 0 {
		return nil
	}
	return s.bringBack(ctx, pid, false)
}

// partNamed is this group's partition of q named name for the apply loop.
func (s *Store) partNamed(ctx *applyCtx, q *queueState, name string) *partState {
	i, ok := q.partNames.get(name, func(i uint32) string { return s.nameAt(ctx.partsBack(), q, i) })
	if !ok {
		return nil
	}
	return s.partAt(ctx, q, i)
}

// nameAt is the name of this group's partition i of q, read from r when it
// is not in memory ("" when unreadable: no name matches it).
func (s *Store) nameAt(r *partSource, q *queueState, i uint32) string {
	if p := q.inMemory(i); p != nil {
		return p.name
	}
	p, err := s.storedPart(r, q.pids[i])
	if err != nil {
		return ""
	}
	return p.name
}

// The readers' side: under the read lock, with the database lock taken
// before it (RecoverFromSnapshot's order). A partition not in memory is
// decoded from the committed store into a copy the reader alone holds,
// marked evicted so a handle on it resolves again.

// peekAt is this group's partition i of q for a reader.
func (s *Store) peekAt(q *queueState, i uint32) *partState { return s.peekVia(nil, q, i) }

// peekVia is peekAt reading through src, which a reader going through many
// partitions keeps for all of them (nil: one of its own).
func (s *Store) peekVia(src *partSource, q *queueState, i uint32) *partState {
	if !q.has(i) {
		return nil
	}
	if p := q.inMemory(i); p != nil {
		return p
	}
	return s.peekStored(src, q.pids[i])
}

// peekSource is a partSource for a reader under the read locks; the
// reader closes it.
func (s *Store) peekSource() *partSource { return &partSource{db: s.db} }

// peekByID is partition pid for a reader.
func (s *Store) peekByID(pid uint64) *partState {
	if p := s.parts[pid]; p != nil {
		return p
	}
	return s.peekStored(nil, pid)
}

// peekNamed is this group's partition of q named name for a reader.
func (s *Store) peekNamed(q *queueState, name string) *partState {
	if s.db == nil {
		return nil
	}
	src := s.peekSource()
	defer src.close()
	i, ok := q.partNames.get(name, func(i uint32) string { return s.nameAt(src, q, i) })
	if !ok {
		return nil
	}
	return s.peekVia(src, q, i)
}

// peekStored decodes partition pid from the committed store into a copy
// the reader alone holds (src nil: through a source of its own).
func (s *Store) peekStored(src *partSource, pid uint64) *partState {
	if s.db == nil || pid == 0 {
		return nil
	}
	if src == nil {
		src = s.peekSource()
		defer src.close()
	}
	p, err := s.readPart(src, pid)
	if err != nil {
		// Removed, or removed by a batch whose commit is on its way.
		if !errors.Is(err, pebble.ErrNotFound) && !errors.Is(err, errPartitionElsewhere) {
			s.log.Warn("storage: cannot read a partition back", "err", err)
		}
		return nil
	}
	p.evicted.Store(true)
	return p
}

// hasStoredCursor reports whether partition pid, not in memory, has a
// cursor of group in the store, without reading the partition back.
func (s *Store) hasStoredCursor(ctx *applyCtx, pid uint64, group string) bool {
	_, closer, err := ctx.partsBack().get(cursorKey(pid, group))
	if err != nil {
		if !errors.Is(err, pebble.ErrNotFound) {
			ctx.fail(fmt.Errorf("storage: read a cursor of partition %d: %w", pid, err))
		}
		return false
	}
	closer.Close()
	return true
}

// readLock takes the locks a reader that may read partitions back needs,
// in RecoverFromSnapshot's order, and returns what lets them go.
func (s *Store) readLock() (unlock func()) {
	s.dbMu.RLock()
	s.mu.RLock()
	return func() {
		s.mu.RUnlock()
		s.dbMu.RUnlock()
	}
}

// partitionStored reports whether partition pid exists (load reads the
// Kafka state, which names partitions by id, before the partitions).
func (s *Store) partitionStored(pid uint64) bool {
	_, ok := s.readCommitted(partitionKey(pid))
	return ok
}
