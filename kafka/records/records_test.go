package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"testing"
)

var allCodecs = []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}

// sampleRecords covers null versus empty keys, values and header values,
// offset gaps and timestamps before the first one.
func sampleRecords() []Record {
	return []Record{
		{OffsetDelta: 0, Timestamp: 1_700_000_000_000, Key: []byte("k0"), Value: []byte("v0"),
			Headers: []Header{{Key: "h", Value: []byte("x")}, {Key: "null", Value: nil}, {Key: "", Value: []byte{}}}},
		{OffsetDelta: 1, Timestamp: 1_700_000_000_500, Key: nil, Value: []byte{}},
		{OffsetDelta: 2, Timestamp: 1_699_999_999_000, Key: []byte{}, Value: nil},
		{OffsetDelta: 7, Timestamp: 1_700_000_001_000, Key: []byte("gap"), Value: bytes.Repeat([]byte("queen "), 3000)},
	}
}

func idempotentOptions(codec Compression) BatchOptions {
	o := NewBatchOptions(1234)
	o.PartitionLeaderEpoch = 5
	o.ProducerID = 99
	o.ProducerEpoch = 3
	o.BaseSequence = 42
	o.Transactional = true
	o.Compression = codec
	return o
}

// sameRecords compares records, including the nil/empty distinction that
// reflect.DeepEqual already makes for byte slices.
func sameRecords(t *testing.T, want, got []Record) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if len(w.Headers) == 0 {
			w.Headers = nil
		}
		if !reflect.DeepEqual(w, g) {
			t.Fatalf("record %d:\n got  %+v\n want %+v", i, g, w)
		}
	}
}

func TestRoundTripAllCodecs(t *testing.T) {
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			recs := sampleRecords()
			opts := idempotentOptions(codec)
			prefix := []byte("prefix")
			buf, err := AppendBatch(append([]byte(nil), prefix...), opts, recs)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(buf, prefix) {
				t.Fatal("AppendBatch clobbered the caller's bytes")
			}
			batches, err := Decode(buf[len(prefix):], Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if len(batches) != 1 {
				t.Fatalf("got %d batches", len(batches))
			}
			b := batches[0]
			if b.BaseOffset != 1234 || b.PartitionLeaderEpoch != 5 || b.ProducerID != 99 ||
				b.ProducerEpoch != 3 || b.BaseSequence != 42 || !b.IsTransactional() || b.IsControl() ||
				b.Compression() != codec || b.TimestampType() != CreateTime {
				t.Fatalf("header: %+v", b)
			}
			if b.NumRecords != 4 || b.LastOffsetDelta != 7 || b.LastOffset() != 1241 {
				t.Fatalf("count %d, last offset delta %d", b.NumRecords, b.LastOffsetDelta)
			}
			if b.FirstTimestamp != 1_700_000_000_000 || b.MaxTimestamp != 1_700_000_001_000 {
				t.Fatalf("timestamps %d..%d", b.FirstTimestamp, b.MaxTimestamp)
			}
			if b.WireSize != len(buf)-len(prefix) {
				t.Fatalf("wire size %d, encoded %d", b.WireSize, len(buf)-len(prefix))
			}
			sameRecords(t, recs, b.Records)
			if b.Records[1].Key != nil || b.Records[1].Value == nil || b.Records[2].Key == nil || b.Records[2].Value != nil {
				t.Fatal("null and empty were conflated")
			}
		})
	}
}

func TestConcatenatedBatches(t *testing.T) {
	var buf []byte
	for i, codec := range allCodecs {
		var err error
		buf, err = AppendBatch(buf, idempotentOptions(codec), sampleRecords()[:i%3+1])
		if err != nil {
			t.Fatal(err)
		}
	}
	buf = AppendControlBatch(buf, ControlMarker{BaseOffset: 9, ProducerID: 99, ProducerEpoch: 3, Type: ControlCommit, CoordinatorEpoch: 11, Timestamp: 5})
	batches, err := Decode(buf, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) != len(allCodecs)+1 {
		t.Fatalf("got %d batches", len(batches))
	}
	for i, codec := range allCodecs {
		if batches[i].Compression() != codec || len(batches[i].Records) != i%3+1 {
			t.Fatalf("batch %d: %s with %d records", i, batches[i].Compression(), len(batches[i].Records))
		}
	}
}

