package broker

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/raftgroups"
)

// brokerMetrics are the Kafka facade's series in Config.Metrics: each API
// key's handling time, and the records and bytes produce and fetch moved.
// They are read off requests and responses around the handlers, so the
// handlers themselves count nothing.
type brokerMetrics struct {
	set                          *metrics.Set
	produceRecords, produceBytes *metrics.Counter
	fetchRecords, fetchBytes     *metrics.Counter
}

func newBrokerMetrics(set *metrics.Set) *brokerMetrics {
	return &brokerMetrics{
		set:            set,
		produceRecords: set.GetOrCreateCounter("queen_kafka_produce_records_total"),
		produceBytes:   set.GetOrCreateCounter("queen_kafka_produce_bytes_total"),
		fetchRecords:   set.GetOrCreateCounter("queen_kafka_fetch_records_total"),
		fetchBytes:     set.GetOrCreateCounter("queen_kafka_fetch_bytes_total"),
	}
}

// measured times h per call and counts what a produce accepted or a
// fetch returned.
func (m *brokerMetrics) measured(key int16, h kafka.Handler) kafka.Handler {
	name := fmt.Sprintf(`queen_kafka_request_duration_seconds{api=%q}`, kafka.KeyName(key))
	var duration atomic.Pointer[metrics.PrometheusHistogram] // made at the first request: no empty series per unused key
	return func(ctx context.Context, c *kafka.Conn, req kmsg.Request) (kmsg.Response, error) {
		start := time.Now()
		resp, err := h(ctx, c, req)
		d := duration.Load()
		if d == nil {
			d = m.set.GetOrCreatePrometheusHistogramExt(name, raftgroups.LatencyBuckets)
			duration.Store(d)
		}
		d.UpdateDuration(start)
		if err == nil {
			m.count(req, resp)
		}
		return resp, err
	}
}

func (m *brokerMetrics) count(req kmsg.Request, resp kmsg.Response) {
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		pr, ok := req.(*kmsg.ProduceRequest)
		if !ok || len(pr.Topics) != len(r.Topics) {
			return
		}
		for ti := range pr.Topics {
			parts, answers := pr.Topics[ti].Partitions, r.Topics[ti].Partitions
			for pi := range parts {
				if pi < len(answers) && answers[pi].ErrorCode == 0 {
					n, size := batchRecords(parts[pi].Records)
					m.produceRecords.Add(n)
					m.produceBytes.Add(size)
				}
			}
		}
	case *kmsg.FetchResponse:
		for ti := range r.Topics {
			for pi := range r.Topics[ti].Partitions {
				n, size := batchRecords(r.Topics[ti].Partitions[pi].RecordBatches)
				m.fetchRecords.Add(n)
				m.fetchBytes.Add(size)
			}
		}
	}
}

// batchRecords counts the data records (control batches left out) and the
// bytes of the record batches in data. It reads headers only; a fetch may
// end with a partial batch, which is not counted.
func batchRecords(data []byte) (nrec, size int) {
	for len(data) > 0 {
		b, err := records.PeekHeader(data)
		if err != nil {
			break
		}
		if !b.IsControl() {
			nrec += int(b.NumRecords)
		}
		size += b.WireSize
		data = data[b.WireSize:]
	}
	return nrec, size
}
