package storage

import (
	"cmp"
	"encoding/binary"
	"slices"
	"sort"

	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/wire"
)

// Kafka transactions in a partition's log, as Kafka keeps them: a
// transactional batch is appended when it is produced, with its real
// offsets, and the transaction's end appends a control batch (a COMMIT or
// ABORT marker) to every partition it wrote. Until then the partition's
// last stable offset stays at the transaction's first offset: read_committed
// fetches and HTTP pops stop there. An abort leaves its batches in the log,
// where read_uncommitted fetches see them, and records them as aborted:
// read_committed fetches get the list, and no pop ever hands them (or a
// marker) to an HTTP consumer, whose cursor steps over them.

// partTxns is one partition's transaction bookkeeping, kept only for
// partitions a transaction wrote to. Its open transactions are written as
// one value; each skipped range and aborted transaction as a key of its
// own, so ending a transaction writes a few keys however many came before.
type partTxns struct {
	open []openTxn
	// skips are offset ranges no pop delivers (aborted batches and control
	// markers), sorted and disjoint (neighbours are not joined: each is
	// one batch or marker, its own key).
	skips []wire.OffsetRange
	// aborted lists the aborted transactions whose markers are still in
	// the log, by marker offset.
	aborted []AbortedTxn
}

// openTxn is one open transaction's batches in the partition: the offset
// ranges they hold. It is the transaction's (xid), not the producer's: a
// fenced transaction's end, however late, ends its own batches and never
// those of the next epoch's transaction (Kafka scopes them by producer id
// and epoch; the xid names one transaction of an epoch too). Entries
// stored by builds before xids were kept have a zero xid and are ended by
// producer, as those builds did.
type openTxn struct {
	xid      wire.ID
	producer int64
	epoch    int16
	batches  []wire.OffsetRange
}

// owns reports whether o belongs to transaction xid of producer.
func (o *openTxn) owns(xid wire.ID, producer int64) bool {
	if o.xid.IsZero() {
		return o.producer == producer
	}
	return o.xid == xid
}

// AbortedTxn is an aborted transaction of one producer in a partition: its
// first offset there, and the offset of its ABORT marker.
type AbortedTxn struct {
	ProducerID  int64
	First, Last uint64
}

func partOpenTxnsKey(pid uint64) []byte { return kafkaKey(kafkaPartTxns, u64Bytes(pid)) }

func partSkipKey(pid, from uint64) []byte {
	return kafkaKey(kafkaPartSkip, u64Bytes(pid), u64Bytes(from))
}

func partAbortedKey(pid, last uint64) []byte {
	return kafkaKey(kafkaPartAborted, u64Bytes(pid), u64Bytes(last))
}

// openTxnsWithXIDs starts the stored form that names each transaction's
// xid. The form before it starts with the (never zero) count.
const openTxnsWithXIDs = 0

func encodeOpenTxns(open []openTxn) []byte {
	withXIDs := slices.ContainsFunc(open, func(o openTxn) bool { return !o.xid.IsZero() })
	w := wire.Writer{}
	if withXIDs {
		w.Uvarint(openTxnsWithXIDs)
	}
	w.Uvarint(uint64(len(open)))
	for _, o := range open {
		if withXIDs {
			w.Fixed(o.xid[:])
		}
		w.Varint(o.producer)
		w.Varint(int64(o.epoch))
		w.Uvarint(uint64(len(o.batches)))
		for _, r := range o.batches {
			w.Uvarint(r.From)
			w.Uvarint(r.To)
		}
	}
	return w.B
}

func decodeOpenTxns(b []byte) ([]openTxn, error) {
	r := wire.NewReader(b)
	withXIDs := len(b) > 0 && b[0] == openTxnsWithXIDs
	if withXIDs {
		r.Uvarint()
	}
	var open []openTxn
	for range r.Count(1<<20, 3) {
		var o openTxn
		if withXIDs {
			copy(o.xid[:], r.Fixed(16))
		}
		o.producer, o.epoch = r.Varint(), int16(r.Varint())
		for range r.Count(1<<24, 2) {
			o.batches = append(o.batches, wire.OffsetRange{From: r.Uvarint(), To: r.Uvarint()})
		}
		open = append(open, o)
	}
	return open, r.Done()
}

func encodeAborted(a AbortedTxn) []byte {
	w := wire.Writer{}
	w.Varint(a.ProducerID)
	w.Uvarint(a.First)
	return w.B
}

// loadPartTxn adds one stored key of a partition's bookkeeping (kind, the
// key after the partition id, the value).
func (k *kafkaState) loadPartTxn(kind byte, pid uint64, rest, v []byte) error {
	t := k.partTxns[pid]
	if t == nil {
		t = &partTxns{}
		k.partTxns[pid] = t
	}
	switch kind {
	case kafkaPartTxns:
		open, err := decodeOpenTxns(v)
		t.open = open
		return err
	case kafkaPartSkip:
		r := wire.NewReader(v)
		t.skips = append(t.skips, wire.OffsetRange{From: binary.BigEndian.Uint64(rest), To: r.Uvarint()})
		return r.Done()
	case kafkaPartAborted:
		r := wire.NewReader(v)
		t.aborted = append(t.aborted, AbortedTxn{ProducerID: r.Varint(), First: r.Uvarint(), Last: binary.BigEndian.Uint64(rest)})
		return r.Done()
	}
	return nil
}