func TestControlBatch(t *testing.T) {
	for _, typ := range []ControlType{ControlAbort, ControlCommit} {
		m := ControlMarker{BaseOffset: 77, PartitionLeaderEpoch: -1, ProducerID: 5, ProducerEpoch: 2, Type: typ, CoordinatorEpoch: 8, Timestamp: 1_700_000_000_000}
		buf := AppendControlBatch(nil, m)
		if len(buf) != HeaderSize+controlRecordSize {
			t.Fatalf("control batch is %d bytes, want %d", len(buf), HeaderSize+controlRecordSize)
		}
		batches, err := Decode(buf, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		b := batches[0]
		if !b.IsControl() || !b.IsTransactional() || b.ProducerID != 5 || b.ProducerEpoch != 2 ||
			b.BaseSequence != NoSequence || b.BaseOffset != 77 || len(b.Records) != 1 {
			t.Fatalf("control batch header %+v", b)
		}
		gotType, epoch, err := ParseControlRecord(&b.Records[0])
		if err != nil || gotType != typ || epoch != 8 {
			t.Fatalf("control record: %v %d %v", gotType, epoch, err)
		}
	}
	if _, _, err := ParseControlRecord(&Record{Key: []byte{0, 1, 0, 0}}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("unknown control key version: %v", err)
	}
}

func TestLogAppendTime(t *testing.T) {
	opts := NewBatchOptions(0)
	opts.TimestampType = LogAppendTime
	opts.LogAppendTime = 42_000
	buf, err := AppendBatch(nil, opts, []Record{{Timestamp: 1, Value: []byte("a")}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decode(buf, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if b[0].TimestampType() != LogAppendTime || b[0].MaxTimestamp != 42_000 {
		t.Fatalf("got %v %d", b[0].TimestampType(), b[0].MaxTimestamp)
	}
}

func TestAppendBatchRefusesBadInput(t *testing.T) {
	cases := map[string]struct {
		opts BatchOptions
		recs []Record
		want error
	}{
		"no records":        {NewBatchOptions(0), nil, ErrInvalidInput},
		"offsets backwards": {NewBatchOptions(0), []Record{{OffsetDelta: 1}, {OffsetDelta: 1}}, ErrInvalidInput},
		"negative offset":   {NewBatchOptions(0), []Record{{OffsetDelta: -1}}, ErrInvalidInput},
		"unknown codec":     {BatchOptions{Compression: 6}, []Record{{}}, ErrUnsupportedCompression},
	}
	for name, c := range cases {
		dst := []byte("keep")
		out, err := AppendBatch(dst, c.opts, c.recs)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
		if string(out) != "keep" {
			t.Errorf("%s: dst changed to %q", name, out)
		}
	}
}

// reencode fixes the length and CRC after a test edits a batch.
func reencode(b []byte) []byte {
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-lengthPrefixSize))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], crc32c))
	return b
}

