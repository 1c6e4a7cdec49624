package storage

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// A partition's log is stored as chunks, the records one command appended.
// A chunk's bytes live under a group-wide, ever-growing sequence number
// (blob keys), so the records a memtable flushes never overlap the ranges
// of older tables and the LSM moves tables down its levels instead of
// rewriting payloads at every compaction: each record is written to the
// store once. A per-partition index (chunk keys: partition id, base offset)
// maps offsets to chunks and carries each chunk's append time, record count
// and size, so looking up an offset or a time never reads record bytes.

const tagBlob = 'b' // chunk sequence → the chunk's records

func blobKey(seq uint64) []byte { return appendU64([]byte{tagBlob}, seq) }

// chunkMeta is a chunk index entry's value.
type chunkMeta struct {
	seq      uint64
	appendMs int64 // the replicated clock when the chunk was appended
	count    int   // records in the chunk
	size     int   // bytes of the chunk's records
}

func (m chunkMeta) encode() []byte {
	w := wire.Writer{B: make([]byte, 0, 24)}
	w.U64(m.seq)
	w.Varint(m.appendMs)
	w.Uvarint(uint64(m.count))
	w.Uvarint(uint64(m.size))
	return w.B
}

func decodeChunkMeta(b []byte) (chunkMeta, error) {
	r := wire.NewReader(b)
	m := chunkMeta{seq: r.U64(), appendMs: r.Varint(), count: int(r.Uvarint()), size: int(r.Uvarint())}
	return m, r.Done()
}

// putChunk stores a chunk of count records at base in p, taking the next
// chunk sequence; fill writes exactly size bytes of records into the
// value it is given (straight into the write batch, no copy in between).
func (s *Store) putChunk(ctx *applyCtx, p *partState, base uint64, count, size int, fill func([]byte) []byte) {
	seq := s.counters.nextChunkSeq
	s.counters.nextChunkSeq++
	key := blobKey(seq)
	op := ctx.b.SetDeferred(len(key), size)
	copy(op.Key, key)
	fill(op.Value[:0])
	_ = op.Finish()
	ctx.set(chunkKey(p.id, base), chunkMeta{seq: seq, appendMs: ctx.nowMs, count: count, size: size}.encode())
}

// rewriteChunk replaces the records of an existing chunk (erasing one
// message) under the same sequence and index entry.
func rewriteChunk(ctx *applyCtx, pid, base uint64, m chunkMeta, records []byte) {
	m.size = len(records)
	ctx.set(blobKey(m.seq), records)
	ctx.set(chunkKey(pid, base), m.encode())
}

// deleteChunk removes a chunk's index entry and its records.
func deleteChunk(ctx *applyCtx, pid, base, seq uint64) {
	ctx.del(chunkKey(pid, base))
	ctx.del(blobKey(seq))
}

// deleteChunks removes every chunk of partition pid.
func deleteChunks(ctx *applyCtx, pid uint64) {
	ci := newChunkIter(ctx.b, pid)
	var seqs []uint64
	for ok := ci.First(); ok; ok = ci.Next() {
		seqs = append(seqs, ci.Meta().seq)
	}
	ci.Close()
	for _, seq := range seqs {
		ctx.del(blobKey(seq))
	}
	_ = ctx.b.DeleteRange(chunkPrefix(pid), chunkPrefix(pid+1), nil)
}

// errChunkMissing is a chunk index entry whose records are not stored.
var errChunkMissing = errors.New("storage: chunk records missing")

// chunkIter walks one partition's chunks in offset order. Positioning
// reads only the index; Records loads a chunk's bytes.
type chunkIter struct {
	src  iterSource
	pid  uint64
	idx  *pebble.Iterator
	blob *pebble.Iterator
	meta chunkMeta
	err  error
}

func newChunkIter(src iterSource, pid uint64) *chunkIter {
	return &chunkIter{src: src, pid: pid,
		idx: src.NewIter(&pebble.IterOptions{LowerBound: chunkPrefix(pid), UpperBound: chunkPrefix(pid + 1)})}
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

// Records returns the current chunk's length-prefixed records, valid until
// the iterator moves or closes.
func (c *chunkIter) Records() ([]byte, error) {
	if c.blob == nil {
		lower := []byte{tagBlob}
		c.blob = c.src.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	}
	key := blobKey(c.meta.seq)
	if !c.blob.SeekGE(key) || string(c.blob.Key()) != string(key) {
		return nil, fmt.Errorf("%w: partition %d offset %d", errChunkMissing, c.pid, c.Base())
	}
	return c.blob.Value(), nil
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