// firstOpen is the first offset of the partition's open transactions, and
// whether there is one.
func (t *partTxns) firstOpen() (uint64, bool) {
	if t == nil || len(t.open) == 0 {
		return 0, false
	}
	first := t.open[0].batches[0].From
	for _, o := range t.open[1:] {
		first = min(first, o.batches[0].From)
	}
	return first, true
}

// skipAt is the index of the first of skips that ends after off: the one
// holding off, if any does (skips are sorted and disjoint).
func skipAt(skips []wire.OffsetRange, off uint64) int {
	return sort.Search(len(skips), func(i int) bool { return skips[i].To > off })
}

// pastSkips is the first offset at or after off that is not skipped, and
// where the next skipped range after it starts (none: ^0).
func (t *partTxns) pastSkips(off uint64) (uint64, uint64) {
	if t == nil {
		return off, ^uint64(0)
	}
	i := skipAt(t.skips, off)
	for i < len(t.skips) && t.skips[i].From <= off {
		off = t.skips[i].To // neighbours are not joined: step over each
		i++
	}
	if i < len(t.skips) {
		return off, t.skips[i].From
	}
	return off, ^uint64(0)
}

// skip adds [from, to) to partition pid's skipped ranges.
func (t *partTxns) skip(ctx *applyCtx, pid, from, to uint64) {
	i, _ := slices.BinarySearchFunc(t.skips, from, func(r wire.OffsetRange, from uint64) int { return cmp.Compare(r.From, from) })
	t.skips = slices.Insert(t.skips, i, wire.OffsetRange{From: from, To: to})
	ctx.set(partSkipKey(pid, from), binary.AppendUvarint(nil, to))
}

// trim forgets what lies wholly below partition pid's log start.
func (t *partTxns) trim(ctx *applyCtx, pid, start uint64) {
	n := 0
	for n < len(t.skips) && t.skips[n].To <= start {
		ctx.del(partSkipKey(pid, t.skips[n].From))
		n++
	}
	t.skips = t.skips[n:]
	n = 0
	for n < len(t.aborted) && t.aborted[n].Last < start {
		ctx.del(partAbortedKey(pid, t.aborted[n].Last))
		n++
	}
	t.aborted = t.aborted[n:]
}

func (t *partTxns) empty() bool { return len(t.open) == 0 && len(t.skips) == 0 && len(t.aborted) == 0 }

// popWindow is where a pop from pos may claim in a partition whose head is
// next: from the first offset at or after pos that is not skipped, to the
// next skipped range, the first open transaction or the head, whichever
// comes first (at >= end: nothing now).
func (t *partTxns) popWindow(pos, next uint64) (at, end uint64) {
	at, nextSkip := t.pastSkips(pos)
	end = min(next, nextSkip)
	if first, ok := t.firstOpen(); ok {
		end = min(end, first)
	}
	return at, end
}

// txnsOf is partition pid's bookkeeping, nil when it has none.
func (k *kafkaState) txnsOf(pid uint64) *partTxns {
	if len(k.partTxns) == 0 {
		return nil
	}
	return k.partTxns[pid]
}

// saveOpenTxns writes a partition's open transactions through, and
// forgets its bookkeeping once empty.
func (s *Store) saveOpenTxns(ctx *applyCtx, pid uint64, t *partTxns) {
	if len(t.open) == 0 {
		ctx.del(partOpenTxnsKey(pid))
	} else {
		ctx.set(partOpenTxnsKey(pid), encodeOpenTxns(t.open))
	}
	if t.empty() {
		delete(s.kafka.partTxns, pid)
	} else {
		s.kafka.partTxns[pid] = t
	}
	s.noteTxns()
}

// noteTxns tells readers whether any partition has transaction
// bookkeeping, so a fetch of a topic without transactions takes no lock
// for it. It is set before the apply batch that needs it publishes its
// high-water marks: a reader holding a mark that covers a transaction's
// records sees it set.
func (s *Store) noteTxns() { s.hasTxns.Store(len(s.kafka.partTxns) > 0) }

// openTxnBatch records a batch of transaction xid (of producer at epoch)
// appended to p at [from, to).
func (s *Store) openTxnBatch(ctx *applyCtx, p *partState, xid wire.ID, producer int64, epoch int16, from, to uint64) {
	if !s.at(wire.FormatV2) {
		xid = wire.ID{} // by producer, as builds before FormatV2 keep them
	}
	t := s.kafka.txnsOf(p.id)
	if t == nil {
		t = &partTxns{}
	}
	i := slices.IndexFunc(t.open, func(o openTxn) bool { return o.xid == xid })
	if i < 0 {
		t.open = append(t.open, openTxn{xid: xid, producer: producer, epoch: epoch})
		i = len(t.open) - 1
	}
	t.open[i].batches = append(t.open[i].batches, wire.OffsetRange{From: from, To: to})
	s.saveOpenTxns(ctx, p.id, t)
}

