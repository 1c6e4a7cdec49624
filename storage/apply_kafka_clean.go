package storage

import (
	"fmt"
	"math"
	"sort"

	"github.com/queen-mq/queen/wire"
)

// applyLogClean applies the cleaning the leader of the partition's raft
// group decided for a Kafka topic (LogCleanCmd): the log start moves up
// first (retention.bytes), dropping the chunks wholly below it, then
// compaction drops the listed offsets. The command names every record it
// drops, so every replica drops the same ones whatever its own clock or
// reading of the configs. It answers how many offsets it emptied (all
// those the log start moved over, and the records compaction dropped).
func (s *Store) applyLogClean(ctx *applyCtx, c *wire.LogCleanCmd) wire.CountResult {
	p := s.partByID(ctx, c.PartitionID)
	if p == nil || p.q.tenant != c.Tenant {
		return wire.CountResult{Code: wire.CodePartitionNotFound}
	}
	var n uint64
	if at := min(c.StartAt, p.next); at > p.start {
		before := p.start
		ci := newChunkIter(ctx.b, ctx.s.segs, p.id)
		s.dropPrefix(ctx, ci, p.q, p, math.MaxInt, at, func(_ chunkMeta, end uint64) bool { return end <= at })
		ctx.closeIter(ci)
		n += p.start - before
	}
	if len(c.Drop) > 0 {
		n += s.compactChunks(ctx, p, c.Drop)
	}
	if n > 0 {
		ctx.touch(p.q)
	}
	return wire.CountResult{Code: wire.CodeOK, N: n}
}

// compactChunks drops the records at the offsets of drop (sorted, disjoint
// ranges) from p's chunks. A chunk holds consecutive offsets, so each
// chunk that loses records is rewritten as one chunk per run of records it
// keeps: the gaps compaction leaves fall between chunks, and the records
// kept keep their offsets and append time, as in a compacted Kafka log.
func (s *Store) compactChunks(ctx *applyCtx, p *partState, drop []wire.OffsetRange) uint64 {
	type touched struct {
		base    uint64
		meta    chunkMeta
		records []byte
	}
	var chunks []touched
	i := 0
	ci := newChunkIter(ctx.b, ctx.s.segs, p.id)
	for ok := ci.Seek(drop[0].From); ok && ci.Base() < p.next; ok = ci.Next() {
		for i < len(drop) && drop[i].To <= ci.Base() {
			i++
		}
		if i == len(drop) {
			break
		}
		if drop[i].From >= ci.End() {
			continue
		}
		records, err := ci.Records()
		if err != nil {
			ctx.fail(err)
			break
		}
		chunks = append(chunks, touched{base: ci.Base(), meta: ci.Meta(), records: records}) // Records reads into a buffer of its own
	}
	ctx.closeIter(ci)
	if ctx.err != nil {
		return 0
	}
	var n uint64
	for _, c := range chunks {
		n += s.splitChunk(ctx, p, c.base, c.meta, c.records, drop)
	}
	return n
}

// splitChunk rewrites the chunk at base without the records drop names, as
// one chunk per run of records kept, and forgets the transaction ids of
// those dropped. It returns how many it dropped.
func (s *Store) splitChunk(ctx *applyCtx, p *partState, base uint64, meta chunkMeta, records []byte, drop []wire.OffsetRange) uint64 {
	type run struct {
		base  uint64
		parts [][]byte
	}
	var runs []run
	var dropped uint64
	j := sort.Search(len(drop), func(k int) bool { return drop[k].To > base })
	open := false // the last record was kept: the next one extends its run
	ri := wire.NewRecordIter(records)
	for off := base; ; off++ {
		body, framed, ok := ri.Next()
		if !ok {
			break
		}
		for j < len(drop) && drop[j].To <= off {
			j++
		}
		if j < len(drop) && drop[j].From <= off {
			dropRecordTxnIndex(ctx, p, off, body)
			dropped++
			open = false
			continue
		}
		if !open {
			runs = append(runs, run{base: off})
			open = true
		}
		r := &runs[len(runs)-1]
		r.parts = append(r.parts, framed)
	}
	if err := ri.Err(); err != nil {
		ctx.fail(fmt.Errorf("storage: chunk %d/%d: %w", p.id, base, err))
		return 0
	}
	if dropped == 0 {
		return 0
	}
	deleteChunk(ctx, p.id, base, meta.seq)
	for _, r := range runs {
		s.storeChunk(ctx, p.id, r.base, chunkMeta{appendMs: meta.appendMs, count: len(r.parts)}, r.parts...)
	}
	return dropped
}
