package kafka

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// batchBytes adds up the record batches a franz-go client writes or reads,
// as its hooks count them (the records section of each batch, compressed).
type batchBytes struct {
	mu      sync.Mutex
	batches int
	bytes   int
	codecs  map[uint8]int
}

func (b *batchBytes) add(codec uint8, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.codecs == nil {
		b.codecs = map[uint8]int{}
	}
	b.batches++
	b.bytes += n
	b.codecs[codec]++
}

func (b *batchBytes) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	b.add(m.CompressionType, m.CompressedBytes)
}

func (b *batchBytes) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	b.add(m.CompressionType, m.CompressedBytes)
}

func (b *batchBytes) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprintf("%d batches, %d bytes, codecs %v", b.batches, b.bytes, b.codecs)
}

// counter is a counter of the node's Prometheus scrape.
func counter(ctx context.Context, t *testing.T, n *harness.Node, name string) float64 {
	t.Helper()
	fams, _ := e2etest.Scrape(ctx, t, n.URL())
	v, ok := e2etest.SampleValue(fams[name], nil)
	if !ok {
		t.Fatalf("no %s in the scrape", name)
	}
	return v
}

// A zstd-compressed topic is served as it was produced: franz-go reads the
// very batches its producer wrote (as many, as many compressed bytes, all
// zstd), and kcat reading the topic from the start costs the broker exactly
// the bytes produced.
func TestCompressedTopicIsFetchedAsProduced(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	ctx := e2etest.Deadline(t, 90*time.Second)
	n := c.Nodes[0]
	const topic, count = "zstd-kept", 2000
	admin := e2etest.KgoClient(t, c)
	createTopicWithConfigs(ctx, t, admin, topic, nil)

	var produced batchBytes
	prod := e2etest.KgoClient(t, c, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerLinger(20*time.Millisecond), kgo.ProducerBatchMaxBytes(16<<10), kgo.WithHooks(&produced))
	want := make([]string, count)
	for i := range count {
		want[i] = fmt.Sprintf(`{"order":%d,"customer":"c-%d","status":"created","note":"%s"}`, i, i%37, strings.Repeat("x", i%50))
		prod.Produce(ctx, &kgo.Record{Value: []byte(want[i])}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	producedBytes := counter(ctx, t, n, "queen_kafka_produce_bytes_total")

	var fetched batchBytes
	cons := e2etest.KgoClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(&fetched))
	got := e2etest.ConsumeN(ctx, t, cons, count)
	for i, r := range got {
		if string(r.Value) != want[i] || r.Offset != int64(i) {
			t.Fatalf("record %d: offset %d %q, want %q", i, r.Offset, r.Value, want[i])
		}
	}
	cons.Close()
	if produced.batches >= count/2 || produced.codecs[4] != produced.batches {
		t.Fatalf("the producer did not batch with zstd: %s", &produced)
	}
	if produced.String() != fetched.String() {
		t.Fatalf("fetched batches differ from those produced:\nproduced %s\nfetched  %s", &produced, &fetched)
	}

	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed (.ci/run installs it)")
	}
	before := counter(ctx, t, n, "queen_kafka_fetch_bytes_total")
	out := kcat(ctx, t, "", "-b", n.KafkaAddr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n")
	if out != strings.Join(want, "\n")+"\n" {
		t.Fatalf("kcat read %d lines, not the %d produced", strings.Count(out, "\n"), count)
	}
	sent := counter(ctx, t, n, "queen_kafka_fetch_bytes_total") - before
	if sent != producedBytes {
		t.Fatalf("kcat's fetches took %.0f bytes of record batches; the producer sent %.0f", sent, producedBytes)
	}
	t.Logf("%d records: %s produced and fetched by franz-go; %.0f batch bytes produced and fetched by kcat (%.1f per record)",
		count, &produced, sent, sent/count)
}
