package storage

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// Relocation is how segment space comes back (segments.go). Segments are
// shared by every partition of the group and freed only when all of their
// sequence range is dead, so a segment that retention or consumers have
// mostly emptied can be held by a few long-lived chunks. The leader finds
// such a range in its own segments (SparseRange) and proposes
// RelocateChunksCmd; every replica then copies the range's live chunks to
// new sequences at the head of the log, and its segments in that range
// are freed at the next Sync. Which chunks are live is replicated state,
// so every replica moves the same ones; only where the bytes land is
// local.

// applyRelocateChunks moves the live chunks with sequences in [From, To)
// to new sequences, up to MaxBytes of records per command.
func (s *Store) applyRelocateChunks(ctx *applyCtx, c *wire.RelocateChunksCmd) wire.RelocateChunksResult {
	res := wire.RelocateChunksResult{Code: wire.CodeOK, Next: c.To}
	if c.From >= c.To {
		return res
	}
	it := ctx.b.NewIter(&pebble.IterOptions{LowerBound: blobKey(c.From), UpperBound: blobKey(c.To)})
	type move struct {
		seq uint64
		loc location
	}
	var moves []move
	var bytes uint64
	for it.First(); it.Valid(); it.Next() {
		seq := binary.BigEndian.Uint64(it.Key()[1:])
		if bytes >= c.MaxBytes && len(moves) > 0 {
			res.Next = seq
			break
		}
		loc, err := decodeLocation(it.Value())
		if err != nil {
			ctx.fail(fmt.Errorf("storage: relocate chunk %d: %w", seq, err))
			break
		}
		moves = append(moves, move{seq, loc})
		bytes += uint64(loc.length)
	}
	ctx.closeIter(it)
	if ctx.err != nil {
		return res
	}
	for _, m := range moves {
		v, ok := ctx.get(chunkKey(m.loc.pid, m.loc.base))
		if !ok {
			continue
		}
		meta, err := decodeChunkMeta(v)
		if err != nil {
			ctx.fail(fmt.Errorf("storage: relocate chunk %d: %w", m.seq, err))
			return res
		}
		if meta.seq != m.seq {
			continue
		}
		records, err := s.segs.readOwn(m.loc)
		if err != nil {
			ctx.fail(err)
			return res
		}
		s.rewriteChunk(ctx, m.loc.pid, m.loc.base, meta, records)
		res.Moved++
	}
	return res
}

// SparseRange proposes a sequence range worth relocating: a closed
// segment, among the next few measured, whose live records take less than
// half of its file but are not none. ok is false when there is none.
func (s *Store) SparseRange() (from, to uint64, ok bool) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil || s.segs == nil {
		return 0, 0, false
	}
	type span struct {
		name, next uint64
		size       int64
	}
	// Each call measures the next few closed segments after the last one
	// measured, wrapping around, so every segment is looked at in turn.
	s.segs.mu.RLock()
	var spans []span
	closed := s.segs.files[:max(len(s.segs.files)-1, 0)]
	start, _ := searchSegments(closed, s.relocCursor.Load()+1)
	if start >= len(closed) {
		start = 0
	}
	for i := start; i < len(closed) && i-start < sparseCandidates; i++ {
		f := closed[i]
		s.relocCursor.Store(f.name)
		if i == len(closed)-1 {
			s.relocCursor.Store(0)
		}
		fi, err := f.f.Stat()
		if err != nil || fi.Size() < s.segs.maxBytes/4 {
			continue // small segments are not worth a copy
		}
		spans = append(spans, span{f.name, s.segs.files[i+1].name, fi.Size()})
	}
	s.segs.mu.RUnlock()
	for _, sp := range spans {
		it := s.db.NewIter(&pebble.IterOptions{LowerBound: blobKey(sp.name), UpperBound: blobKey(sp.next)})
		var live int64
		for it.First(); it.Valid(); it.Next() {
			if loc, err := decodeLocation(it.Value()); err == nil && loc.segment == sp.name {
				live += int64(loc.length)
			}
		}
		_ = it.Close()
		// A wholly dead segment needs no copy: the next Sync deletes it.
		if live > 0 && live*2 < sp.size {
			return sp.name, sp.next, true
		}
	}
	return 0, 0, false
}

// sparseCandidates bounds the segments SparseRange measures per call.
const sparseCandidates = 8
