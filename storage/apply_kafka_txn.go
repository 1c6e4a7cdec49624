package storage

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// allocProducerID takes the next producer id of this group.
func (s *Store) allocProducerID(ctx *applyCtx) int64 {
	id := int64(wire.GroupID(uint64(s.kafka.nextProducerID), s.cfg.Group))
	s.kafka.nextProducerID++
	w := wire.Writer{}
	w.Varint(s.kafka.nextProducerID)
	ctx.set(kafkaCountersKey, w.B)
	return id
}

// applyInitProducer answers InitProducerId. An idempotent producer gets a
// fresh id every time. A transactional id keeps its producer id and gets the
// next epoch, which fences the previous holder and aborts its open
// transaction; a new id when the epoch would overflow.
func (s *Store) applyInitProducer(ctx *applyCtx, c *wire.InitProducerCmd) wire.InitProducerResult {
	if !c.Transactional {
		return wire.InitProducerResult{ProducerID: s.allocProducerID(ctx)}
	}
	if c.TxnID == "" {
		return wire.InitProducerResult{Code: wire.CodeBadRequest}
	}
	k := txnKeyT{c.Tenant, c.TxnID}
	t := s.kafka.txns[k]
	switch {
	case t != nil && !c.ReqID.IsZero() && t.lastInitReq == c.ReqID:
		return wire.InitProducerResult{ProducerID: t.producerID, Epoch: t.epoch} // a retried proposal
	case t == nil:
		t = &txnState{producerID: s.allocProducerID(ctx)}
		s.kafka.txns[k] = t
	default:
		if t.ongoing {
			// Aborted: the engine resolves its parts as aborted, and the
			// id begins nothing new until they are.
			t.end(c.Tenant, c.TxnID, false, ctx.nowMs, s.at(wire.FormatV2))
		}
		t.bumpEpoch(s, ctx)
		// Kafka's coordinator is Empty after an InitProducerId, whatever
		// the last transaction did; a build before FormatV8 cannot store it.
		t.reinit = t.txnSeq > 0 && s.at(wire.FormatV8)
	}
	t.timeoutMs, t.lastInitReq = c.TimeoutMs, c.ReqID
	ctx.set(txnStateKey(c.Tenant, c.TxnID), t.encode())
	return wire.InitProducerResult{ProducerID: t.producerID, Epoch: t.epoch}
}

func (t *txnState) bumpEpoch(s *Store, ctx *applyCtx) {
	if t.epoch >= math.MaxInt16-1 {
		t.producerID, t.epoch = s.allocProducerID(ctx), 0
		return
	}
	t.epoch++
}

// txnFor finds a transactional id's state and checks the producer id and
// epoch a request names.
func (s *Store) txnFor(tenant wire.ID, txnID string, producer int64, epoch int16) (*txnState, wire.Code) {
	t := s.kafka.txns[txnKeyT{tenant, txnID}]
	switch {
	case t == nil || t.producerID != producer:
		return nil, wire.CodeNotFound
	case epoch != t.epoch:
		return t, wire.CodeFenced
	}
	return t, wire.CodeOK
}

// applyTxnBegin opens a transaction (or, open, adds the groups it stages
// in): its records and offsets are staged in their partitions' groups, and
// EndTxn resolves each group recorded here.
func (s *Store) applyTxnBegin(ctx *applyCtx, c *wire.TxnBeginCmd) wire.KafkaTxnResult {
	t, code := s.txnFor(c.Tenant, c.TxnID, c.ProducerID, c.Epoch)
	if code != wire.CodeOK {
		return wire.KafkaTxnResult{Code: code}
	}
	switch {
	case !t.ongoing && !t.unsettled.IsZero():
		return wire.KafkaTxnResult{Code: wire.CodeTxnUnsettled, TxnSeq: t.txnSeq, Epoch: t.epoch}
	case !t.ongoing:
		t.ongoing, t.beganMs, t.groups, t.reinit = true, ctx.nowMs, c.Groups, false
		t.txnSeq++
	case t.groups|c.Groups != t.groups:
		t.groups |= c.Groups
	default:
		return wire.KafkaTxnResult{TxnSeq: t.txnSeq, Epoch: t.epoch}
	}
	ctx.set(txnStateKey(c.Tenant, c.TxnID), t.encode())
	return wire.KafkaTxnResult{TxnSeq: t.txnSeq, Epoch: t.epoch}
}

