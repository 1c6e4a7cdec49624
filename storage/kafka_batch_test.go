package storage

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/wire"
)

// keptProduce is a produce of one Kafka batch of n records (zstd, keys,
// headers) kept as produced, and the batch.
func (h *harness) keptProduce(topic string, n int) (wire.KafkaProduceCmd, []byte) {
	h.t.Helper()
	h.allocTopic(topic, 2)
	var recs []records.Record
	for i := range n {
		recs = append(recs, records.Record{OffsetDelta: int32(i), Timestamp: 1000 + int64(i), Key: []byte(fmt.Sprintf("k%d", i)),
			Value: []byte(strings.Repeat(fmt.Sprint(i), 50)), Headers: []records.Header{{Key: "h", Value: []byte{byte(i)}}}})
	}
	opts := records.NewBatchOptions(0)
	opts.Compression = records.CompressionZstd
	batch, err := records.AppendBatch(nil, opts, recs)
	if err != nil {
		h.t.Fatal(err)
	}
	decoded, err := records.Decode(batch, records.Limits{})
	if err != nil {
		h.t.Fatal(err)
	}
	c := wire.KafkaProduceCmd{ProducerID: wire.NoProducer, Push: wire.PushCmd{Tenant: wire.DefaultTenant, Queue: topic,
		PartitionIndex: 0, Flags: wire.PushKafkaBatch, Count: n,
		Records: wire.AppendKafkaBatch(nil, h.nextID(), decoded[0].InflatedSize, batch)}}
	return c, batch
}

