package storage

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// A queue is spread over raft groups (docs/placement.md): its home group
// holds the catalog (options, labels, placement) and the directory of
// every partition; each group holding partitions of the queue holds a shard
// of it, a queueState with a copy of the options and only its own
// partitions. The home is a shard too, of the partitions placed there.
// Everything here is applied in one group at a time: the engine carries
// what one group decided (a directory entry, a new option version) to the
// others as commands.

func dirKey(qid uint64, index uint32) []byte {
	b := appendU64(make([]byte, 0, 13), qid)
	b = append([]byte{tagDir}, b...)
	return binary.BigEndian.AppendUint32(b, index)
}

func dirPrefix(qid uint64) []byte { return appendU64([]byte{tagDir}, qid) }

func (d *dirEntry) encode() []byte {
	w := wire.Writer{B: make([]byte, 0, 16+len(d.name))}
	w.String(d.name)
	w.Uvarint(uint64(d.group))
	w.Varint(d.createdMs)
	if d.epochBase > 0 {
		// Only a move writes it, from FormatV9: no build before it
		// meets the tail.
		w.Uvarint(uint64(d.epochBase))
	}
	return w.B
}

func decodeDirEntry(b []byte) (dirEntry, error) {
	r := wire.NewReader(b)
	d := dirEntry{name: r.String(), group: uint16(r.Uvarint()), createdMs: r.Varint()}
	if r.Len() > 0 {
		d.epochBase = uint32(r.Uvarint())
	}
	return d, r.Done()
}

// catalog is q's catalog as the wire carries it.
func (q *queueState) catalog() wire.Catalog {
	c := wire.Catalog{Inc: q.inc, CfgVer: q.cfgVer, Cfg: q.cfg, Namespace: q.namespace, Task: q.task,
		Kafka: q.kafka, CreatedMs: q.createdMs, Place: q.place}
	if q.home {
		c.Partitions, c.Groups = uint32(len(q.dir)), q.groups
	}
	return c
}

// dirEntryAt is the directory entry at index as the wire carries it.
func (q *queueState) dirEntryAt(read dirReader, index uint32) wire.DirEntry {
	d, _ := q.dirEntry(read, index)
	return wire.DirEntry{Index: index, Name: d.name, Group: q.dir[index].group(), CreatedMs: d.createdMs, EpochBase: d.epochBase}
}

