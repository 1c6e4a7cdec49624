package storage

import (
	"encoding/binary"
	"math"

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
		t.ongoing = false // aborted: its records were only ever staged
		t.bumpEpoch(s, ctx)
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
	case !t.ongoing:
		t.ongoing, t.beganMs, t.groups = true, ctx.nowMs, c.Groups
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
	t.ongoing, t.lastCommitted = false, c.Commit
	if c.BumpEpoch {
		t.bumpEpoch(s, ctx)
	}
	ctx.set(txnStateKey(c.Tenant, c.TxnID), t.encode())
	return wire.KafkaTxnResult{TxnSeq: t.txnSeq, Epoch: t.epoch}
}

// stagedOffset marks a producer batch staged in an open transaction: its
// sequence counts (a retry is recognised), its offset is given at commit.
const stagedOffset = math.MaxUint64

// kafkaPart is the header of a group's staged part of a Kafka transaction.
type kafkaPart struct {
	tenant wire.ID
	txnID  string
	pieces uint32
}

func (k *kafkaPart) encode() []byte {
	w := wire.Writer{}
	w.Fixed(k.tenant[:])
	w.String(k.txnID)
	w.Uvarint(uint64(k.pieces))
	return w.B
}

func decodeKafkaPart(b []byte) (kafkaPart, error) {
	r := wire.NewReader(b)
	var k kafkaPart
	copy(k.tenant[:], r.Fixed(16))
	k.txnID = r.String()
	k.pieces = uint32(r.Uvarint())
	return k, r.Done()
}

func xStageKey(xid wire.ID, n uint32) []byte {
	b := append([]byte{tagXStage}, xid[:]...)
	return binary.BigEndian.AppendUint32(b, n)
}

func xStagePrefix(xid wire.ID) []byte { return append([]byte{tagXStage}, xid[:]...) }

// applyKafkaStage stages a batch (checked against the producer's sequence
// in its partition, which moves past it now, as Kafka's does when it
// appends a transactional batch) or offsets as a piece of transaction XID's
// part in this group.
func (s *Store) applyKafkaStage(ctx *applyCtx, c *wire.KafkaStageCmd, body []byte) wire.KafkaProduceResult {
	if _, done := ctx.get(txnDoneKey(c.XID)); done {
		return wire.KafkaProduceResult{Code: wire.CodeConflict} // the transaction ended
	}
	prod := &c.Produce
	tenant := prod.Push.Tenant
	if prod.Push.Count > 0 {
		heads, ok := pushHeads(&prod.Push)
		if !ok || prod.ProducerID < 0 || prod.Push.PartitionIndex < 0 {
			return wire.KafkaProduceResult{Code: wire.CodeBadRequest}
		}
		q := s.queue(tenant, prod.Push.Queue)
		if q == nil || (prod.Push.Inc != 0 && q.inc != prod.Push.Inc) {
			return wire.KafkaProduceResult{Code: wire.CodeQueueNotFound}
		}
		p, code := s.pushTarget(q, &prod.Push)
		if code != wire.CodeOK {
			return wire.KafkaProduceResult{Code: code}
		}
		if mustSeal(q, &prod.Push, heads) {
			return wire.KafkaProduceResult{Code: wire.CodeSealRequired}
		}
		code, _ = s.checkSequence(ctx, p, prod.ProducerID, prod.Epoch, prod.BaseSeq, len(heads))
		if code != wire.CodeOK {
			return wire.KafkaProduceResult{Code: code} // a duplicate is a batch staged already
		}
		s.recordBatch(ctx, p, prod.ProducerID, prod.Epoch, prod.StateTTLMs,
			wire.SeqBatch{BaseSeq: prod.BaseSeq, Count: uint32(len(heads))}, stagedOffset)
	} else if len(c.Offsets) == 0 {
		return wire.KafkaProduceResult{Code: wire.CodeBadRequest}
	}
	x := s.xprep[c.XID]
	var part kafkaPart
	if x == nil {
		x = &xPrepared{coord: c.Coord, deadlineMs: c.DeadlineMs}
		part = kafkaPart{tenant: tenant, txnID: c.TxnID}
		s.xprep[c.XID] = x
	} else if x.sub.Kind != wire.KindKafkaStage {
		return wire.KafkaProduceResult{Code: wire.CodeConflict}
	} else {
		var err error
		if part, err = decodeKafkaPart(x.sub.Body); err != nil {
			return wire.KafkaProduceResult{Code: wire.CodeBadRequest}
		}
	}
	ctx.set(xStageKey(c.XID, part.pieces), body)
	part.pieces++
	x.sub = wire.Command{Kind: wire.KindKafkaStage, Body: part.encode()}
	ctx.set(xPrepKey(c.XID), x.encode())
	return wire.KafkaProduceResult{Code: wire.CodeOK}
}

// commitKafkaPart applies a group's staged part of a Kafka transaction in
// the order it was staged: each batch appended as one chunk with its
// producer batch given its offset, each offset committed as the group's
// position. A piece whose partition is gone (its topic was deleted) is
// skipped.
func (s *Store) commitKafkaPart(ctx *applyCtx, xid wire.ID) {
	s.eachStaged(ctx, xid, func(c *wire.KafkaStageCmd) {
		prod := &c.Produce
		if prod.Push.Count > 0 {
			q := s.queue(prod.Push.Tenant, prod.Push.Queue)
			if q == nil {
				return
			}
			p, code := s.pushTarget(q, &prod.Push)
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
