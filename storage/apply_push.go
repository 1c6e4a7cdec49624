package storage

import (
	"encoding/binary"

	"github.com/queen-mq/queen/wire"
)

// applyPush appends a push command's records to one partition as one chunk.
// Records whose transaction id is already stored (within the queue's dedup
// window for explicit ids; always for message ids, which only repeat when a
// proposal is retried) are answered with their original offset and message
// id and not stored again.
func (s *Store) applyPush(ctx *applyCtx, c *wire.PushCmd) wire.PushResult {
	var res wire.PushResult
	heads, ok := pushHeads(c)
	if !ok {
		res.Code = wire.CodeBadRequest
		return res
	}
	q := s.queue(c.Tenant, c.Queue)
	if q == nil || (c.Inc != 0 && q.inc != c.Inc) {
		res.Code = wire.CodeQueueNotFound
		return res
	}
	p, code := s.pushTarget(ctx, q, c)
	if code != wire.CodeOK {
		res.Code = code
		if code == wire.CodePartitionGone {
			res.PartitionIndex = uint32(c.PartitionIndex) // what the engine asks the home to drop
		}
		return res
	}
	if mustSeal(q, c, heads) {
		res.Code = wire.CodeSealRequired
		return res
	}
	res.PartitionID, res.PartitionIndex, res.BaseOffset = p.id, p.index, p.next

	index := c.Flags&wire.PushIndexTxn != 0
	if index {
		res.Dups = s.findDups(ctx, q, p, heads)
	}
	stored := len(heads) - len(res.Dups)
	if stored == 0 {
		return res
	}
	s.appendChunk(ctx, p, c.Records, heads, res.Dups)
	if index {
		var val [16]byte
		binary.BigEndian.PutUint64(val[8:], uint64(ctx.nowMs))
		off, d := p.next, 0
		for i := range heads {
			if d < len(res.Dups) && res.Dups[d].Index == i {
				d++
				continue
			}
			binary.BigEndian.PutUint64(val[:8], off)
			explicit, id := heads[i].head.TxnKey()
			ctx.set(txnKey(p.id, explicit, id), val[:])
			off++
		}
	}
	s.advance(ctx, q, p, stored)
	return res
}

// advance moves p's head past n records just appended at p.next and lets
// every subscription and long poll know.
func (s *Store) advance(ctx *applyCtx, q *queueState, p *partState, n int) {
	q.count(ctx.nowMs, Activity{Pushed: uint64(n), PushOps: 1})
	s.extend(ctx, q, p, n)
}

// extend moves p's head past n records just appended at p.next, counting
// no push (a transaction marker is not a message).
func (s *Store) extend(ctx *applyCtx, q *queueState, p *partState, n int) {
	p.next += uint64(n)
	p.lastWriteMs = ctx.nowMs
	ctx.markDirty(p)
	for _, sub := range q.subs {
		sub.ready.set(p.index)
	}
	ctx.touch(q)
}

type pushHead struct {
	head   wire.RecordHead
	framed []byte
}

// pushHeads parses every record's head before anything changes, so a
// malformed command is refused whole.
func pushHeads(c *wire.PushCmd) ([]pushHead, bool) {
	heads := make([]pushHead, 0, c.Count)
	it := wire.NewRecordIter(c.Records)
	for {
		body, framed, ok := it.Next()
		if !ok {
			break
		}
		h, err := wire.ParseRecordHead(body)
		if err != nil {
			return nil, false
		}
		heads = append(heads, pushHead{head: h, framed: framed})
	}
	return heads, it.Err() == nil && len(heads) == c.Count
}

// mustSeal reports a push that carries unsealed records to a queue whose
// options ask for encryption, from a proposer that holds the key
// (PushKeyHeld) and so should have sealed them. The proposer decides from
// its replica's view of the options, which may lag a configure; the state
// machine decides from this group's copy, in log order with the configure
// that changed it, so every replica stores the same thing and no record
// pushed after encryption was turned on here is stored in clear. The
// proposer seals and retries on CodeSealRequired.
func mustSeal(q *queueState, c *wire.PushCmd, heads []pushHead) bool {
	if c.Flags&wire.PushKeyHeld == 0 || !q.cfg.EncryptionEnabled {
		return false
	}
	for i := range heads {
		if heads[i].head.Flags&wire.FlagEncrypted == 0 {
			return true
		}
	}
	return false
}

