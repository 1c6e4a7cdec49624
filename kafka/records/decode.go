package records

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// crc32c is the Castagnoli table Kafka uses for batch CRCs.
var crc32c = crc32.MakeTable(crc32.Castagnoli)

// DefaultMaxDecompressedBytes is the decompression cap used when
// Limits.MaxDecompressedBytes is zero.
const DefaultMaxDecompressedBytes = 64 << 20

// Limits bound the memory one Decode call may use. Beyond the decompressed
// bytes, the decoded Record values cost up to about 13 times the records
// section for pathological 7-byte records, so callers should also bound the
// input (MaxBatchBytes, and the request size).
type Limits struct {
	// MaxBatchBytes bounds the wire size of one batch, its 12-byte length
	// prefix included (Kafka's max.message.bytes). Zero means no bound
	// beyond the input itself.
	MaxBatchBytes int
	// MaxDecompressedBytes bounds the total size of the decompressed record
	// sections over the whole call. Zero means DefaultMaxDecompressedBytes.
	// Ignored when Budget is set.
	MaxDecompressedBytes int
	// Budget, when set, is drawn on instead, so several calls (the
	// partitions of one produce request) share one bound.
	Budget *Budget
}

// Budget is a decompression bound shared by several Decode calls, one per
// partition of a produce request: bounding each call alone would let a small
// request of many compressed batches inflate to many times the bound. It is
// not safe for concurrent use.
type Budget struct {
	bound int
	left  int
	// over is set once a batch did not fit: nothing more is decompressed,
	// so a request of many bombs costs one overrun, not one per batch.
	over bool
}

// NewBudget returns a budget of bound decompressed bytes
// (DefaultMaxDecompressedBytes when bound is not positive).
func NewBudget(bound int) *Budget {
	if bound <= 0 {
		bound = DefaultMaxDecompressedBytes
	}
	return &Budget{bound: bound, left: bound}
}

// Left is what is left to decompress.
func (b *Budget) Left() int {
	if b.over {
		return 0
	}
	return b.left
}

