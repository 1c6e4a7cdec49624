package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka/records"
)

// gzipBatch is one gzip batch holding a record of size zero bytes: a few
// hundred bytes on the wire, size bytes decompressed.
func gzipBatch(t *testing.T, size int) []byte {
	t.Helper()
	opts := records.NewBatchOptions(0)
	opts.Compression = records.CompressionGzip
	b, err := records.AppendBatch(nil, opts, []records.Record{{Value: make([]byte, size)}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// produceEach sends one produce with one batch for each of the topic's
// partitions 0..len(batches)-1 and returns the error code of each.
func produceEach(t *testing.T, n *testNode, topic string, batches map[int32][]byte) map[int32]int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p, b := range batches {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, b
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxFor(t), n.client())
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int16{}
	for _, p := range resp.Topics[0].Partitions {
		out[p.Partition] = p.ErrorCode
	}
	return out
}

// TestDecompressionBoundIsPerRequest: QUEEN_KAFKA_MAX_DECOMPRESSED_BYTES
// bounds a whole produce, not each partition of it, so a small request of
// many compressed batches cannot inflate to many times the bound. A batch
// that would fit alone but not in what the request has left answers a
// retriable code and is not stored (the client sends it again in another
// request); one larger than the bound by itself answers MESSAGE_TOO_LARGE.
func TestDecompressionBoundIsPerRequest(t *testing.T) {
	const bound = 1 << 20
	n := startNode(t, func(c *Config) { c.MaxDecompressedBytes = bound })
	cl := n.client()
	createTopic(t, cl, "inflate", 6)
	batches := map[int32][]byte{}
	for p := range int32(6) {
		batches[p] = gzipBatch(t, 300<<10)
	}
	codes := produceEach(t, n, "inflate", batches)
	stored, refused := 0, 0
	for p, code := range codes {
		switch {
		case code == 0:
			stored++
			if hwm(n, "inflate", uint32(p)) != 1 {
				t.Fatalf("partition %d answered but holds %d records", p, hwm(n, "inflate", uint32(p)))
			}
		case kerr.IsRetriable(kerr.ErrorForCode(code)):
			refused++
			if hwm(n, "inflate", uint32(p)) != 0 {
				t.Fatalf("partition %d refused (%d) but stored", p, code)
			}
			// Alone in a request it fits.
			if again := produceEach(t, n, "inflate", map[int32][]byte{p: batches[p]}); again[p] != 0 {
				t.Fatalf("partition %d alone: error %d", p, again[p])
			}
		default:
			t.Fatalf("partition %d: error %d", p, code)
		}
	}
	if stored != 3 || refused != 3 {
		t.Fatalf("%d partitions stored and %d refused; with a %d byte bound, 3 batches of 300 KiB fit", stored, refused, bound)
	}
	if codes := produceEach(t, n, "inflate", map[int32][]byte{0: gzipBatch(t, bound+1)}); codes[0] != kerr.MessageTooLarge.Code {
		t.Fatalf("a batch over the bound by itself: error %d, want MESSAGE_TOO_LARGE", codes[0])
	}
}