// readCommitted is the dirReader of readers, under the read locks.
func (s *Store) readCommitted(key []byte) ([]byte, bool) {
	if s.db == nil {
		return nil, false
	}
	v, closer, err := s.db.Get(key)
	if err != nil {
		return nil, false
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out, true
}

// createCatalog creates a queue whose home is this group.
func (s *Store) createCatalog(ctx *applyCtx, tenant wire.ID, name, namespace, task string, cfg wire.QueueConfig, kafka bool, place wire.Placement) *queueState {
	return s.createQueue(ctx, tenant, name, &wire.Catalog{Cfg: cfg, Namespace: namespace, Task: task, Kafka: kafka, Place: place}, true)
}

// homeFor answers whether a command creating a queue here, with place,
// reached the right group.
func (s *Store) homeFor(place *wire.Placement) bool {
	return place.Valid() && place.Home() == s.cfg.Group
}

// addDirEntry appends a partition to a home's directory, placed by the
// catalog's rule, and creates it here when this group is where it goes.
// An empty name means "named by its index" (Kafka); a name an HTTP
// partition already took gets a prefix so names stay unique.
func (s *Store) addDirEntry(ctx *applyCtx, q *queueState, name string) uint32 {
	index := uint32(len(q.dir))
	if name == "" {
		name = strconv.FormatUint(uint64(index), 10)
		for _, taken := q.dirIndex(ctx.get, name); taken; _, taken = q.dirIndex(ctx.get, name) {
			name = "kafka-" + name
		}
	}
	g := q.place.GroupOf(index)
	d := dirEntry{name: name, group: uint16(g), createdMs: ctx.nowMs}
	q.dir = append(q.dir, slotOf(d.group))
	q.dirNames.put(name, index)
	q.groups |= 1 << uint(g)
	q.countInGroup(d.group)
	ctx.set(dirKey(q.id, index), d.encode())
	if g == s.cfg.Group {
		s.createPartition(ctx, q, index, name, ctx.nowMs)
	}
	ctx.touch(q)
	return index
}

// applyAlloc makes sure a queue's catalog and the partitions a command
// names exist in the directory (see wire.AllocCmd).
func (s *Store) applyAlloc(ctx *applyCtx, c *wire.AllocCmd) wire.AllocResult {
	var res wire.AllocResult
	q := s.queue(c.Tenant, c.Queue)
	switch {
	case q != nil && !q.home:
		res.Code = wire.CodeBadRequest // a shard: the command went to the wrong group
		return res
	case q == nil && c.Flags&wire.AllocCreate == 0:
		res.Code = wire.CodeQueueNotFound
		return res
	case q == nil && !s.homeFor(&c.Place):
		res.Code = wire.CodeBadRequest
		return res
	case uint64(len(c.Names))+uint64(c.Count) > wire.MaxAllocPartitions:
		res.Code = wire.CodeInvalidPartitions
		return res
	}
	for _, n := range c.Names {
		if n == "" {
			res.Code = wire.CodeBadRequest
			return res
		}
	}
	if q != nil && len(c.Gone) > 0 {
		s.dropGone(ctx, q, c.Gone)
	}
	if q == nil {
		cfg := wire.PushCreatedQueueConfig()
		if c.Flags&wire.AllocKafka != 0 {
			cfg = wire.DefaultQueueConfig()
		}
		q = s.createCatalog(ctx, c.Tenant, c.Queue, c.Namespace, c.Task, cfg, c.Flags&wire.AllocKafka != 0, c.Place)
		res.Created = true
	}
	res.Parts = make([]wire.DirEntry, 0, len(c.Names)+int(c.Count))
	for _, n := range c.Names {
		index, ok := q.dirIndex(ctx.get, n)
		if !ok {
			index = s.addDirEntry(ctx, q, n)
		}
		res.Parts = append(res.Parts, q.dirEntryAt(ctx.get, index))
	}
	for uint32(len(q.dir)) < c.Count {
		s.addDirEntry(ctx, q, "")
	}
	for i := uint32(0); i < c.Count; i++ {
		if q.dir[i].removed() {
			continue // only HTTP queues have them
		}
		res.Parts = append(res.Parts, q.dirEntryAt(ctx.get, i))
	}
	res.Catalog = q.catalog()
	return res
}

// applyEnsureShard makes this group's shard of a queue match the catalog
// the command carries (see wire.EnsureShardCmd).
func (s *Store) applyEnsureShard(ctx *applyCtx, c *wire.EnsureShardCmd) wire.CodeResult {
	cat := &c.Catalog
	if cat.Inc == 0 {
		return wire.CodeResult{Code: wire.CodeBadRequest}
	}
	q := s.queue(c.Tenant, c.Queue)
	if q != nil && q.inc != cat.Inc {
		if q.home || q.inc > cat.Inc {
			return wire.CodeResult{Code: wire.CodeQueueNotFound} // the command is about an older incarnation
		}
		s.deleteQueueData(ctx, q) // a shard of an incarnation deleted since
		q = nil
	}
	if q == nil {
		q = s.createQueue(ctx, c.Tenant, c.Queue, cat, false)
	} else if cat.CfgVer > q.cfgVer {
		q.cfg, q.cfgVer, q.namespace, q.task = cat.Cfg, cat.CfgVer, cat.Namespace, cat.Task
		s.noteQueueConfig(q)
		ctx.set(queueKey(q.id), q.encodeMeta())
		ctx.touch(q)
	}
	for i := range c.Parts {
		d := &c.Parts[i]
		if int(d.Group) != s.cfg.Group || d.Name == "" {
			return wire.CodeResult{Code: wire.CodeBadRequest}
		}
		if q.has(d.Index) || s.movedAt(q, d.Index) {
			continue // a partition moved away is never made again here (move.go)
		}
		if q.gone.has(d.Index) {
			continue // removed as idle: never made again at this index (a push to it answers CodePartitionGone)
		}
		if p := s.partNamed(ctx, q, d.Name); p != nil {
			return wire.CodeResult{Code: wire.CodeConflict} // the name is taken at another index
		}
		s.createPartition(ctx, q, d.Index, d.Name, d.CreatedMs)
		ctx.touch(q)
	}
	for _, sub := range c.Subs {
		if sub.Group != "" && q.subs[sub.Group] == nil {
			s.subscribe(ctx, q, sub.Group, sub.Sub.Mode, sub.Sub.FromMs, sub.Sub.CreatedMs)
		}
	}
	return wire.CodeResult{Code: wire.CodeOK}
}

// applyDropShard deletes this group's shard of incarnation Inc of a queue.
// The home never drops its shard this way: it goes with the catalog.
func (s *Store) applyDropShard(ctx *applyCtx, c *wire.DropShardCmd) wire.CodeResult {
	q := s.queue(c.Tenant, c.Queue)
	if q == nil || q.home || q.inc != c.Inc {
		return wire.CodeResult{Code: wire.CodeNotFound}
	}
	s.deleteQueueData(ctx, q)
	return wire.CodeResult{Code: wire.CodeOK}
}

// applySubscribe creates a consumer group's subscription at a queue's home
// once and answers the one in force.
func (s *Store) applySubscribe(ctx *applyCtx, c *wire.SubscribeCmd) wire.SubscribeResult {
	q := s.queue(c.Tenant, c.Queue)
	switch {
	case q == nil:
		return wire.SubscribeResult{Code: wire.CodeQueueNotFound}
	case !q.home || c.Group == "":
		return wire.SubscribeResult{Code: wire.CodeBadRequest}
	}
	sub := s.subscribe(ctx, q, c.Group, c.Mode, c.FromMs, 0)
	return wire.SubscribeResult{Code: wire.CodeOK, Sub: wire.Subscription{Mode: sub.mode, FromMs: sub.fromMs, CreatedMs: sub.createdMs}}
}

// deleteQueueData removes a queue's state from this group: partitions,
// messages, indexes, cursors, leases, subscriptions, dead-letter rows, its
// Kafka bookkeeping and, at the home, the catalog and directory.
func (s *Store) deleteQueueData(ctx *applyCtx, q *queueState) {
	deleteChunksOf(ctx, q.pids)
	for i, pid := range q.pids {
		if pid == 0 {
			continue
		}
		// A partition out of memory holds no lease (partcache.go).
		if p := q.inMemory(uint32(i)); p != nil {
			for _, cur := range p.cursors {
				if cur.lease != nil {
					s.unindexLease(cur.lease.id, p)
				}
			}
			p.deleted.Store(true)
			delete(s.parts, pid)
		}
		for _, prefix := range [][]byte{chunkPrefix(pid), txnPrefix(pid), cursorPrefix(pid)} {
			_ = ctx.b.DeleteRange(prefix, prefixEnd(prefix), nil)
		}
		ctx.del(partitionKey(pid))
	}
	s.forgetKafkaQueue(ctx, q)
	s.forgetMoves(ctx, q)
	deleteDLQRows(ctx, q.tenant, q.id)
	for _, prefix := range [][]byte{subPrefix(q.id), dirPrefix(q.id), gonePrefix(q.id)} {
		_ = ctx.b.DeleteRange(prefix, prefixEnd(prefix), nil)
	}
	ctx.del(queueKey(q.id))
	delete(s.queues, queueKeyT{q.tenant, q.name})
	delete(s.queuesByID, q.id)
	delete(s.timed, q.id)
	ctx.touch(q)
}

// loadDir reads the directories of the home queues.
func (s *Store) loadDir() error {
	return s.scan([]byte{tagDir}, func(k, v []byte) error {
		if len(k) != 13 && len(k) != 9 {
			return nil
		}
		q := s.queuesByID[binary.BigEndian.Uint64(k[1:9])]
		if q == nil || !q.home {
			return nil
		}
		if len(k) == 9 { // the directory's length, kept once its last entries were dropped
			n, w := binary.Uvarint(v)
			if w <= 0 || n > 1<<32 {
				return fmt.Errorf("storage: queue %d directory length %x", q.id, v)
			}
			for uint64(len(q.dir)) < n {
				q.dir = append(q.dir, 0)
			}
			return nil
		}
		d, err := decodeDirEntry(v)
		if err != nil {
			return err
		}
		index := binary.BigEndian.Uint32(k[9:13])
		for uint32(len(q.dir)) <= index {
			q.dir = append(q.dir, 0)
		}
		q.dir[index] = slotOf(d.group)
		q.dirNames.put(d.name, index)
		q.groups |= 1 << uint(d.group)
		q.countInGroup(d.group)
		return nil
	})
}

// Catalog is a queue's catalog as this group holds it: the authoritative
// one when home is true, a shard's copy otherwise.
func (s *Store) Catalog(tenant wire.ID, queue string) (cat wire.Catalog, home, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q := s.queue(tenant, queue)
	if q == nil {
		return wire.Catalog{}, false, false
	}
	return q.catalog(), q.home, true
}

// DirByName finds a partition by name in a home's directory.
func (s *Store) DirByName(tenant wire.ID, queue, name string) (wire.DirEntry, bool) {
	defer s.readLock()()
	q := s.queue(tenant, queue)
	if q == nil || !q.home {
		return wire.DirEntry{}, false
	}
	i, ok := q.dirIndex(s.readCommitted, name)
	if !ok {
		return wire.DirEntry{}, false
	}
	return q.dirEntryAt(s.readCommitted, i), true
}

// DirByIndex finds a partition by index in a home's directory.
func (s *Store) DirByIndex(tenant wire.ID, queue string, index uint32) (wire.DirEntry, bool) {
	defer s.readLock()()
	q := s.queue(tenant, queue)
	if q == nil || !q.home || index >= uint32(len(q.dir)) || q.dir[index].removed() {
		return wire.DirEntry{}, false
	}
	return q.dirEntryAt(s.readCommitted, index), true
}

// Dir lists a home's directory entries from index from, up to limit,
// leaving out the indexes of partitions removed as idle. It reads them in
// one pass over the stored entries (a hole has none): the directory keeps
// only a slot per index in memory.
func (s *Store) Dir(tenant wire.ID, queue string, from uint32, limit int) []wire.DirEntry {
	defer s.readLock()()
	q := s.queue(tenant, queue)
	if q == nil || !q.home || s.db == nil || limit <= 0 {
		return nil
	}
	prefix := dirPrefix(q.id)
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: dirKey(q.id, from), UpperBound: prefixEnd(prefix)})
	defer it.Close()
	var out []wire.DirEntry
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		k := it.Key()
		if len(k) != len(prefix)+4 {
			continue
		}
		d, err := decodeDirEntry(it.Value())
		if err != nil {
			continue
		}
		out = append(out, wire.DirEntry{Index: binary.BigEndian.Uint32(k[len(prefix):]), Name: d.name, Group: d.group, CreatedMs: d.createdMs, EpochBase: d.epochBase})
	}
	return out
}