// keptBatches lists what a fetch reads of partition 0 of topic: each
// chunk's kept batch, or "records" for a chunk of stored records.
func keptBatches(t *testing.T, s *Store, topic string) [][]byte {
	t.Helper()
	p, ok := s.PartitionByIndex(wire.DefaultTenant, topic, 0)
	if !ok {
		t.Fatalf("no partition %s/0", topic)
	}
	var out [][]byte
	if _, err := s.ReadChunks(p, 0, func(c *StoredChunk) bool {
		if !c.KafkaBatch {
			out = append(out, []byte("records"))
			return true
		}
		// Appended after bytes of its own, which it must leave as they are.
		prefix := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
		b, err := c.AppendKafkaBatch(bytes.Clone(prefix))
		if err != nil || !bytes.Equal(b[:len(prefix)], prefix) || len(b)-len(prefix) != c.KafkaBatchSize() {
			t.Fatalf("appending the kept batch: %v", err)
		}
		out = append(out, b[len(prefix):])
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A kept batch is stored as it came and read as the stored records a
// produce would have written: consecutive message ids from the first, the
// producer's timestamps, keys, headers and values.
func TestKeptKafkaBatchReadsBothWays(t *testing.T) {
	h := newHarness(t)
	c, batch := h.keptProduce("t", 3)
	if r := h.produce(c); r.Code != wire.CodeOK || r.BaseOffset != 0 {
		t.Fatalf("%+v", r)
	}
	if got := keptBatches(t, h.s, "t"); len(got) != 1 || !bytes.Equal(got[0], batch) {
		t.Fatalf("fetch reads %d chunks, not the batch as produced", len(got))
	}
	first, _, _, _ := wire.SplitKafkaBatch(c.Push.Records)
	p, _ := h.s.PartitionByIndex(wire.DefaultTenant, "t", 0)
	var got []string
	if _, err := h.s.Read(p, 0, func(off uint64, _ int64, body []byte) bool {
		rec, err := wire.ParseRecord(body)
		if err != nil {
			t.Fatal(err)
		}
		if rec.MsgID != first.Plus(off) {
			t.Fatalf("record %d: message id %s, want %s", off, rec.MsgID, first.Plus(off))
		}
		got = append(got, fmt.Sprintf("%d:%s=%s@%d/%s=%v", off, rec.Key, rec.Payload[:3], rec.Timestamp, rec.Headers[0].Key, rec.Headers[0].Value))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if want := "[0:k0=000@1000/h=[0] 1:k1=111@1001/h=[1] 2:k2=222@1002/h=[2]]"; fmt.Sprint(got) != want {
		t.Fatalf("read as stored records:\n%v\nwant\n%v", got, want)
	}
	// An HTTP consumer pops them like any records.
	if r := h.pop("t", "g", 10, 60000); len(r.Claims) != 1 || r.Claims[0].To-r.Claims[0].From != 3 {
		t.Fatalf("pop: %+v", r)
	}
}

// A command whose kept batch does not hold the records it claims changes
// nothing.
func TestKeptKafkaBatchMustMatchItsCount(t *testing.T) {
	h := newHarness(t)
	c, _ := h.keptProduce("t", 3)
	c.Push.Count = 2
	if r := h.produce(c); r.Code != wire.CodeBadRequest {
		t.Fatalf("a miscounted batch: %+v", r)
	}
	c.Push.Count, c.Push.Records = 3, c.Push.Records[:len(c.Push.Records)-1]
	if r := h.produce(c); r.Code != wire.CodeBadRequest {
		t.Fatalf("a cut batch: %+v", r)
	}
	if got := keptBatches(t, h.s, "t"); len(got) != 0 {
		t.Fatalf("%d chunks stored", len(got))
	}
}

// A retried proposal of a kept batch is recognised by its first message id
// and answered with the first attempt's offset.
func TestRetriedKeptKafkaBatchIsStoredOnce(t *testing.T) {
	h := newHarness(t)
	c, _ := h.keptProduce("t", 3)
	entry := h.entryOf(wire.KindKafkaProduce, c.Encode(nil))
	first, _ := wire.DecodeKafkaProduceResult(h.applyEntry(entry))
	retry, _ := wire.DecodeKafkaProduceResult(h.applyEntry(wire.MarkRetry(entry)))
	if first.Code != wire.CodeOK || retry.Code != wire.CodeDuplicate || retry.BaseOffset != first.BaseOffset {
		t.Fatalf("first %+v, retry %+v", first, retry)
	}
	if got := keptBatches(t, h.s, "t"); len(got) != 1 {
		t.Fatalf("%d chunks stored", len(got))
	}
}

// Relocation and snapshots carry a kept batch as it is.
func TestKeptKafkaBatchSurvivesRelocationAndSnapshots(t *testing.T) {
	h := newHarness(t)
	c, batch := h.keptProduce("t", 3)
	h.produce(c)
	h.push("q", "p", "x")
	rc := wire.RelocateChunksCmd{From: 0, To: h.s.counters.nextChunkSeq, MaxBytes: 1 << 20}
	if r, err := wire.DecodeRelocateChunksResult(h.apply(wire.KindRelocateChunks, rc.Encode(nil))); err != nil || r.Moved != 2 {
		t.Fatalf("relocate: %v %+v", err, r)
	}
	if got := keptBatches(t, h.s, "t"); len(got) != 1 || !bytes.Equal(got[0], batch) {
		t.Fatal("relocation changed the kept batch")
	}
	other := newHarness(t)
	h.snapshotTo(other)
	if got := keptBatches(t, other.s, "t"); len(got) != 1 || !bytes.Equal(got[0], batch) {
		t.Fatal("a snapshot changed the kept batch")
	}
}

// Index entries written before chunk kinds existed decode as stored records.
func TestChunkMetaKinds(t *testing.T) {
	plain := chunkMeta{seq: 7, appendMs: 9, count: 3, size: 100}
	if m, err := decodeChunkMeta(plain.encode()); err != nil || m != plain {
		t.Fatalf("%+v %v", m, err)
	}
	kept := plain
	kept.kafkaBatch = true
	if m, err := decodeChunkMeta(kept.encode()); err != nil || m != kept || len(kept.encode()) != len(plain.encode())+1 {
		t.Fatalf("%+v %v", m, err)
	}
	if _, err := decodeChunkMeta(append(plain.encode(), 9)); err == nil {
		t.Fatal("an unknown kind decoded")
	}
}

// A kept batch read a record at a time (an HTTP consumer popping one
// message per call, and the acks after) is decoded once: later reads get
// the records decoded the first time.
func TestKeptKafkaBatchIsDecodedOnceForSmallReads(t *testing.T) {
	h := newHarness(t)
	c, _ := h.keptProduce("t", 3)
	h.produce(c)
	p, _ := h.s.PartitionByIndex(wire.DefaultTenant, "t", 0)
	for off := uint64(0); off < 3; off++ {
		if err := h.s.ReadRange(p, off, off+1, func(uint64, int64, []byte) bool { return true }); err != nil {
			t.Fatal(err)
		}
	}
	// Each decode is kept in a slot of its own: three decodes would fill
	// three.
	n := 0
	for _, e := range h.s.segs.decoded.entries {
		if e.records != nil {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d decoded batches kept after three reads of one batch, want 1", n)
	}
}