func TestDecodeRefusesMalformedBatches(t *testing.T) {
	good, err := AppendBatch(nil, NewBatchOptions(0), sampleRecords()[:2])
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := map[string]struct {
		data []byte
		want error
	}{
		"empty":            {nil, ErrCorrupt},
		"truncated header": {good[:40], ErrCorrupt},
		"truncated batch":  {good[:len(good)-1], ErrCorrupt},
		"crc flipped":      {edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrCorrupt},
		"magic 0":          {edit(func(b []byte) []byte { b[offMagic] = 0; return b }), ErrUnsupportedMagic},
		"magic 1":          {edit(func(b []byte) []byte { b[offMagic] = 1; return b }), ErrUnsupportedMagic},
		"short magic 1":    {edit(func(b []byte) []byte { b[offMagic] = 1; return b[:30] }), ErrUnsupportedMagic},
		"codec 5": {edit(func(b []byte) []byte {
			b[offAttributes+1] |= 5
			return reencode(b)
		}), ErrUnsupportedCompression},
		"length too small": {edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offBatchLength:], 10)
			return b
		}), ErrCorrupt},
		"count too high": {edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offRecordCount:], 3)
			return reencode(b)
		}), ErrCorrupt},
		"count huge": {edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offRecordCount:], 1<<31-1)
			return reencode(b)
		}), ErrCorrupt},
		"count negative": {edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offRecordCount:], 0xffffffff)
			return reencode(b)
		}), ErrCorrupt},
		"count too low": {edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offRecordCount:], 1)
			return reencode(b)
		}), ErrCorrupt},
		"trailing garbage in batch": {edit(func(b []byte) []byte {
			return reencode(append(b, 0))
		}), ErrCorrupt},
		"trailing partial batch": {append(bytes.Clone(good), 0, 0, 0), ErrCorrupt},
		"record length overrun": {edit(func(b []byte) []byte {
			b[HeaderSize] = 0x7e // varint 63, more than the record holds
			return reencode(b)
		}), ErrCorrupt},
	}
	for name, c := range cases {
		_, err := Decode(c.data, Limits{})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
	}
}