// HasPartitionsAt reports, for each directory entry, whether this group
// holds its partition in incarnation inc of the queue.
func (s *Store) HasPartitionsAt(tenant wire.ID, queue string, inc uint64, entries []wire.DirEntry) []bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q := s.queue(tenant, queue)
	out := make([]bool, len(entries))
	for i, d := range entries {
		out[i] = q != nil && q.inc == inc && q.has(d.Index)
	}
	return out
}

// countInGroup counts one more directory entry placed in group g.
func (q *queueState) countInGroup(g uint16) {
	for int(g) >= len(q.dirInGroup) {
		q.dirInGroup = append(q.dirInGroup, 0)
	}
	q.dirInGroup[g]++
}

// DirInGroup is how many partitions a home's directory places in group g.
func (s *Store) DirInGroup(tenant wire.ID, queue string, g int) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q := s.queue(tenant, queue)
	if q == nil || !q.home || g < 0 || g >= len(q.dirInGroup) {
		return 0
	}
	return int(q.dirInGroup[g])
}

// HasPartitionAt reports whether this group holds partition index of
// incarnation inc of the queue.
func (s *Store) HasPartitionAt(tenant wire.ID, queue string, inc uint64, index uint32) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q := s.queue(tenant, queue)
	return q != nil && q.inc == inc && q.has(index)
}