// pushTarget is the partition a push names, by index or by name.
func (s *Store) pushTarget(ctx *applyCtx, q *queueState, c *wire.PushCmd) (*partState, wire.Code) {
	if c.PartitionIndex >= 0 {
		if p := s.partAt(ctx, q, uint32(c.PartitionIndex)); p != nil {
			return p, wire.CodeOK
		}
		if q.gone.has(uint32(c.PartitionIndex)) {
			return nil, wire.CodePartitionGone // a stale directory entry: the engine allocates the name again
		}
		if s.movedAt(q, uint32(c.PartitionIndex)) {
			return nil, wire.CodePartitionMoved // sealed for a move, or moved: resolve again (move.go)
		}
		return nil, wire.CodePartitionNotFound
	}
	if p := s.partNamed(ctx, q, c.Partition); p != nil {
		return p, wire.CodeOK
	}
	if s.movedNamed(q, c.Partition) {
		return nil, wire.CodePartitionMoved
	}
	return nil, wire.CodePartitionNotFound
}

// findDups lists the records whose transaction id is already stored in p, or
// repeats an earlier record of the same command. A record addressed by its
// message id (fresh for every push) can only be stored already when the
// entry is a retry, so only then is it looked up: the lookup of an id that
// is not there is the expensive case.
func (s *Store) findDups(ctx *applyCtx, q *queueState, p *partState, heads []pushHead) []wire.PushDup {
	var dups []wire.PushDup
	var seen map[string]int // explicit ids earlier in this command → their index
	window := int64(q.cfg.DedupWindowSec) * 1000
	for i := range heads {
		h := &heads[i].head
		explicit, id := h.TxnKey()
		if !explicit && !ctx.retry {
			continue
		}
		if v, ok := ctx.get(txnKey(p.id, explicit, id)); ok && len(v) == 16 {
			at := int64(binary.BigEndian.Uint64(v[8:]))
			if !explicit || ctx.nowMs-at < window {
				dups = append(dups, wire.PushDup{Index: i, Offset: binary.BigEndian.Uint64(v[:8]), MsgID: s.msgIDAt(ctx, p, binary.BigEndian.Uint64(v[:8]), h.MsgID)})
				continue
			}
		}
		if explicit {
			if j, ok := seen[string(id)]; ok {
				first, _ := (&wire.PushResult{BaseOffset: p.next, Dups: dups}).Offset(j)
				dups = append(dups, wire.PushDup{Index: i, Offset: first, MsgID: heads[j].head.MsgID})
				continue
			}
			if seen == nil {
				seen = map[string]int{}
			}
			seen[string(id)] = i
		}
	}
	return dups
}

// msgIDAt returns the message id stored at offset in p; fallback when the
// record is not stored (retention removed it). A read failure fails the
// batch.
func (s *Store) msgIDAt(ctx *applyCtx, p *partState, offset uint64, fallback wire.ID) wire.ID {
	var id wire.ID
	found := false
	s.readRange(ctx, p.id, offset, offset+1, func(off uint64, _ int64, body []byte) bool {
		if h, err := wire.ParseRecordHead(body); err == nil {
			id, found = h.MsgID, true
		}
		return false
	})
	if !found {
		return fallback
	}
	return id
}

// appendChunk stores the non-duplicate records at p.next as one chunk,
// written from the command's bytes straight to the current segment.
func (s *Store) appendChunk(ctx *applyCtx, p *partState, records []byte, heads []pushHead, dups []wire.PushDup) {
	count := len(heads) - len(dups)
	if len(dups) == 0 {
		s.putChunk(ctx, p, p.next, count, records)
		return
	}
	parts := make([][]byte, 0, count)
	d := 0
	for i := range heads {
		if d < len(dups) && dups[d].Index == i {
			d++
			continue
		}
		parts = append(parts, heads[i].framed)
	}
	s.putChunk(ctx, p, p.next, count, parts...)
}