// applyTxnEnd ends transaction TxnSeq at its coordinator, committed or
// aborted: the transactional id's state. Its staged records and offsets are
// resolved in their groups as the decision this command is part of says
// (xtxn.go). The same command retried finds the transaction already ended
// the same way and answers OK.
func (s *Store) applyTxnEnd(ctx *applyCtx, c *wire.TxnEndCmd) wire.KafkaTxnResult {
	t := s.kafka.txns[txnKeyT{c.Tenant, c.TxnID}]
	if t != nil && t.producerID == c.ProducerID && !t.ongoing && t.txnSeq == c.TxnSeq && t.lastCommitted == c.Commit &&
		(t.epoch == c.Epoch || (c.BumpEpoch && t.epoch == c.Epoch+1)) {
		return wire.KafkaTxnResult{TxnSeq: t.txnSeq, Epoch: t.epoch}
	}
	t, code := s.txnFor(c.Tenant, c.TxnID, c.ProducerID, c.Epoch)
	switch {
	case code != wire.CodeOK:
		return wire.KafkaTxnResult{Code: code}
	case !t.ongoing || t.txnSeq != c.TxnSeq:
		return wire.KafkaTxnResult{Code: wire.CodeConflict, TxnSeq: t.txnSeq, Epoch: t.epoch}
	}
	t.end(c.Tenant, c.TxnID, c.Commit, ctx.nowMs, s.at(wire.FormatV2))
	if c.BumpEpoch {
		t.bumpEpoch(s, ctx)
	}
	ctx.set(txnStateKey(c.Tenant, c.TxnID), t.encode())
	return wire.KafkaTxnResult{TxnSeq: t.txnSeq, Epoch: t.epoch}
}

// applyTxnSettled records that transaction XID of a transactional id is
// resolved in every group it staged in: the id may begin its next one.
func (s *Store) applyTxnSettled(ctx *applyCtx, c *wire.TxnSettledCmd) wire.CodeResult {
	k := txnKeyT{c.Tenant, c.TxnID}
	t := s.kafka.txns[k]
	if t == nil || t.unsettled != c.XID {
		return wire.CodeResult{Code: wire.CodeOK} // settled already, or a later transaction's
	}
	t.unsettled, t.endedMs = wire.ID{}, 0
	ctx.set(txnStateKey(c.Tenant, c.TxnID), t.encode())
	return wire.CodeResult{Code: wire.CodeOK}
}

// stagedOffset marks a producer batch staged in an open transaction by a
// build that staged records until commit: its offset is given at commit.
const stagedOffset = math.MaxUint64

// kafkaPart is the header of a group's part of a Kafka transaction: the
// producer, the partitions it appended batches to (each gets a marker when
// the transaction ends) and how many pieces (offsets, or records staged by
// an earlier build) it staged.
type kafkaPart struct {
	tenant   wire.ID
	txnID    string
	pieces   uint32
	producer int64
	parts    []uint64
}

func (k *kafkaPart) encode() []byte {
	w := wire.Writer{}
	w.Fixed(k.tenant[:])
	w.String(k.txnID)
	w.Uvarint(uint64(k.pieces))
	if len(k.parts) > 0 {
		w.Varint(k.producer)
		w.Uvarint(uint64(len(k.parts)))
		for _, pid := range k.parts {
			w.Uvarint(pid)
		}
	}
	return w.B
}

func decodeKafkaPart(b []byte) (kafkaPart, error) {
	r := wire.NewReader(b)
	var k kafkaPart
	copy(k.tenant[:], r.Fixed(16))
	k.txnID = r.String()
	k.pieces = uint32(r.Uvarint())
	if r.Len() > 0 {
		k.producer = r.Varint()
		for range r.Count(1<<20, 1) {
			k.parts = append(k.parts, r.Uvarint())
		}
	}
	return k, r.Done()
}

func xStageKey(xid wire.ID, n uint32) []byte {
	b := append([]byte{tagXStage}, xid[:]...)
	return binary.BigEndian.AppendUint32(b, n)
}

func xStagePrefix(xid wire.ID) []byte { return append([]byte{tagXStage}, xid[:]...) }

// applyKafkaStage takes a piece of transaction XID's part in this group: a
// transactional batch, appended now with its real offsets (checked against
// the producer's sequence in its partition first, as any idempotent batch)
// and held back from readers by the partition's last stable offset until
// the transaction ends; or offsets, staged until commit.
func (s *Store) applyKafkaStage(ctx *applyCtx, c *wire.KafkaStageCmd, body []byte) wire.KafkaProduceResult {
	if _, done := ctx.get(txnDoneKey(c.XID)); done {
		return wire.KafkaProduceResult{Code: wire.CodeConflict} // the transaction ended
	}
	prod := &c.Produce
	x := s.xprep[c.XID]
	part := kafkaPart{tenant: prod.Push.Tenant, txnID: c.TxnID}
	if x != nil {
		if x.sub.Kind != wire.KindKafkaStage {
			return wire.KafkaProduceResult{Code: wire.CodeConflict}
		}
		var err error
		if part, err = decodeKafkaPart(x.sub.Body); err != nil {
			return wire.KafkaProduceResult{Code: wire.CodeBadRequest}
		}
	}
	var res wire.KafkaProduceResult
	if prod.Push.Count > 0 {
		if res = s.appendTxnBatch(ctx, c.XID, prod, &part); res.Code != wire.CodeOK {
			return res
		}
	} else if len(c.Offsets) == 0 {
		return wire.KafkaProduceResult{Code: wire.CodeBadRequest}
	} else {
		ctx.set(xStageKey(c.XID, part.pieces), body)
		part.pieces++
	}
	if x == nil {
		x = &xPrepared{coord: c.Coord, deadlineMs: c.DeadlineMs}
		s.xprep[c.XID] = x
	}
	x.sub = wire.Command{Kind: wire.KindKafkaStage, Body: part.encode()}
	ctx.set(xPrepKey(c.XID), x.encode())
	return res
}

