package records

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// These tests check the codec against franz-go's own structures and
// compressors, independently of this package's code paths. The end-to-end
// check with a real kgo producer and consumer lives in package kafka.

// kmsgRecords splits a records section into kmsg.Records.
func kmsgRecords(t *testing.T, section []byte, count int) []kmsg.Record {
	t.Helper()
	var out []kmsg.Record
	for range count {
		length, n := binary.Varint(section)
		if n <= 0 || int(length)+n > len(section) {
			t.Fatalf("bad record length prefix")
		}
		var r kmsg.Record
		if err := r.ReadFrom(section[:n+int(length)]); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
		section = section[n+int(length):]
	}
	if len(section) != 0 {
		t.Fatalf("%d bytes after %d records", len(section), count)
	}
	return out
}

func TestEncodedBatchesReadByKmsg(t *testing.T) {
	decompressor := kgo.DefaultDecompressor()
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			want := sampleRecords()
			buf, err := AppendBatch(nil, idempotentOptions(codec), want)
			if err != nil {
				t.Fatal(err)
			}
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(buf); err != nil {
				t.Fatal(err)
			}
			if int(rb.Length) != len(buf)-12 || rb.Magic != 2 {
				t.Fatalf("length %d magic %d", rb.Length, rb.Magic)
			}
			if crc := int32(crc32.Checksum(buf[21:], crc32.MakeTable(crc32.Castagnoli))); crc != rb.CRC {
				t.Fatalf("crc %08x, header %08x", crc, rb.CRC)
			}
			if rb.FirstOffset != 1234 || rb.ProducerID != 99 || rb.ProducerEpoch != 3 || rb.FirstSequence != 42 ||
				rb.NumRecords != 4 || rb.LastOffsetDelta != 7 || rb.Attributes&0x10 == 0 {
				t.Fatalf("header %+v", rb)
			}
			section, err := decompressor.Decompress(rb.Records, kgo.CompressionCodecType(rb.Attributes&7))
			if err != nil {
				t.Fatal(err)
			}
			got := kmsgRecords(t, section, int(rb.NumRecords))
			for i, w := range want {
				g := got[i]
				if int(g.OffsetDelta) != int(w.OffsetDelta) || rb.FirstTimestamp+g.TimestampDelta64 != w.Timestamp ||
					!bytes.Equal(g.Key, w.Key) || (g.Key == nil) != (w.Key == nil) ||
					!bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) ||
					len(g.Headers) != len(w.Headers) {
					t.Fatalf("record %d: got %+v want %+v", i, g, w)
				}
				for j, h := range w.Headers {
					if g.Headers[j].Key != h.Key || !bytes.Equal(g.Headers[j].Value, h.Value) || (g.Headers[j].Value == nil) != (h.Value == nil) {
						t.Fatalf("record %d header %d: got %+v want %+v", i, j, g.Headers[j], h)
					}
				}
			}
		})
	}
}

// franzBatch builds a batch the way franz-go's producer does: kmsg records,
// kgo's compressor, kmsg's batch layout, CRC-32C over attributes onwards.
func franzBatch(t *testing.T, codec kgo.CompressionCodec, recs []kmsg.Record, compress func([]byte) []byte) []byte {
	t.Helper()
	var raw []byte
	for i := range recs {
		recs[i].Length = int32(len(recs[i].AppendTo(nil)) - len(binary.AppendVarint(nil, 0)))
		raw = recs[i].AppendTo(raw)
	}
	payload, attrs := raw, int16(0)
	if compress != nil {
		payload, attrs = compress(raw), 2
	} else if c, err := kgo.DefaultCompressor(codec); err != nil {
		t.Fatal(err)
	} else if c != nil {
		var typ kgo.CompressionCodecType
		payload, typ = c.Compress(new(bytes.Buffer), raw)
		attrs = int16(typ)
	}
	rb := kmsg.RecordBatch{
		FirstOffset: 0, PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs,
		LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: 1_000, MaxTimestamp: 3_000,
		ProducerID: 7, ProducerEpoch: 1, FirstSequence: 10, NumRecords: int32(len(recs)),
		Records: payload,
	}
	buf := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(buf[8:], uint32(len(buf)-12))
	binary.BigEndian.PutUint32(buf[17:], crc32.Checksum(buf[21:], crc32.MakeTable(crc32.Castagnoli)))
	return buf
}

// xerialFrame frames snappy the way the Java client does, written here by
// hand from the format: magic, two versions, then length-prefixed blocks.
func xerialFrame(raw []byte) []byte {
	out := []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	for len(raw) > 0 {
		n := min(len(raw), 1000) // small blocks, so several are exercised
		block := s2.EncodeSnappy(nil, raw[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		raw = raw[n:]
	}
	return out
}

func TestDecodeFranzBatches(t *testing.T) {
	makeRecs := func() []kmsg.Record {
		return []kmsg.Record{
			{TimestampDelta64: 0, OffsetDelta: 0, Key: []byte("a"), Value: []byte("one"),
				Headers: []kmsg.Header{{Key: "trace", Value: []byte("t1")}}},
			{TimestampDelta64: 1_000, OffsetDelta: 1, Key: nil, Value: bytes.Repeat([]byte("two "), 2000)},
			{TimestampDelta64: 2_000, OffsetDelta: 2, Key: []byte{}, Value: nil},
		}
	}
	cases := map[string]struct {
		codec    kgo.CompressionCodec
		compress func([]byte) []byte
		want     Compression
	}{
		"none":          {kgo.NoCompression(), nil, CompressionNone},
		"gzip":          {kgo.GzipCompression(), nil, CompressionGzip},
		"snappy raw":    {kgo.SnappyCompression(), nil, CompressionSnappy},
		"snappy xerial": {kgo.NoCompression(), xerialFrame, CompressionSnappy},
		"lz4":           {kgo.Lz4Compression(), nil, CompressionLZ4},
		"zstd":          {kgo.ZstdCompression(), nil, CompressionZstd},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			src := makeRecs()
			buf := franzBatch(t, c.codec, src, c.compress)
			batches, err := Decode(buf, Limits{MaxDecompressedBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			b := batches[0]
			if b.Compression() != c.want || b.ProducerID != 7 || b.ProducerEpoch != 1 || b.BaseSequence != 10 ||
				b.NumRecords != 3 || b.PartitionLeaderEpoch != -1 {
				t.Fatalf("header %+v", b)
			}
			want := []Record{
				{OffsetDelta: 0, Timestamp: 1_000, Key: []byte("a"), Value: []byte("one"), Headers: []Header{{Key: "trace", Value: []byte("t1")}}},
				{OffsetDelta: 1, Timestamp: 2_000, Key: nil, Value: src[1].Value},
				{OffsetDelta: 2, Timestamp: 3_000, Key: []byte{}, Value: nil},
			}
			sameRecords(t, want, b.Records)
		})
	}
}
