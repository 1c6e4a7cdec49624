package storage

import (
	"math"

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

// applyTxnBegin opens a transaction: the leader stages its records, and the
// open flag is how any later leader knows one was open.
func (s *Store) applyTxnBegin(ctx *applyCtx, c *wire.TxnBeginCmd) wire.KafkaTxnResult {
	t, code := s.txnFor(c.Tenant, c.TxnID, c.ProducerID, c.Epoch)
	if code != wire.CodeOK {
		return wire.KafkaTxnResult{Code: code}
	}
	if !t.ongoing {
		t.ongoing, t.beganMs = true, ctx.nowMs
		t.txnSeq++
		ctx.set(txnStateKey(c.Tenant, c.TxnID), t.encode())
	}
	return wire.KafkaTxnResult{TxnSeq: t.txnSeq, Epoch: t.epoch}
}

// applyTxnEnd commits or aborts transaction TxnSeq. A commit applies every
// push and offset of the transaction in this one command, or none of them:
// targets are checked before anything changes, and a transaction whose
// target vanished (its topic was deleted) is aborted and its producer
// fenced. The same command retried finds the transaction already ended the
// same way and answers OK.
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
	res := wire.KafkaTxnResult{TxnSeq: t.txnSeq}
	commit := c.Commit
	if commit {
		if code := s.txnTargetsExist(c); code != wire.CodeOK {
			commit, c.BumpEpoch, res.Code = false, true, code
		}
	}
	if commit {
		s.commitTxn(ctx, c)
	} else if !c.BumpEpoch {
		s.skipAborted(ctx, c)
	}
	t.ongoing, t.lastCommitted = false, commit
	if c.BumpEpoch {
		t.bumpEpoch(s, ctx)
	}
	ctx.set(txnStateKey(c.Tenant, c.TxnID), t.encode())
	res.Epoch = t.epoch
	return res
}

// txnTargetsExist checks every partition a commit writes to or commits an
// offset in, and that the records frame.
func (s *Store) txnTargetsExist(c *wire.TxnEndCmd) wire.Code {
	exists := func(queue string, index uint32) bool {
		q := s.queue(c.Tenant, queue)
		return q != nil && int(index) < len(q.parts) && q.parts[index] != nil
	}
	for i := range c.Pushes {
		p := &c.Pushes[i]
		if !exists(p.Queue, p.PartitionIndex) {
			return wire.CodePartitionNotFound
		}
		if heads, ok := pushHeads(&wire.PushCmd{Count: p.Count, Records: p.Records}); !ok || len(heads) == 0 {
			return wire.CodeBadRequest
		}
	}
	for _, o := range c.Offsets {
		if !exists(o.Queue, o.PartitionIndex) {
			return wire.CodePartitionNotFound
		}
	}
	return wire.CodeOK
}

// skipAborted moves the producer's sequences past the batches of an aborted
// transaction (its pushes carry their batches, no records). With a bumped
// epoch there is nothing to move: sequences start again.
func (s *Store) skipAborted(ctx *applyCtx, c *wire.TxnEndCmd) {
	for i := range c.Pushes {
		tp := &c.Pushes[i]
		q := s.queue(c.Tenant, tp.Queue)
		if q == nil || int(tp.PartitionIndex) >= len(q.parts) || q.parts[tp.PartitionIndex] == nil {
			continue
		}
		for _, b := range tp.Batches {
			s.recordBatch(ctx, q.parts[tp.PartitionIndex], c.ProducerID, c.Epoch, c.StateTTLMs, b, 0, false)
		}
	}
}

// commitTxn applies a checked commit: each push as one chunk with its
// producer batches remembered, then the group positions.
func (s *Store) commitTxn(ctx *applyCtx, c *wire.TxnEndCmd) {
	for i := range c.Pushes {
		tp := &c.Pushes[i]
		q := s.queue(c.Tenant, tp.Queue)
		p := q.parts[tp.PartitionIndex]
		heads, _ := pushHeads(&wire.PushCmd{Count: tp.Count, Records: tp.Records})
		base := p.next
		s.appendChunk(ctx, p, tp.Records, heads, nil)
		s.advance(ctx, q, p, len(heads))
		off := base
		for _, b := range tp.Batches {
			s.recordBatch(ctx, p, c.ProducerID, c.Epoch, c.StateTTLMs, b, off, true)
			off += uint64(b.Count)
		}
	}
	for _, o := range c.Offsets {
		s.applyCommitPosition(ctx, &wire.CommitPositionCmd{Tenant: c.Tenant, Queue: o.Queue, Group: o.Group,
			PartitionIndex: int32(o.PartitionIndex), Offset: o.Offset, Metadata: o.Metadata})
	}
}
