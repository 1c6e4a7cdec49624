package storage

import (
	"slices"
	"sync/atomic"

	"github.com/queen-mq/queen/wire"
)

// queueKeyT finds a queue by tenant and name.
type queueKeyT struct {
	tenant wire.ID
	name   string
}

// queueState is a queue as the apply loop sees it. Readers reach it only
// under the store's read lock.
type queueState struct {
	id        uint64
	tenant    wire.ID
	name      string
	namespace string
	task      string
	createdMs int64
	kafka     bool // created through Kafka: partitions named by index
	cfg       wire.QueueConfig

	// inc is the queue's incarnation (its home's queue id tagged with the
	// home group): every group's shard of one queue has the same, and a
	// queue created again after a delete gets a greater one. cfgVer counts
	// option changes at the home; a shard takes options only from a
	// newer version. place is where its partitions go.
	inc    uint64
	cfgVer uint64
	place  wire.Placement
	// home: this group holds the queue's catalog, the directory of every
	// partition (dir, by index; dirNames) and groups, the set of groups
	// holding partitions (bit g).
	home     bool
	dir      []dirSlot
	dirNames nameIndex
	groups   uint64
	// dirInGroup counts the directory's partitions by raft group, so a
	// shard's completeness is checked without copying the directory.
	dirInGroup []uint32

	// pids are this group's partitions' ids by permanent index (0: not
	// here), parts those of them in memory (partcache.go), partNames
	// them by name, and stored the indexes of those whose log holds
	// records, in memory or not.
	pids      []uint64
	parts     map[uint32]*partState
	partNames nameIndex
	stored    readySet
	// gone holds the indexes of partitions this group removed as idle and
	// empty; dropsPending those whose directory entry the home may still
	// hold (cleanup.go).
	gone         readySet
	dropsPending []uint32
	subs         map[string]*subscription

	stats   *queueStats // in-memory activity counters (views_stats.go)
	dlqRows int         // dead-letter rows not yet replayed, rebuilt by load

	// totals add up every partition's counts, leases taken as live;
	// leases orders the partitions holding one by expiry; appended adds up
	// the partitions' high-water marks and lags each group's cursors'
	// backlogs (totals.go).
	totals   Counts
	leases   leaseHeap
	appended uint64
	lags     map[string]*GroupLag
}

// partState is one partition. next, start and lastWriteMs belong to the
// apply loop; readers use the published high-water mark hwm, which only ever
// covers records already committed to the store. There is one per
// partition, millions in a node: fields are ordered so none is padded.
type partState struct {
	id          uint64
	q           *queueState
	name        string
	createdMs   int64
	next        uint64 // offset the next appended record gets
	start       uint64 // first offset still stored
	lastWriteMs int64

	hwm       atomic.Uint64 // committed high-water mark for readers
	logStart  atomic.Uint64 // committed log start for readers
	lastWrite atomic.Int64  // committed last write time for readers
	cursors   cursorList

	// Its part of q.totals (totals.go): counted, with its most-behind
	// cursor's lease taken as live (leased is how many messages that
	// lease moved out of pending), expiring at leaseExpiry, at heapAt in
	// q.leases (-1: no lease).
	counted     packedCounts
	leased      uint64
	leaseExpiry int64
	nextCounted uint64 // its part of q.appended
	heapAt      int32

	index     uint32
	deleted   atomic.Bool
	evicted   atomic.Bool // out of memory, or a reader's own copy (partcache.go)
	dirty     bool        // meta changed in the current apply batch
	recounted bool        // counted again in the current batch's finish (totals.go)
}

// dirEntry is one partition in a home's directory, as stored under its
// dir key.
type dirEntry struct {
	name      string
	group     uint16
	createdMs int64
	epochBase uint32 // set by a move's switch (move.go), an optional tail
}

// dirSlot is one index of a home's directory in memory: the raft group
// holding its partition, plus one; 0 is a hole, the index of a partition
// removed as idle (cleanup.go). The name and creation time stay in the
// store, read back when asked: at millions of partitions they were most of
// what a home kept in memory.
type dirSlot uint16

func slotOf(group uint16) dirSlot { return dirSlot(group + 1) }

// removed reports a hole.
func (d dirSlot) removed() bool { return d == 0 }

// group is the raft group of a live entry.
func (d dirSlot) group() uint16 { return uint16(d - 1) }

// subscription is a consumer group's subscription to a queue: where it starts
// reading partitions it has not touched yet, and which partitions may hold
// messages for it.
type subscription struct {
	group     string
	mode      uint8
	fromMs    int64
	createdMs int64
	ready     readySet
}

// Lease states of one leased message.
const (
	msgPending   uint8 = 0
	msgCompleted uint8 = 1
	msgFailed    uint8 = 2
	msgRetry     uint8 = 3
	msgDLQ       uint8 = 4
)

