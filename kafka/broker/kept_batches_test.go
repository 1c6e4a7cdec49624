package broker

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka/records"
)

// keptBatch is a batch of n records as a producer would send it, with keys,
// headers and codec c.
func keptBatch(t *testing.T, c records.Compression, first, n int) []byte {
	t.Helper()
	var recs []records.Record
	for i := range n {
		recs = append(recs, records.Record{OffsetDelta: int32(i), Timestamp: 1_700_000_000_000 + int64(i),
			Key: []byte(fmt.Sprintf("k%d", first+i)), Value: bytes.Repeat([]byte(fmt.Sprintf("v%d ", first+i)), 40),
			Headers: []records.Header{{Key: "h", Value: []byte("x")}}})
	}
	opts := records.NewBatchOptions(0)
	opts.Compression = c
	b, err := records.AppendBatch(nil, opts, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fetchFrom is partition 0 of topic fetched from offset.
func fetchFrom(t *testing.T, n *testNode, topic string, offset int64) []byte {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.FetchResponse](t, nodeClient(t, n), int32(n.broker.cfg.NodeID), req)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("fetch at %d: error %d", offset, code)
	}
	return resp.Topics[0].Partitions[0].RecordBatches
}

// Batches are kept as produced: a fetch sends each one's bytes as they came,
// compressed as they came, only the base offset set, from whichever of its
// offsets the fetch starts; the same records read as stored records for the
// HTTP side.
func TestProducedBatchesAreFetchedAsTheyCame(t *testing.T) {
	n := startNode(t, func(c *Config) { c.DefaultPartitions = 1 })
	cl := n.client()
	zstd, gzip := keptBatch(t, records.CompressionZstd, 0, 3), keptBatch(t, records.CompressionGzip, 3, 2)
	for i, b := range [][]byte{zstd, gzip} {
		if p := rawProduce(t, cl, "kept", b, -1); p.ErrorCode != 0 {
			t.Fatalf("batch %d: error %d", i, p.ErrorCode)
		}
	}
	second := bytes.Clone(gzip)
	records.SetBaseOffset(second, 3, -1)
	want := append(bytes.Clone(zstd), second...)
	for _, from := range []int64{0, 1, 2} {
		if got := fetchFrom(t, n, "kept", from); !bytes.Equal(got, want) {
			t.Fatalf("fetch from %d: %d bytes, not the %d produced", from, len(got), len(want))
		}
	}
	if got := fetchFrom(t, n, "kept", 3); !bytes.Equal(got, second) {
		t.Fatalf("fetch from 3: %d bytes, not the second batch's %d", len(got), len(second))
	}
	var wantValues []string
	for i := range 5 {
		wantValues = append(wantValues, fmt.Sprintf("%d:k%d=%s", i, i, bytes.Repeat([]byte(fmt.Sprintf("v%d ", i)), 40)))
	}
	if got := storedValues(t, n, "kept"); fmt.Sprint(got) != fmt.Sprint(wantValues) {
		t.Fatalf("read as stored records:\n%v\nwant\n%v", got, wantValues)
	}
}