// appendTxnBatch appends a batch of transaction xid and notes its
// partition in the transaction's part.
func (s *Store) appendTxnBatch(ctx *applyCtx, xid wire.ID, prod *wire.KafkaProduceCmd, part *kafkaPart) wire.KafkaProduceResult {
	b, ok := parseProduced(&prod.Push)
	if !ok || prod.ProducerID < 0 || (len(part.parts) > 0 && part.producer != prod.ProducerID) {
		return wire.KafkaProduceResult{Code: wire.CodeBadRequest}
	}
	q, p, code := s.produceTarget(ctx, &prod.Push, b)
	if code != wire.CodeOK {
		return wire.KafkaProduceResult{Code: code}
	}
	res := s.appendSequenced(ctx, q, p, prod, b)
	if res.Code != wire.CodeOK {
		return res // a duplicate was appended already, at res.BaseOffset
	}
	s.openTxnBatch(ctx, p, xid, prod.ProducerID, prod.Epoch, res.BaseOffset, res.BaseOffset+uint64(b.n))
	part.producer = prod.ProducerID
	if !slices.Contains(part.parts, p.id) {
		part.parts = append(part.parts, p.id)
	}
	return res
}

// commitKafkaPart applies a group's part of a Kafka transaction: its staged
// offsets committed as the group's positions, in the order they were
// staged, then a COMMIT marker in every partition it appended to. (Records
// staged by an earlier build are appended first, as that build did.) A
// partition that is gone (its topic was deleted) is skipped.
func (s *Store) commitKafkaPart(ctx *applyCtx, xid wire.ID, sub wire.Command) {
	s.eachStaged(ctx, xid, func(c *wire.KafkaStageCmd) {
		prod := &c.Produce
		if prod.Push.Count > 0 {
			q := s.queue(prod.Push.Tenant, prod.Push.Queue)
			if q == nil {
				return
			}
			p, code := s.pushTarget(ctx, q, &prod.Push)
			heads, ok := pushHeads(&prod.Push)
			if code != wire.CodeOK || !ok {
				return
			}
			base := p.next
			s.appendChunk(ctx, p, prod.Push.Records, heads, nil)
			s.advance(ctx, q, p, len(heads))
			s.settleBatch(ctx, p, prod.ProducerID, prod.BaseSeq, base)
		}
		for _, o := range c.Offsets {
			s.applyCommitPosition(ctx, &wire.CommitPositionCmd{Tenant: prod.Push.Tenant, Queue: o.Queue, Group: o.Group,
				PartitionIndex: int32(o.PartitionIndex), Offset: o.Offset, Metadata: o.Metadata})
		}
	})
	s.markParts(ctx, xid, sub, true)
}

// abortKafkaPart drops a part's staged offsets and writes an ABORT marker in
// every partition it appended to (the producer's sequences stay past its
// batches, as in Kafka's log).
func (s *Store) abortKafkaPart(ctx *applyCtx, xid wire.ID, sub wire.Command) {
	s.eachStaged(ctx, xid, nil)
	s.markParts(ctx, xid, sub, false)
}

// markParts ends the part's transaction in each partition it appended to.
func (s *Store) markParts(ctx *applyCtx, xid wire.ID, sub wire.Command, commit bool) {
	part, err := decodeKafkaPart(sub.Body)
	if err != nil {
		s.log.Error("storage: a Kafka transaction's part does not decode", "err", err)
		return
	}
	for _, pid := range part.parts {
		if p := s.partByID(ctx, pid); p != nil {
			s.endTxnIn(ctx, p, xid, part.producer, commit, markerID(xid, pid))
		}
	}
}

// eachStaged calls f for every staged piece of xid in order, then deletes
// them.
func (s *Store) eachStaged(ctx *applyCtx, xid wire.ID, f func(*wire.KafkaStageCmd)) {
	prefix := xStagePrefix(xid)
	it := ctx.b.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	var pieces [][]byte
	for it.First(); it.Valid(); it.Next() {
		pieces = append(pieces, append([]byte(nil), it.Value()...))
	}
	ctx.closeIter(it)
	_ = ctx.b.DeleteRange(prefix, prefixEnd(prefix), nil)
	for _, b := range pieces {
		c, err := wire.DecodeKafkaStageCmd(b)
		if err != nil {
			s.log.Error("storage: a staged Kafka piece does not decode", "err", err)
			continue
		}
		if f != nil {
			f(&c)
		}
	}
}

// settleBatch gives a staged producer batch its offset once committed.
func (s *Store) settleBatch(ctx *applyCtx, p *partState, producer int64, baseSeq int32, offset uint64) {
	st := s.kafka.producer(p.id, producer, ctx.nowMs)
	if st == nil {
		return
	}
	for i := range st.batches {
		if st.batches[i].firstSeq == baseSeq && st.batches[i].offset == stagedOffset {
			st.batches[i].offset = offset
			s.kafka.putProducer(p.id, producer, st)
			ctx.set(producerKey(p.id, producer), st.encode())
			return
		}
	}
}
