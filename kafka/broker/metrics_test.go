package broker

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/kafka/records"
)

// batchRecords counts data records and whole batches: a transaction marker
// is no record a consumer sees, a trailing partial batch is not counted.
func TestBatchRecordsCountsDataRecordsOfWholeBatches(t *testing.T) {
	data, err := records.AppendBatch(nil, records.NewBatchOptions(0), []records.Record{{Value: []byte("a")}, {OffsetDelta: 1, Value: []byte("b")}})
	if err != nil {
		t.Fatal(err)
	}
	data = records.AppendControlBatch(data, records.ControlMarker{BaseOffset: 2, ProducerID: 7, Type: records.ControlCommit})
	whole := len(data)
	more, err := records.AppendBatch(nil, records.NewBatchOptions(3), []records.Record{{Value: []byte("c")}})
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, more[:len(more)-1]...)
	if n, size := batchRecords(data); n != 2 || size != whole {
		t.Fatalf("%d records in %d bytes, want 2 in %d", n, size, whole)
	}
}

// Produce and fetch through a real broker move its counters and give each
// API used a latency histogram with le buckets.
func TestProduceAndFetchAreCounted(t *testing.T) {
	set := metrics.NewSet()
	n := startNode(t, func(c *Config) { c.Metrics = set })
	cl := n.client(kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("counted"))
	ctx := ctxFor(t)
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(ctx, rec("counted", i)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consume(t, cl, 5)
	if got := set.GetOrCreateCounter("queen_kafka_produce_records_total").Get(); got != 5 {
		t.Errorf("produced records %d, want 5", got)
	}
	if got := set.GetOrCreateCounter("queen_kafka_fetch_records_total").Get(); got < 5 {
		t.Errorf("fetched records %d, want at least 5", got)
	}
	if set.GetOrCreateCounter("queen_kafka_produce_bytes_total").Get() == 0 || set.GetOrCreateCounter("queen_kafka_fetch_bytes_total").Get() == 0 {
		t.Error("no bytes counted")
	}
	var buf bytes.Buffer
	set.WritePrometheus(&buf)
	for _, api := range []string{"Produce", "Fetch", "Metadata"} {
		if !regexp.MustCompile(`queen_kafka_request_duration_seconds_bucket\{api="` + api + `",le="0.001"\}`).Match(buf.Bytes()) {
			t.Errorf("no %s latency histogram:\n%s", api, buf.String())
		}
	}
}
