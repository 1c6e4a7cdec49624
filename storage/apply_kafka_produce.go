package storage

import (
	"github.com/queen-mq/queen/wire"
)

// applyKafkaProduce appends one Kafka batch to a partition addressed by
// index. An idempotent producer's batch is checked against its sequence
// state first (appendSequenced); any other is recognised when its proposal
// was retried, by its first message id.
func (s *Store) applyKafkaProduce(ctx *applyCtx, c *wire.KafkaProduceCmd) wire.KafkaProduceResult {
	b, ok := parseProduced(&c.Push)
	if !ok {
		return wire.KafkaProduceResult{Code: wire.CodeBadRequest}
	}
	q, p, code := s.produceTarget(ctx, &c.Push, b)
	if code != wire.CodeOK {
		return wire.KafkaProduceResult{Code: code}
	}
	if c.ProducerID >= 0 {
		return s.appendSequenced(ctx, q, p, c, b)
	}
	res := wire.KafkaProduceResult{LogStart: p.start}
	if ctx.retry {
		if at, found := s.findRetriedBatch(ctx, p, b.first); found {
			res.Code, res.BaseOffset = wire.CodeDuplicate, at
			return res
		}
	}
	res.BaseOffset, res.AppendMs = s.appendProduced(ctx, q, p, &c.Push, b), ctx.nowMs
	return res
}

// appendSequenced appends an idempotent producer's batch once checked
// against its sequence state in p (spec §3.3): a batch already stored is
// answered CodeDuplicate with its original offset, a gap CodeOutOfOrder
// (CodeUnknownProducer when the partition has no state for the producer),
// an old epoch CodeFenced.
func (s *Store) appendSequenced(ctx *applyCtx, q *queueState, p *partState, c *wire.KafkaProduceCmd, b producedBatch) wire.KafkaProduceResult {
	res := wire.KafkaProduceResult{LogStart: p.start}
	code, dupAt := s.checkSequence(ctx, p, c.ProducerID, c.Epoch, c.BaseSeq, b.n)
	if code != wire.CodeOK {
		res.Code, res.BaseOffset = code, dupAt
		return res
	}
	res.BaseOffset, res.AppendMs = s.appendProduced(ctx, q, p, &c.Push, b), ctx.nowMs
	s.recordBatch(ctx, p, c.ProducerID, c.Epoch, c.StateTTLMs, wire.SeqBatch{BaseSeq: c.BaseSeq, Count: uint32(b.n)}, res.BaseOffset)
	return res
}

// producedBatch is a produce command's batch, checked: a batch kept as
// produced, or stored records (their heads parsed), with its record count
// and first message id.
type producedBatch struct {
	kept  bool
	heads []pushHead
	first wire.ID
	n     int
}

// parseProduced checks a produce command's records; ok is false when they
// are malformed, empty, or address no partition index.
func parseProduced(c *wire.PushCmd) (producedBatch, bool) {
	var b producedBatch
	ok := false
	if c.Flags&wire.PushKafkaBatch != 0 {
		b.kept = true
		b.first, b.n, ok = keptBatchCount(c)
	} else if b.heads, ok = pushHeads(c); ok && len(b.heads) > 0 {
		b.first, b.n = b.heads[0].head.MsgID, len(b.heads)
	}
	return b, ok && b.n > 0 && c.PartitionIndex >= 0
}

// produceTarget is the queue and partition a produce names, checked: the
// incarnation it was resolved in, and sealed records for an encrypted
// queue when the proposer holds the key (a kept batch is never sealed: the
// proposer keeps batches only for queues it saw unencrypted).
func (s *Store) produceTarget(ctx *applyCtx, c *wire.PushCmd, b producedBatch) (*queueState, *partState, wire.Code) {
	q := s.queue(c.Tenant, c.Queue)
	if q == nil || (c.Inc != 0 && q.inc != c.Inc) {
		return nil, nil, wire.CodeQueueNotFound
	}
	p, code := s.pushTarget(ctx, q, c)
	if code != wire.CodeOK {
		return nil, nil, code
	}
	if mustSeal(q, c, b.heads) || (b.kept && c.Flags&wire.PushKeyHeld != 0 && q.cfg.EncryptionEnabled) {
		return nil, nil, wire.CodeSealRequired
	}
	return q, p, wire.CodeOK
}

// appendProduced appends a checked batch to p as one chunk and returns its
// base offset.
func (s *Store) appendProduced(ctx *applyCtx, q *queueState, p *partState, c *wire.PushCmd, b producedBatch) uint64 {
	base := p.next
	if b.kept {
		s.storeChunk(ctx, p.id, base, chunkMeta{appendMs: ctx.nowMs, count: b.n, kafkaBatch: true}, c.Records)
	} else {
		s.appendChunk(ctx, p, c.Records, b.heads, nil)
	}
	s.advance(ctx, q, p, b.n)
	return base
}