// inflate decompresses one batch's records section against the budget.
// fresh says the Decode call began with the whole budget: if its batches do
// not fit then, they never will (ErrTooLarge); otherwise earlier calls' use
// is to blame and they may fit another time (ErrOverBudget).
func (b *Budget) inflate(c Compression, section []byte, fresh bool) ([]byte, error) {
	if b.over {
		return nil, fmt.Errorf("%w: earlier batches of the request used the %d byte budget up", ErrOverBudget, b.bound)
	}
	out, err := decompress(c, section, b.left, b.bound)
	if errors.Is(err, ErrTooLarge) {
		b.over = true
		if !fresh {
			return nil, fmt.Errorf("%w: %d of its %d bytes were left (%v)", ErrOverBudget, b.left, b.bound, err)
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	b.left -= len(out)
	return out, nil
}

// Decode parses data as one or more concatenated RecordBatch v2, verifying
// every CRC, length and count and decompressing compressed batches.
//
// The returned records alias data (uncompressed batches) or buffers Decode
// allocated (compressed ones): callers that reuse data must copy what they
// keep. Errors wrap ErrCorrupt, ErrUnsupportedMagic,
// ErrUnsupportedCompression or ErrTooLarge and say which batch failed.
func Decode(data []byte, limits Limits) ([]Batch, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: no record batch", ErrCorrupt)
	}
	budget := limits.Budget
	if budget == nil {
		budget = NewBudget(limits.MaxDecompressedBytes)
	}
	fresh := budget.Left() == budget.bound
	var batches []Batch
	for pos := 0; pos < len(data); {
		var b Batch
		n, err := decodeBatch(data[pos:], &b, limits.MaxBatchBytes, budget, fresh)
		if err != nil {
			return nil, fmt.Errorf("batch %d at byte %d: %w", len(batches), pos, err)
		}
		batches = append(batches, b)
		pos += n
	}
	return batches, nil
}

// PeekHeader reads the header of the first batch in data without checking the
// CRC or touching the records. It is for callers that only route or size
// batches (for example to answer MESSAGE_TOO_LARGE before decoding).
func PeekHeader(data []byte) (Batch, error) {
	var b Batch
	if _, err := parseHeader(data, &b); err != nil {
		return Batch{}, err
	}
	return b, nil
}

// CheckBatch checks that data is exactly one batch whose CRC-32C matches,
// without decompressing or decoding its records: what a reader of a batch
// it was handed whole can afford on a hot path.
func CheckBatch(data []byte) (Batch, error) {
	var b Batch
	size, err := parseHeader(data, &b)
	switch {
	case err != nil:
		return Batch{}, err
	case size != len(data):
		return Batch{}, fmt.Errorf("%w: %d bytes after the batch", ErrCorrupt, len(data)-size)
	}
	if err := checkCRC(data, b.CRC); err != nil {
		return Batch{}, err
	}
	return b, nil
}

// checkCRC checks a whole batch's CRC-32C (from its attributes on) against
// the header's.
func checkCRC(batch []byte, want uint32) error {
	if got := crc32.Checksum(batch[offAttributes:], crc32c); got != want {
		return fmt.Errorf("%w: crc32c is %08x, header says %08x", ErrCorrupt, got, want)
	}
	return nil
}

// parseHeader fills the header fields of b from data and returns the wire
// size of the batch, after checking the magic and that the batch fits.
func parseHeader(data []byte, b *Batch) (int, error) {
	if len(data) > offMagic {
		if magic := int8(data[offMagic]); magic != Magic {
			return 0, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, magic)
		}
	}
	if len(data) < HeaderSize {
		return 0, fmt.Errorf("%w: %d bytes left, a batch header needs %d", ErrCorrupt, len(data), HeaderSize)
	}
	batchLength := int32(binary.BigEndian.Uint32(data[offBatchLength:]))
	if batchLength < HeaderSize-lengthPrefixSize {
		return 0, fmt.Errorf("%w: batch length %d is shorter than a header", ErrCorrupt, batchLength)
	}
	size := lengthPrefixSize + int(batchLength)
	if size > len(data) {
		return 0, fmt.Errorf("%w: batch length %d overruns the %d bytes left", ErrCorrupt, batchLength, len(data)-lengthPrefixSize)
	}
	b.BaseOffset = int64(binary.BigEndian.Uint64(data[offBaseOffset:]))
	b.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(data[offLeaderEpoch:]))
	b.CRC = binary.BigEndian.Uint32(data[offCRC:])
	b.Attributes = Attributes(binary.BigEndian.Uint16(data[offAttributes:]))
	b.LastOffsetDelta = int32(binary.BigEndian.Uint32(data[offLastOffsetDelta:]))
	b.FirstTimestamp = int64(binary.BigEndian.Uint64(data[offFirstTimestamp:]))
	b.MaxTimestamp = int64(binary.BigEndian.Uint64(data[offMaxTimestamp:]))
	b.ProducerID = int64(binary.BigEndian.Uint64(data[offProducerID:]))
	b.ProducerEpoch = int16(binary.BigEndian.Uint16(data[offProducerEpoch:]))
	b.BaseSequence = int32(binary.BigEndian.Uint32(data[offBaseSequence:]))
	b.NumRecords = int32(binary.BigEndian.Uint32(data[offRecordCount:]))
	b.WireSize = size
	return size, nil
}

