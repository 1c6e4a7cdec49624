package records

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"sync"
)

// NoProducerID, NoProducerEpoch and NoSequence are the header values of a
// batch from a producer that is neither idempotent nor transactional.
const (
	NoProducerID    int64 = -1
	NoProducerEpoch int16 = -1
	NoSequence      int32 = -1
)

// BatchOptions are the header fields of a data batch that the caller chooses;
// the encoder derives the rest (length, CRC, count, last offset delta,
// timestamps) from the records.
type BatchOptions struct {
	BaseOffset int64
	// PartitionLeaderEpoch is -1 when the broker does not track epochs.
	PartitionLeaderEpoch int32
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	Transactional        bool
	Compression          Compression
	TimestampType        TimestampType
	// LogAppendTime is written as the batch's MaxTimestamp when
	// TimestampType is LogAppendTime; it is ignored otherwise.
	LogAppendTime int64
}

// NewBatchOptions returns options for a plain (non-idempotent, uncompressed,
// CreateTime) batch at baseOffset; adjust the fields from there.
func NewBatchOptions(baseOffset int64) BatchOptions {
	return BatchOptions{
		BaseOffset:           baseOffset,
		PartitionLeaderEpoch: -1,
		ProducerID:           NoProducerID,
		ProducerEpoch:        NoProducerEpoch,
		BaseSequence:         NoSequence,
	}
}

// scratchBuffers hold the uncompressed records section of a compressed batch
// while it is being compressed.
var scratchBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// maxPooledScratch keeps one huge batch from pinning its buffer in the pool.
const maxPooledScratch = 4 << 20

// AppendBatch appends one RecordBatch v2 holding recs to dst and returns the
// extended slice. Record OffsetDeltas must start at 0 or more and strictly
// increase (gaps are allowed: they are what compaction or deletion leaves);
// FirstTimestamp is the first record's timestamp and MaxTimestamp the largest.
//
// Uncompressed batches are written straight into dst: with enough capacity
// the call allocates nothing. Compressed ones go through a pooled scratch
// buffer and pooled compressors. On error dst is returned unchanged.
func AppendBatch(dst []byte, opts BatchOptions, recs []Record) ([]byte, error) {
	if len(recs) == 0 {
		return dst, fmt.Errorf("%w: a batch needs at least one record", ErrInvalidInput)
	}
	if len(recs) > math.MaxInt32 {
		return dst, fmt.Errorf("%w: %d records in one batch", ErrInvalidInput, len(recs))
	}
	if !opts.Compression.valid() {
		return dst, fmt.Errorf("%w: %s", ErrUnsupportedCompression, opts.Compression)
	}
	first := recs[0].Timestamp
	maxTS := first
	prev := int32(-1)
	for i := range recs {
		r := &recs[i]
		if r.OffsetDelta <= prev {
			return dst, fmt.Errorf("%w: record %d has offset delta %d after %d", ErrInvalidInput, i, r.OffsetDelta, prev)
		}
		prev = r.OffsetDelta
		maxTS = max(maxTS, r.Timestamp)
	}
	if opts.TimestampType == LogAppendTime {
		maxTS = opts.LogAppendTime
	}

	start := len(dst)
	dst = appendHeader(dst, header{
		baseOffset:      opts.BaseOffset,
		leaderEpoch:     opts.PartitionLeaderEpoch,
		attributes:      makeAttributes(opts.Compression, opts.TimestampType, opts.Transactional, false),
		lastOffsetDelta: prev,
		firstTimestamp:  first,
		maxTimestamp:    maxTS,
		producerID:      opts.ProducerID,
		producerEpoch:   opts.ProducerEpoch,
		baseSequence:    opts.BaseSequence,
		count:           int32(len(recs)),
	})

	if opts.Compression == CompressionNone {
		dst = appendRecords(dst, recs, first)
	} else {
		bp := scratchBuffers.Get().(*[]byte)
		raw := appendRecords((*bp)[:0], recs, first)
		var err error
		dst, err = appendCompressed(dst, raw, opts.Compression)
		if cap(raw) <= maxPooledScratch {
			*bp = raw[:0]
			scratchBuffers.Put(bp)
		}
		if err != nil {
			return dst[:start], fmt.Errorf("%w: compressing: %w", ErrInvalidInput, err)
		}
	}
	if len(dst)-start-lengthPrefixSize > math.MaxInt32 {
		return dst[:start], fmt.Errorf("%w: batch of %d bytes", ErrTooLarge, len(dst)-start)
	}
	finishBatch(dst[start:])
	return dst, nil
}

