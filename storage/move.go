package storage

import (
	"container/heap"
	"encoding/binary"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// Moving a partition to another raft group (docs/placement.md, "Moving a
// partition"). Three groups take part, each through its own log:
//
//   - the queue's home keeps the move's record (KindMoveRecord) and, at
//     the switch, points the directory entry at the target;
//   - the target receives the source's log and state into a hidden
//     incoming partition (KindMoveCopy): a new id of its own, kept under
//     tagMove, never in the queue's tables, so nothing reads or writes it
//     until KindMoveFinish makes it the group's partition at the index;
//   - the source seals the partition (KindMoveSeal): it leaves the queue's
//     tables (writes find no partition, and answer CodePartitionMoved), its
//     leases are closed as if they expired, and its stored keys stay,
//     frozen, for the copy; KindMoveDrop deletes them after the switch.
//     The index stays marked moved, so a stale directory never makes the
//     partition again here.
//
// Every step is idempotent, so the mover (raftgroups/move.go) repeats
// whatever a leader change or a crash interrupted. Every kind exists from
// FormatV9: below it each is refused without effect.

// Sub-kinds of tagMove keys.
const (
	moveRecord   = 'r' // qid, index → wire.MoveInfo (home)
	moveIncoming = 'i' // qid, index → incoming partition (target)
	moveOut      = 'o' // qid, index → a sealed or moved-out partition (source)
)

func moveKey(kind byte, qid uint64, index uint32) []byte {
	b := appendU64([]byte{tagMove, kind}, qid)
	return binary.BigEndian.AppendUint32(b, index)
}

func movePrefix(kind byte, qid uint64) []byte { return appendU64([]byte{tagMove, kind}, qid) }

// moveRef names a partition by queue and index.
type moveRef struct {
	qid   uint64
	index uint32
}

// movedPart is a partition this group sealed for a move (sealed) or gave
// away (its keys dropped).
type movedPart struct {
	pid    uint64
	name   string
	sealed bool
}

func (m *movedPart) encode() []byte {
	w := wire.Writer{}
	w.Uvarint(m.pid)
	w.String(m.name)
	w.Bool(m.sealed)
	return w.B
}

func decodeMovedPart(b []byte) (*movedPart, error) {
	r := wire.NewReader(b)
	m := &movedPart{pid: r.Uvarint(), name: r.String(), sealed: r.Bool()}
	return m, r.Done()
}

// incoming is a target's partition being copied in.
type incoming struct {
	pid         uint64
	start, next uint64
	name        string
	createdMs   int64
}

func (in *incoming) encode() []byte {
	w := wire.Writer{}
	w.Uvarint(in.pid)
	w.Uvarint(in.start)
	w.Uvarint(in.next)
	w.String(in.name)
	w.Varint(in.createdMs)
	return w.B
}

func decodeIncoming(b []byte) (incoming, error) {
	r := wire.NewReader(b)
	in := incoming{pid: r.Uvarint(), start: r.Uvarint(), next: r.Uvarint(), name: r.String(), createdMs: r.Varint()}
	return in, r.Done()
}

// loadMoves reads the partitions this group sealed or gave away.
func (s *Store) loadMoves() error {
	s.moved = map[moveRef]*movedPart{}
	s.movedPIDs = map[uint64]bool{}
	prefix := []byte{tagMove, moveOut}
	return s.scan(prefix, func(k, v []byte) error {
		if len(k) != 14 {
			return nil
		}
		m, err := decodeMovedPart(v)
		if err != nil {
			return err
		}
		s.noteMoved(moveRef{binary.BigEndian.Uint64(k[2:10]), binary.BigEndian.Uint32(k[10:])}, m)
		return nil
	})
}

// sealedPID reports whether pid is a partition sealed for a move: kept,
// but no longer its queue's.
func (s *Store) sealedPID(pid uint64) bool {
	return s.movedPIDs[pid]
}

// noteMoved records (or forgets, m nil) the partition moved out at ref.
func (s *Store) noteMoved(ref moveRef, m *movedPart) {
	if old := s.moved[ref]; old != nil {
		delete(s.movedPIDs, old.pid)
	}
	if m == nil {
		delete(s.moved, ref)
		return
	}
	s.moved[ref] = m
	s.movedPIDs[m.pid] = m.sealed
}

// movedCode is the code of a write naming q's partition by index (when
// index >= 0) or name that this group does not hold: CodePartitionMoved
// when it moved (or is moving) away, else CodePartitionNotFound.
func (s *Store) movedCode(q *queueState, index int64, name string) wire.Code {
	if (index >= 0 && s.movedAt(q, uint32(index))) || (index < 0 && s.movedNamed(q, name)) {
		return wire.CodePartitionMoved
	}
	return wire.CodePartitionNotFound
}

// movedAt reports whether q's partition i left this group (or is leaving).
func (s *Store) movedAt(q *queueState, i uint32) bool {
	_, ok := s.moved[moveRef{q.id, i}]
	return ok
}

// movedNamed reports whether q's partition named name left this group.
func (s *Store) movedNamed(q *queueState, name string) bool {
	for ref, m := range s.moved {
		if ref.qid == q.id && m.name == name {
			return true
		}
	}
	return false
}

// movedPID reports whether pid was a partition of this group that moved.
func (s *Store) movedPID(pid uint64) bool {
	_, ok := s.movedPIDs[pid]
	return ok
}

// moveQueue is the queue a move command names, of its incarnation.
func (s *Store) moveQueue(tenant wire.ID, name string, inc uint64) *queueState {
	q := s.queue(tenant, name)
	if q == nil || (inc != 0 && q.inc != inc) {
		return nil
	}
	return q
}

// applyMoveRecord changes a move's record at the queue's home.
func (s *Store) applyMoveRecord(ctx *applyCtx, c *wire.MoveRecordCmd) wire.MoveRecordResult {
	if !s.at(wire.FormatV9) {
		return wire.MoveRecordResult{Code: wire.CodeBadRequest}
	}
	m := &c.Move
	q := s.moveQueue(m.Tenant, m.Queue, c.Inc)
	if q == nil || !q.home {
		return wire.MoveRecordResult{Code: wire.CodeQueueNotFound}
	}
	key := moveKey(moveRecord, q.id, m.Index)
	var cur wire.MoveInfo
	v, have := ctx.get(key)
	if have {
		var err error
		if cur, err = wire.DecodeMoveInfo(v); err != nil {
			have = false
		}
	}
	active := have && cur.State != wire.MoveDone && cur.State != wire.MoveFailed
	save := func(code wire.Code) wire.MoveRecordResult {
		cur.UpdatedMs = ctx.nowMs
		ctx.set(key, wire.EncodeMoveInfo(&cur))
		ctx.touch(q)
		return wire.MoveRecordResult{Code: code, Move: cur}
	}
	switch c.Op {
	case wire.MoveOpStart:
		if int(m.Index) >= len(q.dir) || q.dir[m.Index].removed() {
			return wire.MoveRecordResult{Code: wire.CodePartitionNotFound}
		}
		if active {
			if cur.To == m.To {
				return wire.MoveRecordResult{Code: wire.CodeOK, Move: cur} // a repeat
			}
			return wire.MoveRecordResult{Code: wire.CodeExists, Move: cur}
		}
		from := q.dir[m.Index].group()
		if from == m.To || int(m.To) >= wire.MaxGroups {
			return wire.MoveRecordResult{Code: wire.CodeBadRequest}
		}
		cur = wire.MoveInfo{Tenant: q.tenant, Queue: q.name, Index: m.Index, From: from, To: m.To,
			State: wire.MoveCopying, StartedMs: ctx.nowMs}
		return save(wire.CodeOK)
	case wire.MoveOpForget:
		if have && !active {
			ctx.del(key)
		}
		return wire.MoveRecordResult{Code: wire.CodeOK, Move: cur}
	}
	if !have {
		return wire.MoveRecordResult{Code: wire.CodeNotFound}
	}
	switch c.Op {
	case wire.MoveOpProgress:
		if !active {
			return wire.MoveRecordResult{Code: wire.CodeConflict, Move: cur}
		}
		// Steps only go forward: a repeat of an older step from a
		// deposed mover changes nothing.
		if m.State == wire.MoveCopying || m.State == wire.MoveSealed {
			cur.State = max(cur.State, m.State)
		}
		cur.Copied = max(cur.Copied, m.Copied)
		cur.End = max(cur.End, m.End)
		return save(wire.CodeOK)
	case wire.MoveOpSwitch:
		switch cur.State {
		case wire.MoveSwitched, wire.MoveDone:
			return wire.MoveRecordResult{Code: wire.CodeOK, Move: cur}
		case wire.MoveSealed:
		default:
			return wire.MoveRecordResult{Code: wire.CodeConflict, Move: cur}
		}
		if int(cur.Index) >= len(q.dir) || q.dir[cur.Index].removed() || q.dir[cur.Index].group() != cur.From {
			return wire.MoveRecordResult{Code: wire.CodePartitionNotFound, Move: cur}
		}
		cur.EpochBase = m.EpochBase
		s.switchDirEntry(ctx, q, cur.Index, cur.To, m.EpochBase)
		cur.State, cur.Copied = wire.MoveSwitched, max(cur.Copied, cur.End)
		return save(wire.CodeOK)
	case wire.MoveOpDone:
		if cur.State == wire.MoveDone {
			return wire.MoveRecordResult{Code: wire.CodeOK, Move: cur}
		}
		if cur.State != wire.MoveSwitched {
			return wire.MoveRecordResult{Code: wire.CodeConflict, Move: cur}
		}
		cur.State = wire.MoveDone
		return save(wire.CodeOK)
	case wire.MoveOpFail:
		if cur.State == wire.MoveFailed {
			return wire.MoveRecordResult{Code: wire.CodeOK, Move: cur}
		}
		if cur.State != wire.MoveCopying && cur.State != wire.MoveSealed {
			return wire.MoveRecordResult{Code: wire.CodeConflict, Move: cur}
		}
		cur.State, cur.Reason = wire.MoveFailed, m.Reason
		return save(wire.CodeOK)
	case wire.MoveOpCancel:
		if cur.State != wire.MoveCopying {
			return wire.MoveRecordResult{Code: wire.CodeConflict, Move: cur}
		}
		cur.Cancel = true
		return save(wire.CodeOK)
	}
	return wire.MoveRecordResult{Code: wire.CodeBadRequest}
}

// switchDirEntry points a home's directory entry at group to, with the
// partition's new Kafka leader epoch base.
func (s *Store) switchDirEntry(ctx *applyCtx, q *queueState, index uint32, to uint16, epochBase uint32) {
	from := q.dir[index].group()
	d, _ := q.dirEntry(ctx.get, index)
	d.group, d.epochBase = to, epochBase
	q.dir[index] = slotOf(to)
	if int(from) < len(q.dirInGroup) && q.dirInGroup[from] > 0 {
		q.dirInGroup[from]--
	}
	q.countInGroup(to)
	q.groups |= 1 << uint(to)
	ctx.set(dirKey(q.id, index), d.encode())
	ctx.set(queueKey(q.id), q.encodeMeta())
	ctx.touch(q)
}

// applyMoveCopy brings a piece of the source's partition into the hidden
// incoming partition (see wire.MoveCopyCmd).
func (s *Store) applyMoveCopy(ctx *applyCtx, c *wire.MoveCopyCmd) wire.MoveCopyResult {
	if !s.at(wire.FormatV9) {
		return wire.MoveCopyResult{Code: wire.CodeBadRequest}
	}
	q := s.moveQueue(c.Tenant, c.Queue, c.Inc)
	if q == nil {
		return wire.MoveCopyResult{Code: wire.CodeQueueNotFound}
	}
	if q.has(c.Index) {
		return wire.MoveCopyResult{Code: wire.CodeExists, PID: q.pids[c.Index]}
	}
	key := moveKey(moveIncoming, q.id, c.Index)
	var in incoming
	if v, ok := ctx.get(key); ok {
		var err error
		if in, err = decodeIncoming(v); err != nil {
			return wire.MoveCopyResult{Code: wire.CodeBadRequest}
		}
	} else {
		start := c.Start
		if len(c.Chunks) > 0 {
			start = c.Chunks[0].Base
		}
		if c.Name == "" {
			return wire.MoveCopyResult{Code: wire.CodeBadRequest}
		}
		in = incoming{pid: wire.GroupID(s.counters.nextPartID, s.cfg.Group), start: start, next: start,
			name: c.Name, createdMs: c.CreatedMs}
		s.counters.nextPartID++
	}
	for i := range c.Chunks {
		ch := &c.Chunks[i]
		if ch.Base < in.next {
			continue // copied already: a repeat
		}
		// A gap is what retention removed in the source between two
		// copies: the finish takes the source's log start past it.
		s.storeChunk(ctx, in.pid, ch.Base, chunkMeta{appendMs: ch.AppendMs, count: int(ch.Count), kafkaBatch: ch.Kept}, ch.Data)
		in.next = ch.Base + uint64(ch.Count)
	}
	for i := range c.Keys {
		k := &c.Keys[i]
		ctx.set(moveStateKey(k.Kind, in.pid, k.Suffix), k.Value)
	}
	ctx.set(key, in.encode())
	return wire.MoveCopyResult{Code: wire.CodeOK, PID: in.pid, Next: in.next}
}

// moveStateKey is where a carried state key goes in partition pid.
func moveStateKey(kind uint8, pid uint64, suffix []byte) []byte {
	var prefix []byte
	switch kind {
	case wire.MoveKeyCursor:
		prefix = cursorPrefix(pid)
	case wire.MoveKeyTxnIndex:
		prefix = txnPrefix(pid)
	case wire.MoveKeyProducer:
		prefix = producerPrefix(pid)
	case wire.MoveKeySkip:
		prefix = kafkaKey(kafkaPartSkip, u64Bytes(pid))
	default:
		prefix = kafkaKey(kafkaPartAborted, u64Bytes(pid))
	}
	return append(prefix, suffix...)
}

// moveStatePrefixes are the prefixes of a partition's state keys a move
// carries, by kind.
func moveStatePrefixes(pid uint64) map[uint8][]byte {
	return map[uint8][]byte{
		wire.MoveKeyCursor:   cursorPrefix(pid),
		wire.MoveKeyTxnIndex: txnPrefix(pid),
		wire.MoveKeyProducer: producerPrefix(pid),
		wire.MoveKeySkip:     kafkaKey(kafkaPartSkip, u64Bytes(pid)),
		wire.MoveKeyAborted:  kafkaKey(kafkaPartAborted, u64Bytes(pid)),
	}
}

// deletePartKeys deletes everything stored under partition pid: its
// chunks and their records, its state keys and its meta.
func deletePartKeys(ctx *applyCtx, pid uint64) {
	deleteChunksOf(ctx, []uint64{pid})
	prefixes := [][]byte{chunkPrefix(pid), partOpenTxnsKey(pid)}
	for _, p := range moveStatePrefixes(pid) {
		prefixes = append(prefixes, p)
	}
	for _, prefix := range prefixes {
		_ = ctx.b.DeleteRange(prefix, prefixEnd(prefix), nil)
	}
	ctx.del(partitionKey(pid))
}

// applyMoveSeal seals a partition for its move, or unseals it (see
// wire.MoveSealCmd).
func (s *Store) applyMoveSeal(ctx *applyCtx, c *wire.MoveSealCmd) wire.MoveSealResult {
	if !s.at(wire.FormatV9) {
		return wire.MoveSealResult{Code: wire.CodeBadRequest}
	}
	q := s.moveQueue(c.Tenant, c.Queue, c.Inc)
	if q == nil {
		return wire.MoveSealResult{Code: wire.CodeQueueNotFound}
	}
	ref := moveRef{q.id, c.Index}
	if c.Unseal {
		return s.unseal(ctx, q, ref)
	}
	if m := s.moved[ref]; m != nil {
		if !m.sealed {
			return wire.MoveSealResult{Code: wire.CodePartitionMoved}
		}
		// A repeat: the partition as it was sealed, read back.
		v, ok := ctx.get(partitionKey(m.pid))
		if !ok {
			return wire.MoveSealResult{Code: wire.CodePartitionMoved}
		}
		p, _, err := decodePartMeta(m.pid, v)
		if err != nil {
			ctx.fail(err)
			return wire.MoveSealResult{Code: wire.CodeBadRequest}
		}
		return wire.MoveSealResult{Code: wire.CodeOK, PID: p.id, Start: p.start, Next: p.next, LastWriteMs: p.lastWriteMs}
	}
	p := s.partAt(ctx, q, c.Index)
	if p == nil {
		return wire.MoveSealResult{Code: wire.CodePartitionNotFound}
	}
	if t := s.kafka.partTxns[p.id]; t != nil && len(t.open) > 0 {
		return wire.MoveSealResult{Code: wire.CodeConflict} // a Kafka transaction is open in it
	}
	if s.partReserved(p.id) {
		return wire.MoveSealResult{Code: wire.CodeConflict} // a prepared transaction pushes to it
	}
	for _, cur := range p.cursors {
		if s.anyPin(p.id, cur.group) {
			return wire.MoveSealResult{Code: wire.CodeConflict}
		}
	}
	// In-flight leases end as if they expired: their messages are
	// delivered again from the target (at least once).
	for _, cur := range p.cursors {
		if cur.lease != nil {
			s.closeLease(ctx, q, p, cur)
		}
	}
	for _, cur := range p.cursors {
		ctx.set(cursorKey(p.id, cur.group), cur.encode())
	}
	ctx.set(partitionKey(p.id), p.encodeMeta())
	s.detachPart(q, p)
	m := &movedPart{pid: p.id, name: p.name, sealed: true}
	s.noteMoved(ref, m)
	ctx.set(moveKey(moveOut, q.id, c.Index), m.encode())
	ctx.touch(q)
	return wire.MoveSealResult{Code: wire.CodeOK, PID: p.id, Start: p.start, Next: p.next, LastWriteMs: p.lastWriteMs}
}

// detachPart takes p out of its queue's tables and totals, leaving its
// stored keys: a move's seal, and removePartition before it deletes them.
// Every in-memory table a partition is in is left here, in one place.
func (s *Store) detachPart(q *queueState, p *partState) {
	q.appended -= p.nextCounted
	q.totals.sub(p.counted.counts())
	p.counted, p.nextCounted = packedCounts{}, 0
	if p.heapAt >= 0 {
		heap.Remove(&q.leases, int(p.heapAt))
	}
	for _, c := range p.cursors {
		q.dropLag(c)
	}
	for _, sub := range q.subs {
		sub.ready.clear(p.index)
	}
	delete(q.parts, p.index)
	q.pids[p.index] = 0
	q.stored.clear(p.index)
	q.partNames.del(p.name, p.index)
	delete(s.parts, p.id)
	p.deleted.Store(true)
}

// unseal gives a sealed partition back to its queue: the move failed or
// was cancelled before the switch.
func (s *Store) unseal(ctx *applyCtx, q *queueState, ref moveRef) wire.MoveSealResult {
	m := s.moved[ref]
	if m == nil {
		if p := s.partAt(ctx, q, ref.index); p != nil {
			return wire.MoveSealResult{Code: wire.CodeOK, PID: p.id, Start: p.start, Next: p.next, LastWriteMs: p.lastWriteMs}
		}
		return wire.MoveSealResult{Code: wire.CodePartitionNotFound}
	}
	if !m.sealed {
		return wire.MoveSealResult{Code: wire.CodePartitionMoved} // dropped: the move went through
	}
	q.spanTo(ref.index)
	q.pids[ref.index] = m.pid
	p, err := s.readPart(ctx.partsBack(), m.pid)
	if err != nil {
		q.pids[ref.index] = 0
		ctx.fail(err)
		return wire.MoveSealResult{Code: wire.CodeBadRequest}
	}
	s.attachPart(ctx, q, p)
	s.noteMoved(ref, nil)
	ctx.del(moveKey(moveOut, q.id, ref.index))
	ctx.touch(q)
	return wire.MoveSealResult{Code: wire.CodeOK, PID: p.id, Start: p.start, Next: p.next, LastWriteMs: p.lastWriteMs}
}

// attachPart makes p, read from the store with its cursors, q's partition
// at its index: counted in the totals at the batch's end (p.counted is
// zero), ready for the groups it may hold messages for.
func (s *Store) attachPart(ctx *applyCtx, q *queueState, p *partState) {
	p.q = q
	s.tablePart(q, p)
	s.cache.add(p)
	ctx.markDirty(p)
}

// applyMoveFinish makes the incoming partition the group's partition at
// its index (see wire.MoveFinishCmd).
func (s *Store) applyMoveFinish(ctx *applyCtx, c *wire.MoveFinishCmd) wire.CodeResult {
	if !s.at(wire.FormatV9) {
		return wire.CodeResult{Code: wire.CodeBadRequest}
	}
	q := s.moveQueue(c.Tenant, c.Queue, c.Inc)
	if q == nil {
		return wire.CodeResult{Code: wire.CodeQueueNotFound}
	}
	key := moveKey(moveIncoming, q.id, c.Index)
	v, ok := ctx.get(key)
	if !ok {
		if q.has(c.Index) {
			return wire.CodeResult{Code: wire.CodeOK} // a repeat
		}
		return wire.CodeResult{Code: wire.CodeNotFound}
	}
	in, err := decodeIncoming(v)
	if err != nil || q.has(c.Index) {
		return wire.CodeResult{Code: wire.CodeConflict}
	}
	if in.next < c.Next || c.Start > c.Next {
		return wire.CodeResult{Code: wire.CodeConflict} // the tail is not copied yet
	}
	ref := moveRef{q.id, c.Index}
	if m := s.moved[ref]; m != nil {
		if m.sealed {
			return wire.CodeResult{Code: wire.CodeConflict}
		}
		// The partition moved away from here once and now comes back.
		s.noteMoved(ref, nil)
		ctx.del(moveKey(moveOut, q.id, c.Index))
	}
	p := &partState{id: in.pid, q: q, index: c.Index, name: in.name, createdMs: in.createdMs,
		next: c.Next, start: max(c.Start, in.start), lastWriteMs: c.LastWriteMs, heapAt: -1}
	if p.start > p.next {
		p.start = p.next
	}
	// Its cursors, producers and Kafka transaction ranges arrived as keys.
	it := ctx.b.NewIter(&pebble.IterOptions{LowerBound: cursorPrefix(p.id), UpperBound: prefixEnd(cursorPrefix(p.id))})
	for it.First(); it.Valid(); it.Next() {
		cur, err := decodeCursor(q.groupNameOf(it.Key()[9:]), it.Value())
		if err != nil {
			ctx.closeIter(it)
			ctx.fail(err)
			return wire.CodeResult{Code: wire.CodeBadRequest}
		}
		cur.lease = nil // closed at the seal
		p.cursors.put(cur)
	}
	ctx.closeIter(it)
	it = ctx.b.NewIter(&pebble.IterOptions{LowerBound: producerPrefix(p.id), UpperBound: prefixEnd(producerPrefix(p.id))})
	for it.First(); it.Valid(); it.Next() {
		st, err := decodeProducer(it.Value())
		if err == nil && len(it.Key()) == 2+16 {
			s.kafka.putProducer(p.id, int64(binary.BigEndian.Uint64(it.Key()[10:])), st)
		}
	}
	ctx.closeIter(it)
	for _, kind := range []byte{kafkaPartSkip, kafkaPartAborted} {
		prefix := kafkaKey(kind, u64Bytes(p.id))
		it = ctx.b.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
		for it.First(); it.Valid(); it.Next() {
			if err := s.kafka.loadPartTxn(kind, p.id, it.Key()[10:], it.Value()); err != nil {
				ctx.fail(err)
			}
		}
		ctx.closeIter(it)
	}
	s.noteTxns()
	p.hwm.Store(p.next)
	p.logStart.Store(p.start)
	p.lastWrite.Store(p.lastWriteMs)
	s.attachPart(ctx, q, p)
	for _, cur := range p.cursors {
		ctx.saveCursor(p, cur)
	}
	ctx.del(key)
	ctx.touch(q)
	return wire.CodeResult{Code: wire.CodeOK}
}

// applyMoveDrop drops what a move left in this group (see
// wire.MoveDropCmd).
func (s *Store) applyMoveDrop(ctx *applyCtx, c *wire.MoveDropCmd) wire.CodeResult {
	if !s.at(wire.FormatV9) {
		return wire.CodeResult{Code: wire.CodeBadRequest}
	}
	q := s.queue(c.Tenant, c.Queue)
	if q == nil {
		return wire.CodeResult{Code: wire.CodeOK} // the queue went, and its keys with it
	}
	if c.Incoming {
		key := moveKey(moveIncoming, q.id, c.Index)
		v, ok := ctx.get(key)
		if !ok {
			return wire.CodeResult{Code: wire.CodeOK}
		}
		if in, err := decodeIncoming(v); err == nil {
			deletePartKeys(ctx, in.pid)
		}
		ctx.del(key)
		return wire.CodeResult{Code: wire.CodeOK}
	}
	ref := moveRef{q.id, c.Index}
	m := s.moved[ref]
	if m == nil || !m.sealed {
		return wire.CodeResult{Code: wire.CodeOK}
	}
	s.forgetPartKafka(m.pid)
	deletePartKeys(ctx, m.pid)
	s.noteMoved(ref, &movedPart{pid: m.pid, name: m.name})
	ctx.set(moveKey(moveOut, q.id, c.Index), s.moved[ref].encode())
	return wire.CodeResult{Code: wire.CodeOK}
}

// forgetPartKafka drops the in-memory Kafka state of partition pid.
func (s *Store) forgetPartKafka(pid uint64) {
	delete(s.kafka.producers, pid)
	if _, ok := s.kafka.partTxns[pid]; ok {
		delete(s.kafka.partTxns, pid)
		s.noteTxns()
	}
}

// forgetMoves deletes the move keys of a queue being deleted, and the
// partitions its moves hold apart from its tables.
func (s *Store) forgetMoves(ctx *applyCtx, q *queueState) {
	for ref, m := range s.moved {
		if ref.qid != q.id {
			continue
		}
		if m.sealed {
			s.forgetPartKafka(m.pid)
			deletePartKeys(ctx, m.pid)
		}
		s.noteMoved(ref, nil)
	}
	it := ctx.b.NewIter(&pebble.IterOptions{LowerBound: movePrefix(moveIncoming, q.id), UpperBound: prefixEnd(movePrefix(moveIncoming, q.id))})
	var pids []uint64
	for it.First(); it.Valid(); it.Next() {
		if in, err := decodeIncoming(it.Value()); err == nil {
			pids = append(pids, in.pid)
		}
	}
	ctx.closeIter(it)
	for _, pid := range pids {
		deletePartKeys(ctx, pid)
	}
	for _, kind := range []byte{moveRecord, moveIncoming, moveOut} {
		prefix := movePrefix(kind, q.id)
		_ = ctx.b.DeleteRange(prefix, prefixEnd(prefix), nil)
	}
}