func TestDecodeNullHeaderKeyIsCorrupt(t *testing.T) {
	// One record whose single header has key length -1.
	var body []byte
	body = append(body, 0)               // attributes
	body = binary.AppendVarint(body, 0)  // ts delta
	body = binary.AppendVarint(body, 0)  // offset delta
	body = binary.AppendVarint(body, -1) // null key
	body = binary.AppendVarint(body, -1) // null value
	body = binary.AppendVarint(body, 1)  // one header
	body = binary.AppendVarint(body, -1) // null header key
	body = binary.AppendVarint(body, -1) // null header value
	records := binary.AppendVarint(nil, int64(len(body)))
	records = append(records, body...)
	b := appendHeader(nil, header{count: 1, producerID: -1, producerEpoch: -1, baseSequence: -1})
	b = reencode(append(b, records...))
	if _, err := Decode(b, Limits{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v", err)
	}
}

func TestMaxBatchBytes(t *testing.T) {
	buf, err := AppendBatch(nil, NewBatchOptions(0), sampleRecords())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(buf, Limits{MaxBatchBytes: len(buf)}); err != nil {
		t.Fatalf("batch at the limit: %v", err)
	}
	if _, err := Decode(buf, Limits{MaxBatchBytes: len(buf) - 1}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("batch over the limit: %v", err)
	}
	h, err := PeekHeader(buf)
	if err != nil || h.WireSize != len(buf) || h.NumRecords != 4 {
		t.Fatalf("PeekHeader: %+v %v", h, err)
	}
}

// TestZipBombs checks that every codec stops at the cap: 8 MiB of zeros
// compresses to a few KiB, and a 1 MiB cap must refuse it.
func TestZipBombs(t *testing.T) {
	bomb := []Record{{Value: make([]byte, 8<<20)}}
	for _, codec := range allCodecs[1:] {
		t.Run(codec.String(), func(t *testing.T) {
			opts := NewBatchOptions(0)
			opts.Compression = codec
			buf, err := AppendBatch(nil, opts, bomb)
			if err != nil {
				t.Fatal(err)
			}
			if len(buf) > 1<<20 {
				t.Fatalf("bomb did not compress: %d bytes", len(buf))
			}
			if _, err := Decode(buf, Limits{MaxDecompressedBytes: 1 << 20}); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("got %v, want ErrTooLarge", err)
			}
			if _, err := Decode(buf, Limits{MaxDecompressedBytes: 9 << 20}); err != nil {
				t.Fatalf("under the cap: %v", err)
			}
		})
	}
	// The cap is for the whole call: two batches of 600 KiB with a 1 MiB cap.
	half := []Record{{Value: make([]byte, 600<<10)}}
	var two []byte
	for range 2 {
		opts := NewBatchOptions(0)
		opts.Compression = CompressionGzip
		var err error
		if two, err = AppendBatch(two, opts, half); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Decode(two, Limits{MaxDecompressedBytes: 1 << 20}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("cap over two batches: %v", err)
	}
}

// TestSharedBudget: calls sharing a Budget share its bound. A call whose
// batches overrun what earlier calls left gets ErrOverBudget (they may fit
// on their own); once over, no later call decompresses anything; a call that
// began with the whole budget and overran gets ErrTooLarge.
func TestSharedBudget(t *testing.T) {
	batch := func(size int) []byte {
		opts := NewBatchOptions(0)
		opts.Compression = CompressionGzip
		b, err := AppendBatch(nil, opts, []Record{{Value: make([]byte, size)}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	budget := NewBudget(1 << 20)
	for i := range 3 {
		if _, err := Decode(batch(300<<10), Limits{Budget: budget}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if left := budget.Left(); left > 1<<20-900<<10 || left < 1<<20-901<<10 {
		t.Fatalf("left %d", left)
	}
	_, err := Decode(batch(300<<10), Limits{Budget: budget})
	if !errors.Is(err, ErrOverBudget) || errors.Is(err, ErrTooLarge) {
		t.Fatalf("over what is left: %v", err)
	}
	if _, err := Decode(batch(1<<10), Limits{Budget: budget}); !errors.Is(err, ErrOverBudget) || budget.Left() != 0 {
		t.Fatalf("after the budget ran out: %v, %d left", err, budget.Left())
	}
	// Uncompressed batches are the caller's input, not inflation.
	plain, err := AppendBatch(nil, NewBatchOptions(0), []Record{{Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(plain, Limits{Budget: budget}); err != nil {
		t.Fatalf("uncompressed: %v", err)
	}
	if _, err := Decode(batch(2<<20), Limits{Budget: NewBudget(1 << 20)}); !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrOverBudget) {
		t.Fatalf("over the whole bound: %v", err)
	}
}

func TestCorruptCompressedPayloads(t *testing.T) {
	for _, codec := range allCodecs[1:] {
		opts := NewBatchOptions(0)
		opts.Compression = codec
		buf, err := AppendBatch(nil, opts, sampleRecords())
		if err != nil {
			t.Fatal(err)
		}
		// Garble the middle of the payload and fix the CRC, so only the
		// codec can notice.
		for i := HeaderSize + 20; i < HeaderSize+40 && i < len(buf); i++ {
			buf[i] ^= 0x5a
		}
		reencode(buf)
		if _, err := Decode(buf, Limits{}); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: got %v", codec, err)
		}
	}
}

func TestAppendBatchAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	recs := sampleRecords()
	buf := make([]byte, 0, 1<<20)
	for _, codec := range allCodecs {
		opts := idempotentOptions(codec)
		if _, err := AppendBatch(buf[:0], opts, recs); err != nil { // warm the pools
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(50, func() {
			if _, err := AppendBatch(buf[:0], opts, recs); err != nil {
				t.Fatal(err)
			}
		})
		// Pools can be emptied by a GC between runs; allow a little.
		if limit := map[Compression]float64{CompressionNone: 0, CompressionSnappy: 0}[codec]; allocs > limit+1 {
			t.Errorf("%s: %.1f allocations per batch", codec, allocs)
		}
	}
	ctl := testing.AllocsPerRun(50, func() { _ = AppendControlBatch(buf[:0], ControlMarker{}) })
	if ctl != 0 {
		t.Errorf("control batch: %.1f allocations", ctl)
	}
}

func TestVarintSize(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, 1 << 20, -(1 << 40), 1<<63 - 1, -1 << 63} {
		if got, want := varintSize(v), len(binary.AppendVarint(nil, v)); got != want {
			t.Errorf("varintSize(%d) = %d, want %d", v, got, want)
		}
	}
}

func BenchmarkAppendBatch(b *testing.B) {
	recs := make([]Record, 100)
	for i := range recs {
		recs[i] = Record{OffsetDelta: int32(i), Timestamp: int64(i), Key: fmt.Appendf(nil, "key-%d", i), Value: bytes.Repeat([]byte("v"), 200)}
	}
	for _, codec := range allCodecs {
		b.Run(codec.String(), func(b *testing.B) {
			buf := make([]byte, 0, 64<<10)
			opts := NewBatchOptions(0)
			opts.Compression = codec
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = AppendBatch(buf[:0], opts, recs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
