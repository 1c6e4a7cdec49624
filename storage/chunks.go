package storage

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// A partition's log is stored as chunks, the records one command appended.
// A chunk's records live in a segment file (segments.go) under a
// group-wide, ever-growing sequence number; its blob key (the sequence)
// holds where. A per-partition index (chunk keys: partition id, base
// offset) maps offsets to chunks and carries each chunk's sequence, append
// time, record count and size, so looking up an offset or a time never
// reads record bytes.

const tagBlob = 'b' // chunk sequence → the chunk's location in its segment

func blobKey(seq uint64) []byte { return appendU64([]byte{tagBlob}, seq) }

// chunkMeta is a chunk index entry's value.
type chunkMeta struct {
	seq      uint64
	appendMs int64 // the replicated clock when the chunk was appended
	count    int   // records in the chunk
	size     int   // bytes of the chunk's records
	// kafkaBatch: the chunk is one Kafka record batch kept as produced
	// (wire.AppendKafkaBatch), not stored records (kafka_batch.go).
	kafkaBatch bool
}

// Chunk kinds, written after the other fields only when not stored records,
// so the index entries of stored records keep the form they always had.
const chunkKindKafkaBatch = 1

func (m chunkMeta) encode() []byte {
	w := wire.Writer{B: make([]byte, 0, 24)}
	w.U64(m.seq)
	w.Varint(m.appendMs)
	w.Uvarint(uint64(m.count))
	w.Uvarint(uint64(m.size))
	if m.kafkaBatch {
		w.U8(chunkKindKafkaBatch)
	}
	return w.B
}

func decodeChunkMeta(b []byte) (chunkMeta, error) {
	r := wire.NewReader(b)
	m := chunkMeta{seq: r.U64(), appendMs: r.Varint(), count: int(r.Uvarint()), size: int(r.Uvarint())}
	if r.Len() > 0 {
		switch kind := r.U8(); kind {
		case chunkKindKafkaBatch:
			m.kafkaBatch = true
		default:
			return m, fmt.Errorf("storage: unknown chunk kind %d", kind)
		}
	}
	return m, r.Done()
}

// putChunk stores a chunk of count records at base in p, taking the next
// chunk sequence; the records are the concatenation of parts, written to
// the current segment as they are (no copy in between).
func (s *Store) putChunk(ctx *applyCtx, p *partState, base uint64, count int, parts ...[]byte) {
	s.storeChunk(ctx, p.id, base, chunkMeta{appendMs: ctx.nowMs, count: count}, parts...)
}

// storeChunk stores a chunk of m.count records (of m's kind) at base in
// partition pid, appended at m.appendMs, under the next chunk sequence.
func (s *Store) storeChunk(ctx *applyCtx, pid, base uint64, m chunkMeta, parts ...[]byte) {
	seq := s.counters.nextChunkSeq
	s.counters.nextChunkSeq++
	loc, err := s.segs.append(seq, parts...)
	if err != nil {
		ctx.fail(err)
		return
	}
	loc.pid, loc.base = pid, base
	m.seq, m.size = seq, loc.length
	ctx.set(blobKey(seq), loc.encode())
	ctx.set(chunkKey(pid, base), m.encode())
}

// rewriteChunk replaces the records of an existing chunk (erasing one
// message) under the same index entry. The records go under a new
// sequence, since a segment only ever holds the sequences of its own
// range; the old sequence's bytes become garbage of their segment.
func (s *Store) rewriteChunk(ctx *applyCtx, pid, base uint64, m chunkMeta, records []byte) {
	seq := s.counters.nextChunkSeq
	s.counters.nextChunkSeq++
	loc, err := s.segs.append(seq, records)
	if err != nil {
		ctx.fail(err)
		return
	}
	loc.pid, loc.base = pid, base
	ctx.del(blobKey(m.seq))
	m.seq, m.size = seq, loc.length
	ctx.set(blobKey(seq), loc.encode())
	ctx.set(chunkKey(pid, base), m.encode())
}

// deleteChunk removes a chunk's index entry and its records.
func deleteChunk(ctx *applyCtx, pid, base, seq uint64) {
	ctx.del(chunkKey(pid, base))
	ctx.del(blobKey(seq))
}

// deleteChunksOf deletes the records of every chunk of the partitions pids
// (zeros skipped), leaving their index entries to the caller's range
// deletes. The chunks are listed through one iterator opened before any
// delete: an
// iterator opened on the apply batch re-reads every range delete in it, so
// one per partition after deleting the previous ones made deleting a queue
// of 20,000 partitions take 100 s.
func deleteChunksOf(ctx *applyCtx, pids []uint64) {
	var ci *chunkIter
	var seqs []uint64
	for _, pid := range pids {
		if pid == 0 {
			continue
		}
		if ci == nil {
			ci = newChunkIter(ctx.b, ctx.s.segs, pid)
		} else {
			ci.retarget(pid)
		}
		for ok := ci.First(); ok; ok = ci.Next() {
			seqs = append(seqs, ci.Meta().seq)
		}
	}
	if ci == nil {
		return
	}
	ctx.closeIter(ci)
	for _, seq := range seqs {
		ctx.del(blobKey(seq))
	}
}

// errChunkMissing is a chunk index entry whose records are not stored.
var errChunkMissing = errors.New("storage: chunk records missing")