// Subscriptions lists the consumer groups subscribed to a queue here.
func (s *Store) Subscriptions(tenant wire.ID, queue string) []wire.SubEntry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q := s.queue(tenant, queue)
	if q == nil {
		return nil
	}
	out := make([]wire.SubEntry, 0, len(q.subs))
	for _, sub := range q.subs {
		out = append(out, wire.SubEntry{Group: sub.group, Sub: wire.Subscription{Mode: sub.mode, FromMs: sub.fromMs, CreatedMs: sub.createdMs}})
	}
	slices.SortFunc(out, func(a, b wire.SubEntry) int { return strings.Compare(a.Group, b.Group) })
	return out
}

// Subscription is a consumer group's subscription to a queue as this group
// holds it.
func (s *Store) Subscription(tenant wire.ID, queue, group string) (wire.Subscription, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q := s.queue(tenant, queue)
	if q == nil || q.subs[group] == nil {
		return wire.Subscription{}, false
	}
	sub := q.subs[group]
	return wire.Subscription{Mode: sub.mode, FromMs: sub.fromMs, CreatedMs: sub.createdMs}, true
}

// ShardState is what the reconciler compares against a queue's catalog.
type ShardState struct {
	Tenant wire.ID
	Queue  string
	Inc    uint64
	CfgVer uint64
	Home   bool
	// Partitions counts the partitions this group holds (a count, not
	// their list: reconciling every few seconds must not copy millions).
	Partitions int
	// Subs counts the consumer groups subscribed here.
	Subs int
	// Drops counts the partitions removed here whose home may still
	// list them (cleanup.go).
	Drops int
}

// Shards lists every queue state this group holds.
func (s *Store) Shards() []ShardState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]ShardState, 0, len(s.queuesByID))
	for _, q := range s.queuesByID {
		out = append(out, ShardState{Tenant: q.tenant, Queue: q.name, Inc: q.inc, CfgVer: q.cfgVer, Home: q.home,
			Subs: len(q.subs), Partitions: q.partitionCount(), Drops: len(q.dropsPending)})
	}
	return out
}
