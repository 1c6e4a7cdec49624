package storage

import (
	"encoding/binary"

	"github.com/queen-mq/queen/wire"
)

// applyDeleteMessage erases one message. A partition log is append-only and
// its offsets are gap-free, so the record is not removed: it is rewritten
// in place as a null tombstone that keeps its offset, message id and Kafka
// key (what log compaction would leave) and loses its payload, headers and
// trace. Its transaction ids are forgotten, so it can no longer be read,
// acknowledged or deduplicated by id, and its dead-letter rows go. A
// consumer that has not reached it yet receives the tombstone (data null).
func (s *Store) applyDeleteMessage(ctx *applyCtx, c *wire.DeleteMessageCmd) wire.CodeResult {
	p := s.partByID(ctx, c.PartitionID)
	if p == nil || p.q.tenant != c.Tenant {
		return wire.CodeResult{Code: wire.CodePartitionNotFound}
	}
	off, ok := s.indexedOffset(ctx, p, c.TxnID)
	if !ok || off < p.start || off >= p.next {
		return wire.CodeResult{Code: wire.CodeMessageNotFound}
	}
	if !s.eraseRecord(ctx, p, off) {
		return wire.CodeResult{Code: wire.CodeMessageNotFound}
	}
	eachDLQRow(ctx, p.q.tenant, func(key []byte, row *dlqRow) bool {
		if row.partID == p.id && row.offset == off {
			ctx.del(key)
			s.forgetDLQRow(row)
		}
		return true
	})
	ctx.touch(p.q)
	return wire.CodeResult{Code: wire.CodeOK}
}

// indexedOffset resolves a transaction id through p's transaction index:
// the explicit id first, then the message id it may be the text of.
func (s *Store) indexedOffset(ctx *applyCtx, p *partState, txn []byte) (uint64, bool) {
	if v, ok := ctx.get(txnKey(p.id, true, txn)); ok && len(v) == 16 {
		return binary.BigEndian.Uint64(v[:8]), true
	}
	if id, err := wire.ParseID(string(txn)); err == nil {
		if v, ok := ctx.get(txnKey(p.id, false, id[:])); ok && len(v) == 16 {
			return binary.BigEndian.Uint64(v[:8]), true
		}
	}
	return 0, false
}

// eraseRecord rewrites the chunk holding offset off of p with that record
// made a tombstone, and drops the record's transaction index entries.
func (s *Store) eraseRecord(ctx *applyCtx, p *partState, off uint64) bool {
	it := newChunkIter(ctx.b, ctx.s.segs, p.id)
	if !it.SeekLE(off) || off >= it.End() {
		ctx.closeIter(it)
		return false
	}
	base, meta := it.Base(), it.Meta()
	records, err := it.Records()
	records = append([]byte(nil), records...)
	ctx.closeIter(it)
	if err != nil {
		ctx.fail(err)
		return false
	}
	out := make([]byte, 0, len(records))
	ri := wire.NewRecordIter(records)
	for o := base; ; o++ {
		body, framed, ok := ri.Next()
		if !ok {
			break
		}
		if o != off {
			out = append(out, framed...)
			continue
		}
		rec, err := wire.ParseRecord(body)
		if err != nil {
			return false
		}
		ctx.del(txnKey(p.id, false, rec.MsgID[:]))
		if rec.Flags&wire.FlagTxnID != 0 {
			ctx.del(txnKey(p.id, true, rec.TxnID))
		}
		tomb := wire.Record{Flags: rec.Flags&(wire.FlagTxnID|wire.FlagKey|wire.FlagTimestamp) | wire.FlagNullValue,
			MsgID: rec.MsgID, TxnID: rec.TxnID, Key: rec.Key, Timestamp: rec.Timestamp}
		out = wire.AppendRecord(out, &tomb)
	}
	if ri.Err() != nil {
		return false
	}
	meta.kafkaBatch = false // rewritten as stored records
	s.rewriteChunk(ctx, p.id, base, meta, out)
	return true
}