// errBadKeptBatch is a kept Kafka batch that does not decode.
var errBadKeptBatch = errors.New("storage: kept Kafka batch unreadable")

// chunkIter walks one partition's chunks in offset order. Positioning
// reads only the index; Records loads a chunk's bytes.
type chunkIter struct {
	src  iterSource
	segs *segments
	own  bool // src is the apply loop's batch: its records may be pending
	pid  uint64
	idx  *pebble.Iterator
	blob *pebble.Iterator
	meta chunkMeta
	err  error
}

func newChunkIter(src iterSource, segs *segments, pid uint64) *chunkIter {
	_, own := src.(*pebble.Batch) // only the apply loop reads through a batch
	return &chunkIter{src: src, segs: segs, own: own, pid: pid,
		idx: src.NewIter(&pebble.IterOptions{LowerBound: chunkPrefix(pid), UpperBound: chunkPrefix(pid + 1)})}
}

// retarget points c at partition pid, keeping its iterators (and what
// they have loaded) and forgetting a decoding error met before.
func (c *chunkIter) retarget(pid uint64) {
	c.pid, c.meta, c.err = pid, chunkMeta{}, nil
	c.idx.SetBounds(chunkPrefix(pid), chunkPrefix(pid+1))
}

// at decodes the index entry the index iterator stands on.
func (c *chunkIter) at(valid bool) bool {
	if !valid {
		return false
	}
	m, err := decodeChunkMeta(c.idx.Value())
	if err != nil {
		c.err = fmt.Errorf("storage: chunk index %d/%d: %w", c.pid, c.Base(), err)
		return false
	}
	c.meta = m
	return true
}

// SeekLE positions on the chunk whose base is the greatest at or below
// off: the one holding off, when off is stored.
func (c *chunkIter) SeekLE(off uint64) bool { return c.at(c.idx.SeekLT(chunkKey(c.pid, off+1))) }

// Seek positions on the chunk holding off or, when retention removed it,
// on the first chunk left.
func (c *chunkIter) Seek(off uint64) bool { return c.SeekLE(off) || c.First() }

// SeekBase is Seek for an offset that is most likely a chunk's base (a
// log start retention left): a forward seek lands on it, half the cost of
// Seek's backward one, which it falls back to otherwise.
func (c *chunkIter) SeekBase(off uint64) bool {
	if c.at(c.idx.SeekGE(chunkKey(c.pid, off))) && c.Base() == off {
		return true
	}
	return c.err == nil && c.Seek(off)
}

// First positions on the partition's first chunk.
func (c *chunkIter) First() bool { return c.at(c.idx.First()) }

// Last positions on the partition's last chunk.
func (c *chunkIter) Last() bool { return c.at(c.idx.Last()) }

// Next moves to the following chunk.
func (c *chunkIter) Next() bool { return c.at(c.idx.Next()) }

// Prev moves to the preceding chunk.
func (c *chunkIter) Prev() bool { return c.at(c.idx.Prev()) }

// Base is the offset of the current chunk's first record.
func (c *chunkIter) Base() uint64 { return binary.BigEndian.Uint64(c.idx.Key()[9:]) }

// End is the offset after the current chunk's last record.
func (c *chunkIter) End() uint64 { return c.Base() + uint64(c.meta.count) }

// Meta is the current chunk's index entry.
func (c *chunkIter) Meta() chunkMeta { return c.meta }

// Records returns the current chunk's length-prefixed records, read from
// its segment into a buffer of their own (most readers keep record bodies
// of earlier chunks while they read later ones); a kept Kafka batch is
// decoded into stored records.
func (c *chunkIter) Records() ([]byte, error) {
	if !c.meta.kafkaBatch {
		return c.Stored()
	}
	loc, err := c.locate()
	if err != nil {
		return nil, err
	}
	records, err := c.segs.keptRecords(loc, c.meta.count, c.own)
	if err != nil {
		return nil, fmt.Errorf("partition %d offset %d: %w", c.pid, c.Base(), err)
	}
	return records, nil
}

// Stored returns the current chunk's bytes as stored: stored records, or a
// kept Kafka batch when Meta().kafkaBatch.
func (c *chunkIter) Stored() ([]byte, error) {
	loc, err := c.locate()
	if err != nil {
		return nil, err
	}
	stored, err := c.segs.readAs(loc, nil, c.own)
	if err != nil {
		return nil, fmt.Errorf("partition %d offset %d: %w", c.pid, c.Base(), err)
	}
	return stored, nil
}

// locate finds where the current chunk's bytes are.
func (c *chunkIter) locate() (location, error) {
	if c.blob == nil {
		lower := []byte{tagBlob}
		c.blob = c.src.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	}
	key := blobKey(c.meta.seq)
	if !c.blob.SeekGE(key) || string(c.blob.Key()) != string(key) {
		return location{}, fmt.Errorf("%w: partition %d offset %d", errChunkMissing, c.pid, c.Base())
	}
	return decodeLocation(c.blob.Value())
}

// Close releases the iterators and reports a decoding error met on the
// way.
func (c *chunkIter) Close() error {
	err := c.idx.Close()
	if c.blob != nil {
		if berr := c.blob.Close(); err == nil {
			err = berr
		}
	}
	if c.err != nil {
		return c.err
	}
	return err
}
