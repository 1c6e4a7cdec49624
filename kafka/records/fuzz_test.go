package records

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var writeSeeds = flag.Bool("write-fuzz-seeds", false, "rewrite testdata/fuzz/FuzzRecordBatch from real encodings")

// FuzzRecordBatch feeds arbitrary bytes to Decode. Decode must not panic,
// must only fail with this package's sentinels, and whatever it accepts must
// survive an encode/decode round trip unchanged.
func FuzzRecordBatch(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
		// Most mutations break the CRC and stop at the first check. Fixing
		// the length and CRC of the first batch lets the same mutation reach
		// the record parser and the decompressors.
		if len(data) >= HeaderSize {
			checkDecode(t, reencode(bytes.Clone(data)))
		}
	})
}

func checkDecode(t *testing.T, data []byte) {
	batches, err := Decode(data, Limits{MaxDecompressedBytes: 1 << 20, MaxBatchBytes: 4 << 20})
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedMagic) &&
			!errors.Is(err, ErrUnsupportedCompression) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("error outside the sentinels: %v", err)
		}
		return
	}
	for i := range batches {
		b := &batches[i]
		if int(b.NumRecords) != len(b.Records) {
			t.Fatalf("count %d, decoded %d", b.NumRecords, len(b.Records))
		}
		if b.IsControl() || len(b.Records) == 0 {
			continue
		}
		opts := BatchOptions{
			BaseOffset: b.BaseOffset, PartitionLeaderEpoch: b.PartitionLeaderEpoch,
			ProducerID: b.ProducerID, ProducerEpoch: b.ProducerEpoch, BaseSequence: b.BaseSequence,
			Transactional: b.IsTransactional(), Compression: b.Compression(),
			TimestampType: b.TimestampType(), LogAppendTime: b.MaxTimestamp,
		}
		enc, err := AppendBatch(nil, opts, b.Records)
		if errors.Is(err, ErrInvalidInput) {
			continue // offsets that decode but that we never write
		}
		if err != nil {
			t.Fatalf("re-encoding an accepted batch: %v", err)
		}
		again, err := Decode(enc, Limits{MaxDecompressedBytes: 2 << 20})
		if err != nil {
			t.Fatalf("decoding our own encoding: %v", err)
		}
		sameRecords(t, b.Records, again[0].Records)
	}
}

// TestWriteFuzzSeeds regenerates the seed corpus when run with
// -write-fuzz-seeds; otherwise it checks the corpus is there.
func TestWriteFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzRecordBatch")
	if !*writeSeeds {
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) == 0 {
			t.Fatalf("no seed corpus in %s (run with -write-fuzz-seeds): %v", dir, err)
		}
		return
	}
	// Small seeds: the fuzzer minimises every new interesting input, and
	// that is slow on inputs of many KiB.
	small := sampleRecords()
	small[3].Value = small[3].Value[:120]
	seeds := map[string][]byte{}
	for _, codec := range allCodecs {
		b, err := AppendBatch(nil, idempotentOptions(codec), small)
		if err != nil {
			t.Fatal(err)
		}
		seeds["queen-"+codec.String()] = b
	}
	seeds["queen-control"] = AppendControlBatch(nil, ControlMarker{BaseOffset: 3, ProducerID: 1, Type: ControlCommit, CoordinatorEpoch: 2})
	multi := append(bytes.Clone(seeds["queen-none"]), seeds["queen-zstd"]...)
	seeds["queen-multi"] = append(multi, seeds["queen-control"]...)
	recs := []kmsg.Record{{Key: []byte("k"), Value: []byte("v"), Headers: []kmsg.Header{{Key: "h", Value: nil}}}, {OffsetDelta: 1, Value: []byte("w")}}
	for name, codec := range map[string]kgo.CompressionCodec{
		"franz-none": kgo.NoCompression(), "franz-gzip": kgo.GzipCompression(), "franz-snappy": kgo.SnappyCompression(),
		"franz-lz4": kgo.Lz4Compression(), "franz-zstd": kgo.ZstdCompression(),
	} {
		seeds[name] = franzBatch(t, codec, recs, nil)
	}
	seeds["franz-xerial"] = franzBatch(t, kgo.NoCompression(), recs, xerialFrame)
	old := bytes.Clone(seeds["queen-none"])
	old[offMagic] = 1
	seeds["magic-1"] = old
	seeds["truncated"] = seeds["queen-gzip"][:40]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