// endTxnIn ends transaction xid (of producer) in p, if it is open there: a
// COMMIT or ABORT marker appended (marker is its message id, which no
// consumer ever sees), the marker skipped and, for an abort, the
// transaction's batches too, and the transaction listed as aborted.
func (s *Store) endTxnIn(ctx *applyCtx, p *partState, xid wire.ID, producer int64, commit bool, marker wire.ID) {
	t := s.kafka.txnsOf(p.id)
	if t == nil {
		return
	}
	// A transaction that began before its group's raise to FormatV2 has
	// its earlier batches under a zero xid (kept by producer) and its later
	// ones under its xid: the end takes both, with one marker.
	var o openTxn
	kept := t.open[:0]
	for _, e := range t.open {
		if !e.owns(xid, producer) {
			kept = append(kept, e)
			continue
		}
		if len(o.batches) == 0 || e.xid == xid {
			o.epoch = e.epoch
		}
		o.batches = append(o.batches, e.batches...)
	}
	if len(o.batches) == 0 {
		return
	}
	t.open = kept
	slices.SortFunc(o.batches, func(a, b wire.OffsetRange) int { return cmp.Compare(a.From, b.From) })
	at := p.next
	typ := records.ControlCommit
	if !commit {
		typ = records.ControlAbort
		for _, b := range o.batches {
			t.skip(ctx, p.id, b.From, b.To)
		}
		a := AbortedTxn{ProducerID: producer, First: o.batches[0].From, Last: at}
		t.aborted = append(t.aborted, a)
		ctx.set(partAbortedKey(p.id, at), encodeAborted(a))
	}
	t.skip(ctx, p.id, at, at+1)
	t.trim(ctx, p.id, p.start)
	batch := records.AppendControlBatch(nil, records.ControlMarker{BaseOffset: 0, PartitionLeaderEpoch: -1,
		ProducerID: producer, ProducerEpoch: o.epoch, Type: typ, Timestamp: ctx.nowMs})
	stored := wire.AppendKafkaBatch(nil, marker, len(batch)-records.HeaderSize, batch)
	s.storeChunk(ctx, p.id, at, chunkMeta{appendMs: ctx.nowMs, count: 1, kafkaBatch: true}, stored)
	s.saveOpenTxns(ctx, p.id, t)
	s.extend(ctx, p.q, p, 1)
}

// markerID is the message id of the marker transaction xid writes to
// partition pid: derived from both, so every replica writes the same.
func markerID(xid wire.ID, pid uint64) wire.ID {
	id := xid
	binary.BigEndian.PutUint64(id[8:], binary.BigEndian.Uint64(id[8:])^pid)
	return id
}

// TxnView is what a reader of a partition needs of its transactions: the
// last stable offset, and the aborted transactions and skipped ranges that
// overlap [from, to).
type TxnView struct {
	LastStable uint64
	Aborted    []AbortedTxn
	Skips      []wire.OffsetRange
}

// Skipped reports whether off lies in one of the view's skipped ranges.
func (v *TxnView) Skipped(off uint64) bool {
	i := skipAt(v.Skips, off)
	return i < len(v.Skips) && v.Skips[i].From <= off
}

// LastStable is p's last stable offset for a reader holding high-water
// mark hwm: the first offset of a transaction still open, else hwm.
func (s *Store) LastStable(p Partition, hwm uint64) uint64 {
	if !s.hasTxns.Load() {
		return hwm
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return lastStable(s.kafka.txnsOf(p.ID), hwm)
}

func lastStable(t *partTxns, hwm uint64) uint64 {
	if first, ok := t.firstOpen(); ok && first < hwm {
		return first
	}
	return hwm
}

// Txns is p's transaction view for a read of [from, hwm), hwm being the
// high-water mark the reader holds: what a read_committed reader needs.
func (s *Store) Txns(p Partition, from, hwm uint64) TxnView {
	if !s.hasTxns.Load() {
		return TxnView{LastStable: hwm}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.kafka.txnsOf(p.ID)
	v := TxnView{LastStable: lastStable(t, hwm)}
	if t == nil {
		return v
	}
	// Aborted transactions are in marker order: those whose marker is at
	// or after from, and that began before the last stable offset.
	i := sort.Search(len(t.aborted), func(i int) bool { return t.aborted[i].Last >= from })
	for _, a := range t.aborted[i:] {
		if a.First < v.LastStable {
			v.Aborted = append(v.Aborted, a)
		}
	}
	for _, r := range t.skips[skipAt(t.skips, from):] {
		if r.From >= v.LastStable {
			break
		}
		v.Skips = append(v.Skips, r)
	}
	return v
}