// header holds the header fields appendHeader writes.
type header struct {
	baseOffset      int64
	leaderEpoch     int32
	attributes      Attributes
	lastOffsetDelta int32
	firstTimestamp  int64
	maxTimestamp    int64
	producerID      int64
	producerEpoch   int16
	baseSequence    int32
	count           int32
}

// appendHeader appends a batch header with the length and CRC left zero;
// finishBatch fills them once the records are in place.
func appendHeader(dst []byte, h header) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.baseOffset))
	dst = binary.BigEndian.AppendUint32(dst, 0) // batchLength, see finishBatch
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.leaderEpoch))
	dst = append(dst, byte(Magic))
	dst = binary.BigEndian.AppendUint32(dst, 0) // crc, see finishBatch
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.attributes))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.lastOffsetDelta))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.firstTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.maxTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.producerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.producerEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.baseSequence))
	return binary.BigEndian.AppendUint32(dst, uint32(h.count))
}

// finishBatch writes the batch length and the CRC of a complete batch.
func finishBatch(batch []byte) {
	binary.BigEndian.PutUint32(batch[offBatchLength:], uint32(len(batch)-lengthPrefixSize))
	binary.BigEndian.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], crc32c))
}

// appendRecords appends the records section (no count; the header has it).
func appendRecords(dst []byte, recs []Record, firstTimestamp int64) []byte {
	for i := range recs {
		r := &recs[i]
		tsDelta := r.Timestamp - firstTimestamp
		dst = binary.AppendVarint(dst, int64(recordBodySize(r, tsDelta)))
		dst = append(dst, 0) // record attributes: unused by Kafka
		dst = binary.AppendVarint(dst, tsDelta)
		dst = binary.AppendVarint(dst, int64(r.OffsetDelta))
		dst = appendNullableBytes(dst, r.Key)
		dst = appendNullableBytes(dst, r.Value)
		dst = binary.AppendVarint(dst, int64(len(r.Headers)))
		for j := range r.Headers {
			h := &r.Headers[j]
			dst = binary.AppendVarint(dst, int64(len(h.Key)))
			dst = append(dst, h.Key...)
			dst = appendNullableBytes(dst, h.Value)
		}
	}
	return dst
}

// recordBodySize is the size of a record after its length varint.
func recordBodySize(r *Record, tsDelta int64) int {
	n := 1 + varintSize(tsDelta) + varintSize(int64(r.OffsetDelta)) +
		nullableBytesSize(r.Key) + nullableBytesSize(r.Value) +
		varintSize(int64(len(r.Headers)))
	for j := range r.Headers {
		h := &r.Headers[j]
		n += varintSize(int64(len(h.Key))) + len(h.Key) + nullableBytesSize(h.Value)
	}
	return n
}

func appendNullableBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

func nullableBytesSize(b []byte) int {
	if b == nil {
		return 1 // varint -1
	}
	return varintSize(int64(len(b))) + len(b)
}

// varintSize is the length of the zig-zag varint encoding of v.
func varintSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	return (bits.Len64(u|1) + 6) / 7
}

// SetBaseOffset writes the base offset and partition leader epoch of the
// batch at the start of batch: the two header fields a broker assigns,
// which the CRC does not cover, so a stored batch goes out as produced.
func SetBaseOffset(batch []byte, baseOffset int64, leaderEpoch int32) {
	binary.BigEndian.PutUint64(batch[offBaseOffset:], uint64(baseOffset))
	binary.BigEndian.PutUint32(batch[offLeaderEpoch:], uint32(leaderEpoch))
}