// lease is the one batch a group holds on a partition.
type lease struct {
	id        wire.ID
	from, to  uint64
	expiresMs int64
	states    []uint8
	pending   int
	errors    map[uint64]string // ack error text of failed messages, by offset
}

// cursor is a consumer group's position in one partition. Everything below
// pos is consumed; messages [pos, redeliverTo) were delivered attempt times.
// There is one per partition and consumer group, millions in a node: its
// 96 bytes are a size class of their own.
type cursor struct {
	group        string
	lastError    string
	metadata     string
	pos          uint64
	redeliverTo  uint64
	updatedMs    int64
	lease        *lease
	headFailures uint32
	attempt      uint32
	// lagCounted is its part of its group's lag in the queue's totals plus
	// one, once counted; 0 until then (totals.go).
	lagCounted uint64
}

// partitionCount is how many partitions of q this group holds (each is
// named in partNames until it is removed).
func (q *queueState) partitionCount() int { return q.partNames.len() }

// addPart puts p in q's partitions.
func (q *queueState) addPart(p *partState) {
	q.spanTo(p.index)
	q.keep(p)
	q.pids[p.index] = p.id
	q.partNames.put(p.name, p.index)
	q.noteStored(p)
}

// spanTo makes q's partition tables reach index. Their length is the
// index space this group has held partitions in, which pops read (a pop
// starts at its hint modulo the length): it never shrinks, so load makes
// it reach the partitions removed as idle too, as it was before a restart.
func (q *queueState) spanTo(index uint32) {
	for int(index) >= len(q.pids) {
		q.pids = append(q.pids, 0)
	}
}

// inMemory is this group's partition i of q when it is in memory. A map,
// not a slice by index: it holds the cache's share of millions of indexes.
func (q *queueState) inMemory(i uint32) *partState { return q.parts[i] }

// keep records that p is in memory.
func (q *queueState) keep(p *partState) {
	if q.parts == nil {
		q.parts = map[uint32]*partState{}
	}
	q.parts[p.index] = p
}

// holdsRecords reports whether the log of this group's partition i of q
// holds records now: q.stored is brought up to date when a batch
// finishes, and only a partition in memory changes during one.
func (q *queueState) holdsRecords(i uint32) bool {
	if p := q.inMemory(i); p != nil {
		return p.start < p.next
	}
	return q.stored.has(i)
}

// noteStored keeps q.stored in step with whether p's log holds records.
func (q *queueState) noteStored(p *partState) {
	if p.start < p.next {
		q.stored.set(p.index)
	} else {
		q.stored.clear(p.index)
	}
}

// dirIndex is the index of the partition named name in a home's
// directory; read gets a stored key (dirReader).
func (q *queueState) dirIndex(read dirReader, name string) (uint32, bool) {
	return q.dirNames.get(name, func(i uint32) string {
		d, _ := q.dirEntry(read, i)
		return d.name
	})
}

// dirReader reads a stored key: through the apply batch for the apply
// loop (an entry may have been added by the batch), from the committed
// store for readers.
type dirReader func(key []byte) ([]byte, bool)

// dirEntry reads the directory entry at index i back from the store; ok is
// false for a hole or an entry that does not read.
func (q *queueState) dirEntry(read dirReader, i uint32) (d dirEntry, ok bool) {
	if int(i) >= len(q.dir) || q.dir[i].removed() {
		return dirEntry{}, false
	}
	v, found := read(dirKey(q.id, i))
	if !found {
		return dirEntry{}, false
	}
	d, err := decodeDirEntry(v)
	return d, err == nil
}

func (p *partState) encodeMeta() []byte {
	w := wire.Writer{B: make([]byte, 0, 64+len(p.name))}
	w.Uvarint(p.q.id)
	w.Uvarint(uint64(p.index))
	w.String(p.name)
	w.Varint(p.createdMs)
	w.Uvarint(p.next)
	w.Uvarint(p.start)
	w.Varint(p.lastWriteMs)
	return w.B
}

func decodePartMeta(id uint64, b []byte) (p *partState, qid uint64, err error) {
	return decodePartMetaInto(nil, id, b)
}

// decodePartMetaInto decodes into p, a partition no one refers to any
// more, when it is not nil (load's walk reuses the one it just let go);
// p keeps its cursor list's room, emptied.
func decodePartMetaInto(p *partState, id uint64, b []byte) (_ *partState, qid uint64, err error) {
	r := wire.NewReader(b)
	qid = r.Uvarint()
	if p == nil {
		p = &partState{id: id, heapAt: -1}
	} else {
		*p = partState{id: id, heapAt: -1, cursors: p.cursors[:0]}
	}
	p.index = uint32(r.Uvarint())
	p.name = r.String()
	p.createdMs = r.Varint()
	p.next = r.Uvarint()
	p.start = r.Uvarint()
	p.lastWriteMs = r.Varint()
	return p, qid, r.Done()
}