// checkSequence decides what to do with a producer's batch of count records
// starting at seq. A producer the partition does not know (or forgot) must
// start at sequence 0, as must a new epoch. Not starting there is
// CodeUnknownProducer for a producer without state (Kafka's
// UNKNOWN_PRODUCER_ID: its state expired, nothing says records were lost)
// and CodeOutOfOrder for a new epoch.
//
// A batch past the next sequence of a known producer is CodeSequenceAhead,
// retriable, not Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER: a committed batch is
// never lost here, so a gap means an earlier batch is still on its way. It
// happens when a client pipelines and the proposals of a group are retried
// across a leadership change, in any order; clients treat out-of-order as
// data loss and reset their producer, while a retriable answer makes them
// resend the batch, which lands after its predecessor.
func (s *Store) checkSequence(ctx *applyCtx, p *partState, producer int64, epoch int16, seq int32, count int) (wire.Code, uint64) {
	st := s.kafka.producer(p.id, producer, ctx.nowMs)
	last := wire.NextSeq(seq, count-1)
	switch {
	case seq < 0:
		return wire.CodeOutOfOrder, 0
	case st == nil:
		if seq != 0 {
			return wire.CodeUnknownProducer, 0
		}
	case epoch > st.epoch:
		if seq != 0 {
			return wire.CodeOutOfOrder, 0
		}
	case epoch < st.epoch:
		return wire.CodeFenced, 0
	default:
		if at, ok := st.find(seq, last); ok {
			return wire.CodeDuplicate, at
		}
		if next := wire.NextSeq(st.lastSeq, 1); seq != next {
			if seqAhead(seq, next) {
				return wire.CodeSequenceAhead, 0
			}
			return wire.CodeOutOfOrder, 0
		}
	}
	return wire.CodeOK, 0
}

// seqAhead reports whether seq comes after next in the producer's wrapping
// sequence space (within half of it), rather than before.
func seqAhead(seq, next int32) bool {
	d := (int64(seq) - int64(next) + 1<<31) % (1 << 31)
	return d > 0 && d < 1<<30
}

// recordBatch remembers a producer's batch stored at offset (stagedOffset:
// staged in an open transaction), starting a new state for a new producer
// or epoch.
func (s *Store) recordBatch(ctx *applyCtx, p *partState, producer int64, epoch int16, ttlMs uint32, b wire.SeqBatch, offset uint64) {
	st := s.kafka.producer(p.id, producer, ctx.nowMs)
	if st == nil || epoch != st.epoch {
		if st == nil && len(s.kafka.producers[p.id]) >= maxProducersPerPartition {
			s.evictOldestProducer(ctx, p.id)
		}
		st = &producerState{epoch: epoch}
	}
	last := wire.NextSeq(b.BaseSeq, int(b.Count)-1)
	if len(st.batches) == producerBatches {
		st.batches = append(st.batches[:0], st.batches[1:]...)
	}
	st.batches = append(st.batches, batchMeta{firstSeq: b.BaseSeq, lastSeq: last, offset: offset})
	st.lastSeq, st.lastMs, st.ttlMs = last, ctx.nowMs, ttlMs
	s.kafka.putProducer(p.id, producer, st)
	ctx.set(producerKey(p.id, producer), st.encode())
}

// findRetriedBatch looks for a chunk of p starting with the record msgID
// among the chunks appended since the retried entry was first proposed: a
// retry carries its first attempt's clock stamp, and chunks take the
// replicated clock, which never runs behind a stamp it applied.
func (s *Store) findRetriedBatch(ctx *applyCtx, p *partState, msgID wire.ID) (uint64, bool) {
	it := newChunkIter(ctx.b, ctx.s.segs, p.id)
	defer ctx.closeIter(it)
	for ok := it.Last(); ok && it.Meta().appendMs >= ctx.entryMs; ok = it.Prev() {
		stored, err := it.Stored()
		if err != nil {
			ctx.fail(err)
			return 0, false
		}
		if it.Meta().kafkaBatch {
			if first, _, _, ok := wire.SplitKafkaBatch(stored); ok && first == msgID {
				return it.Base(), true
			}
			continue
		}
		ri := wire.NewRecordIter(stored)
		body, _, ok := ri.Next()
		if !ok {
			continue
		}
		if h, err := wire.ParseRecordHead(body); err == nil && h.MsgID == msgID {
			return it.Base(), true
		}
	}
	return 0, false
}
