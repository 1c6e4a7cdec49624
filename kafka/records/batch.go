package records

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps exactly one of
// them, so a caller maps errors to Kafka codes with errors.Is.
var (
	// ErrCorrupt: the bytes are not a well-formed RecordBatch v2 (bad CRC,
	// length, count, varint, or a compressed payload that does not inflate).
	ErrCorrupt = errors.New("records: corrupt record batch")
	// ErrUnsupportedMagic: a magic 0 or 1 message set (or an unknown magic).
	ErrUnsupportedMagic = errors.New("records: unsupported message format; only RecordBatch v2 (magic 2) is accepted")
	// ErrUnsupportedCompression: the attributes name a codec other than
	// none, gzip, snappy, lz4 or zstd.
	ErrUnsupportedCompression = errors.New("records: unsupported compression codec")
	// ErrTooLarge: a batch is larger than Limits.MaxBatchBytes, or the
	// decompressed records exceed Limits.MaxDecompressedBytes.
	ErrTooLarge = errors.New("records: record batch too large")
	// ErrOverBudget: a batch decompresses past what is left of a Budget
	// that earlier batches (of the same request) drew on. It might fit in
	// a budget of its own: unlike ErrTooLarge it is worth sending again.
	ErrOverBudget = errors.New("records: decompressed batches over the request's budget")
	// ErrInvalidInput: the caller asked the encoder for something a
	// RecordBatch cannot carry (no records, offsets out of order, ...).
	ErrInvalidInput = errors.New("records: invalid batch to encode")
)

// Magic is the only message format version this package speaks.
const Magic int8 = 2

// Sizes of the fixed parts of a RecordBatch v2.
const (
	// HeaderSize is the size of a batch header: baseOffset through
	// recordCount. The records follow it.
	HeaderSize = 61
	// lengthPrefixSize is baseOffset + batchLength, the part of the header
	// that batchLength does not count.
	lengthPrefixSize = 12
	// minRecordSize is the smallest encoding of one record: a length
	// varint, attributes, timestamp delta, offset delta, key length, value
	// length and header count, one byte each.
	minRecordSize = 7
)

// Byte offsets of the header fields.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57
)

// Compression is the codec of a batch (attribute bits 0-2).
type Compression int8

// The codecs Kafka defines.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("unknown(%d)", int8(c))
}

func (c Compression) valid() bool { return c >= CompressionNone && c <= CompressionZstd }

// TimestampType says what the record timestamps mean (attribute bit 3).
type TimestampType int8

const (
	// CreateTime: the producer's timestamps.
	CreateTime TimestampType = 0
	// LogAppendTime: the broker's append time, carried in MaxTimestamp.
	LogAppendTime TimestampType = 1
)

// Attributes is the int16 attributes field of a batch header.
type Attributes int16

const (
	attrCompressionMask = 0x07
	attrLogAppendTime   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
)

// Compression returns the codec bits.
func (a Attributes) Compression() Compression { return Compression(a & attrCompressionMask) }

// TimestampType returns the timestamp type bit.
func (a Attributes) TimestampType() TimestampType {
	if a&attrLogAppendTime != 0 {
		return LogAppendTime
	}
	return CreateTime
}

// IsTransactional reports whether the batch belongs to a transaction.
func (a Attributes) IsTransactional() bool { return a&attrTransactional != 0 }

// IsControl reports whether the batch holds a control record (a transaction
// marker) instead of data.
func (a Attributes) IsControl() bool { return a&attrControl != 0 }

func makeAttributes(c Compression, ts TimestampType, transactional, control bool) Attributes {
	a := Attributes(c) & attrCompressionMask
	if ts == LogAppendTime {
		a |= attrLogAppendTime
	}
	if transactional {
		a |= attrTransactional
	}
	if control {
		a |= attrControl
	}
	return a
}

// Header is one record header. Kafka header keys are never null; a nil Value
// is a null value and stays distinct from an empty one.
type Header struct {
	Key   string
	Value []byte
}

// Record is one record of a batch.
//
// Key and Value keep null (nil) distinct from empty (non-nil, length 0). After
// decoding they alias the input or the decompressed buffer.
type Record struct {
	// OffsetDelta is the record's offset minus the batch's BaseOffset.
	OffsetDelta int32
	// Timestamp is the absolute timestamp in milliseconds (FirstTimestamp
	// plus the record's delta). For a LogAppendTime batch Kafka readers use
	// the batch's MaxTimestamp instead.
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []Header
}

// Batch is one decoded RecordBatch v2.
type Batch struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Attributes           Attributes
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	// NumRecords is the record count from the header; after a successful
	// decode it equals len(Records).
	NumRecords int32
	// CRC is the CRC-32C from the header (already verified).
	CRC uint32
	// WireSize is the size of the batch on the wire, length prefix
	// included: what Kafka compares with max.message.bytes.
	WireSize int
	// Raw is the batch's wire bytes (length prefix included), aliasing the
	// decoded input: what a broker keeps to serve the batch as produced.
	Raw []byte
	// InflatedSize is the size of the records section once decompressed
	// (the section itself for an uncompressed batch): the bound a reader
	// of Raw decompresses it under.
	InflatedSize int
	Records      []Record
}

// Compression is shorthand for b.Attributes.Compression().
func (b *Batch) Compression() Compression { return b.Attributes.Compression() }

// TimestampType is shorthand for b.Attributes.TimestampType().
func (b *Batch) TimestampType() TimestampType { return b.Attributes.TimestampType() }

// IsTransactional is shorthand for b.Attributes.IsTransactional().
func (b *Batch) IsTransactional() bool { return b.Attributes.IsTransactional() }

// IsControl is shorthand for b.Attributes.IsControl().
func (b *Batch) IsControl() bool { return b.Attributes.IsControl() }

// LastOffset is the offset of the batch's last record as the header says.
func (b *Batch) LastOffset() int64 { return b.BaseOffset + int64(b.LastOffsetDelta) }