func (q *queueState) encodeMeta() []byte {
	w := wire.Writer{B: make([]byte, 0, 128+len(q.name))}
	w.Fixed(q.tenant[:])
	w.String(q.name)
	w.String(q.namespace)
	w.String(q.task)
	w.Varint(q.createdMs)
	w.Bool(q.kafka)
	q.cfg.Encode(&w)
	w.Uvarint(q.inc)
	w.Uvarint(q.cfgVer)
	q.place.Encode(&w)
	w.Bool(q.home)
	return w.B
}

func decodeQueueMeta(id uint64, b []byte) (*queueState, error) {
	r := wire.NewReader(b)
	q := &queueState{id: id, subs: map[string]*subscription{}}
	copy(q.tenant[:], r.Fixed(16))
	q.name = r.String()
	q.namespace = r.String()
	q.task = r.String()
	q.createdMs = r.Varint()
	q.kafka = r.Bool()
	q.cfg.Decode(r)
	q.inc = r.Uvarint()
	q.cfgVer = r.Uvarint()
	q.place.Decode(r)
	q.home = r.Bool()
	return q, r.Done()
}

func (s *subscription) encode() []byte {
	w := wire.Writer{}
	w.U8(s.mode)
	w.Varint(s.fromMs)
	w.Varint(s.createdMs)
	return w.B
}

func decodeSub(group string, b []byte) (*subscription, error) {
	r := wire.NewReader(b)
	s := &subscription{group: group, mode: r.U8(), fromMs: r.Varint(), createdMs: r.Varint()}
	return s, r.Done()
}

func (c *cursor) encode() []byte {
	w := wire.Writer{B: make([]byte, 0, 64)}
	w.Uvarint(c.pos)
	w.Uvarint(uint64(c.headFailures))
	w.String(c.lastError)
	w.Uvarint(uint64(c.attempt))
	w.Uvarint(c.redeliverTo)
	w.String(c.metadata)
	w.Varint(c.updatedMs)
	l := c.lease
	w.Bool(l != nil)
	if l != nil {
		w.Fixed(l.id[:])
		w.Uvarint(l.from)
		w.Uvarint(l.to)
		w.Varint(l.expiresMs)
		w.Bytes(l.states)
		w.Uvarint(uint64(len(l.errors)))
		// Sorted so the encoding is deterministic across replicas.
		for _, off := range sortedOffsets(l.errors) {
			w.Uvarint(off)
			w.String(l.errors[off])
		}
	}
	return w.B
}

func decodeCursor(group string, b []byte) (*cursor, error) {
	return decodeCursorInto(nil, group, b)
}

// decodeCursorInto decodes into c when it is not nil: a cursor no one
// refers to any more (load's walk reuses those it just let go).
func decodeCursorInto(c *cursor, group string, b []byte) (*cursor, error) {
	r := wire.NewReader(b)
	if c == nil {
		c = &cursor{group: group}
	} else {
		*c = cursor{group: group}
	}
	c.pos = r.Uvarint()
	c.headFailures = uint32(r.Uvarint())
	c.lastError = r.String()
	c.attempt = uint32(r.Uvarint())
	c.redeliverTo = r.Uvarint()
	c.metadata = r.String()
	c.updatedMs = r.Varint()
	if r.Bool() {
		l := &lease{}
		copy(l.id[:], r.Fixed(16))
		l.from = r.Uvarint()
		l.to = r.Uvarint()
		l.expiresMs = r.Varint()
		l.states = append([]uint8(nil), r.Bytes()...)
		for _, st := range l.states {
			if st == msgPending {
				l.pending++
			}
		}
		n := r.Count(len(l.states), 2)
		for i := 0; i < n; i++ {
			if l.errors == nil {
				l.errors = map[uint64]string{}
			}
			off := r.Uvarint()
			l.errors[off] = r.String()
		}
		c.lease = l
	}
	return c, r.Done()
}

func sortedOffsets(m map[uint64]string) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// cursorList is a partition's consumer-group cursors. Nearly every
// partition has one or two, so a slice looked through is smaller than a
// map (about 250 bytes for one cursor) and as fast, and iterates in a
// fixed order.
type cursorList []*cursor

// get returns the group's cursor, or nil.
func (l cursorList) get(group string) *cursor {
	for _, c := range l {
		if c.group == group {
			return c
		}
	}
	return nil
}

// put adds c, replacing the cursor of its group if there is one.
func (l *cursorList) put(c *cursor) {
	for i, old := range *l {
		if old.group == c.group {
			(*l)[i] = c
			return
		}
	}
	*l = append(*l, c)
}

// remove drops the group's cursor, if any.
func (l *cursorList) remove(group string) {
	for i, c := range *l {
		if c.group == group {
			last := len(*l) - 1
			(*l)[i] = (*l)[last]
			(*l)[last] = nil
			*l = (*l)[:last]
			return
		}
	}
}