// decodeBatch decodes the batch at the start of data into b and returns its
// wire size, decompressing against budget (fresh: see Budget.inflate).
func decodeBatch(data []byte, b *Batch, maxBatch int, budget *Budget, fresh bool) (int, error) {
	size, err := parseHeader(data, b)
	if err != nil {
		return 0, err
	}
	if maxBatch > 0 && size > maxBatch {
		return 0, fmt.Errorf("%w: batch is %d bytes, the limit is %d", ErrTooLarge, size, maxBatch)
	}
	batch := data[:size]
	if err := checkCRC(batch, b.CRC); err != nil {
		return 0, err
	}
	if b.NumRecords < 0 {
		return 0, fmt.Errorf("%w: negative record count %d", ErrCorrupt, b.NumRecords)
	}
	if !b.Compression().valid() {
		return 0, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, int8(b.Compression()))
	}
	section := batch[HeaderSize:]
	if c := b.Compression(); c != CompressionNone {
		section, err = budget.inflate(c, section, fresh)
		if err != nil {
			return 0, err
		}
	}
	// Every record takes at least minRecordSize bytes, so a count the
	// section cannot hold is refused before anything is allocated for it.
	if int64(b.NumRecords) > int64(len(section)/minRecordSize) {
		return 0, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorrupt, b.NumRecords, len(section))
	}
	if b.NumRecords > 0 {
		b.Records = make([]Record, b.NumRecords)
	}
	r := reader{buf: section}
	for i := range b.Records {
		if err := r.record(&b.Records[i], b.FirstTimestamp); err != nil {
			return 0, fmt.Errorf("record %d: %w", i, err)
		}
	}
	if len(r.buf) != 0 {
		return 0, fmt.Errorf("%w: %d bytes after the last of %d records", ErrCorrupt, len(r.buf), b.NumRecords)
	}
	b.Raw, b.InflatedSize = batch, len(section)
	return size, nil
}

// reader walks a records section. Every method checks bounds; the first
// failure is returned and the caller stops.
type reader struct{ buf []byte }

func (r *reader) varlong() (int64, error) {
	v, n := binary.Varint(r.buf)
	if n <= 0 {
		return 0, fmt.Errorf("%w: bad varint", ErrCorrupt)
	}
	r.buf = r.buf[n:]
	return v, nil
}

func (r *reader) varint() (int32, error) {
	v, err := r.varlong()
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("%w: varint %d overflows int32", ErrCorrupt, v)
	}
	return int32(v), nil
}

// bytes reads a varint length and that many bytes; length -1 is null (nil)
// and a zero length is a non-nil empty slice.
func (r *reader) bytes() ([]byte, error) {
	n, err := r.varint()
	switch {
	case err != nil:
		return nil, err
	case n == -1:
		return nil, nil
	case n < -1 || int(n) > len(r.buf):
		return nil, fmt.Errorf("%w: byte field length %d with %d bytes left", ErrCorrupt, n, len(r.buf))
	}
	b := r.buf[:n:n]
	r.buf = r.buf[n:]
	return b, nil
}

func (r *reader) record(rec *Record, firstTimestamp int64) error {
	length, err := r.varint()
	if err != nil {
		return err
	}
	if length < 0 || int(length) > len(r.buf) {
		return fmt.Errorf("%w: record length %d with %d bytes left", ErrCorrupt, length, len(r.buf))
	}
	body := reader{buf: r.buf[:length]}
	r.buf = r.buf[length:]

	if len(body.buf) == 0 {
		return fmt.Errorf("%w: empty record", ErrCorrupt)
	}
	body.buf = body.buf[1:] // record attributes: unused by Kafka
	tsDelta, err := body.varlong()
	if err != nil {
		return err
	}
	rec.Timestamp = firstTimestamp + tsDelta
	if rec.OffsetDelta, err = body.varint(); err != nil {
		return err
	}
	if rec.Key, err = body.bytes(); err != nil {
		return err
	}
	if rec.Value, err = body.bytes(); err != nil {
		return err
	}
	count, err := body.varint()
	if err != nil {
		return err
	}
	// A header is at least two bytes (key length, value length).
	if count < 0 || int(count) > len(body.buf)/2 {
		return fmt.Errorf("%w: header count %d with %d bytes left", ErrCorrupt, count, len(body.buf))
	}
	if count > 0 {
		rec.Headers = make([]Header, count)
	}
	for i := range rec.Headers {
		key, err := body.bytes()
		if err != nil {
			return err
		}
		if key == nil {
			return fmt.Errorf("%w: null header key", ErrCorrupt)
		}
		rec.Headers[i].Key = string(key)
		if rec.Headers[i].Value, err = body.bytes(); err != nil {
			return err
		}
	}
	if len(body.buf) != 0 {
		return fmt.Errorf("%w: %d bytes left inside the record", ErrCorrupt, len(body.buf))
	}
	return nil
}
