package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// shareConsumer is a franz-go share-group consumer (KIP-932) run in its
// own goroutine; decide says how each record is acknowledged.
type shareConsumer struct {
	cl     *kgo.Client
	done   chan struct{}
	mu     sync.Mutex
	seen   []shareDelivery
	errs   []error
	cancel context.CancelFunc
}

type shareDelivery struct {
	value         string
	partition     int32
	offset        int64
	deliveryCount int32
}

func startShareConsumer(t *testing.T, seeds []string, group, topic string, decide func(shareDelivery) kgo.AckStatus, opts ...kgo.Opt) *shareConsumer {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.ShareMaxRecords(20), kgo.FetchMaxWait(500 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sc := &shareConsumer{cl: cl, done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(sc.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(topic string, p int32, err error) {
				if ctx.Err() == nil {
					sc.mu.Lock()
					sc.errs = append(sc.errs, fmt.Errorf("%s/%d: %w", topic, p, err))
					sc.mu.Unlock()
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				d := shareDelivery{value: string(r.Value), partition: r.Partition, offset: r.Offset, deliveryCount: r.DeliveryCount()}
				r.Ack(decide(d))
				sc.mu.Lock()
				sc.seen = append(sc.seen, d)
				sc.mu.Unlock()
			})
		}
	}()
	t.Cleanup(sc.close)
	return sc
}

// deliveries is a copy of what the consumer has received so far.
func (sc *shareConsumer) deliveries() ([]shareDelivery, []error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return append([]shareDelivery(nil), sc.seen...), append([]error(nil), sc.errs...)
}

// close flushes the acknowledgements, leaves the group and waits for the
// polling goroutine.
func (sc *shareConsumer) close() {
	sc.cancel()
	<-sc.done
	flush, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = sc.cl.FlushAcks(flush)
	sc.cl.Close()
}

func produceValues(ctx context.Context, t *testing.T, n *harness.Node, topic string, partitions int32, values []string) {
	t.Helper()
	cl := e2etest.KafkaClient(t, n, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, partitions, 1
	create.Topics = append(create.Topics, ct)
	if resp := e2etest.KafkaRequest[*kmsg.CreateTopicsResponse](ctx, t, cl, create); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s: error %d", topic, resp.Topics[0].ErrorCode)
	}
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Value: []byte(v)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// TestKafkaShareConsumerAndHTTPPopSplitAQueue: a share group is the Queen
// consumer group of its name, so an HTTP consumer popping with that group
// and a franz-go share consumer take turns on one queue's records, under
// the same leases: together they receive every record exactly once.
func TestKafkaShareConsumerAndHTTPPopSplitAQueue(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: consumerProtocolClusterEnv()})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 2*time.Minute)
	const total = 300
	values := make([]string, total)
	for i := range values {
		values[i] = fmt.Sprintf(`{"i":%d}`, i)
	}
	produceValues(ctx, t, n, "split", 4, values)

	got := map[int]int{}
	byHTTP := 0
	httpPop := func() {
		for _, m := range e2etest.PopAck(t, ctx, n.URL(), "split", "", "workers", 10, "completed") {
			var v struct{ I int }
			if err := json.Unmarshal(m.Data, &v); err != nil {
				t.Fatalf("HTTP popped %s: %v", m.Data, err)
			}
			got[v.I]++
			byHTTP++
		}
	}
	// The HTTP consumer starts first, so both surely take a share.
	httpPop()
	httpPop()
	sc := startShareConsumer(t, []string{n.KafkaAddr}, "workers", "split", func(shareDelivery) kgo.AckStatus { return kgo.AckAccept })
	err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) {
		httpPop()
		ds, _ := sc.deliveries()
		return byHTTP+len(ds) >= total, nil
	})
	ds, errs := sc.deliveries()
	if err != nil {
		t.Fatalf("HTTP received %d and Kafka %d of %d (errors %v): %v", byHTTP, len(ds), total, errs, err)
	}
	for _, d := range ds {
		var v struct{ I int }
		if err := json.Unmarshal([]byte(d.value), &v); err != nil {
			t.Fatalf("share consumer received %q: %v", d.value, err)
		}
		if d.deliveryCount != 1 {
			t.Errorf("record %s delivered with count %d", d.value, d.deliveryCount)
		}
		got[v.I]++
	}
	for i := range total {
		if got[i] != 1 {
			t.Errorf("record %d received %d times", i, got[i])
		}
	}
	if byHTTP == 0 || len(ds) == 0 {
		t.Errorf("the consumers did not split the queue: HTTP %d, Kafka %d", byHTTP, len(ds))
	}
	// Nothing is left for either: every record was acknowledged.
	sc.close()
	if extra := e2etest.PopAck(t, ctx, n.URL(), "split", "", "workers", 10, "completed"); len(extra) != 0 {
		t.Fatalf("records left after both consumers finished: %+v", extra)
	}
	t.Logf("HTTP received %d records, the share consumer %d", byHTTP, len(ds))
}

// TestKafkaShareReleaseAndReject: a record a share consumer releases is
// delivered again with its delivery count raised; one it rejects goes to
// the queue's dead-letter queue, as an HTTP consumer's "dlq" ack does.
// As for an HTTP consumer, the records after a released one in the same
// acquisition are delivered again too (docs/kafka.md): the rejected one
// reaches the dead-letter queue once all the same.
func TestKafkaShareReleaseAndReject(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: consumerProtocolClusterEnv()})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 2*time.Minute)
	produceValues(ctx, t, n, "jobs", 1, []string{"release-me", "reject-me", "accept-me"})

	sc := startShareConsumer(t, []string{n.KafkaAddr}, "share-workers", "jobs", func(d shareDelivery) kgo.AckStatus {
		switch {
		case d.value == "release-me" && d.deliveryCount == 1:
			return kgo.AckRelease
		case d.value == "reject-me":
			return kgo.AckReject
		}
		return kgo.AckAccept
	})
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		ds, _ := sc.deliveries()
		for _, d := range ds {
			if d.value == "release-me" && d.deliveryCount == 2 {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		ds, errs := sc.deliveries()
		t.Fatalf("the released record never came back (deliveries %+v, errors %v): %v", ds, errs, err)
	}
	var dlq struct {
		Messages []struct {
			Queue, ConsumerGroup string
			Offset               uint64
			Data                 any
		}
		Total int
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		e2etest.GetJSON(t, ctx, http.MethodGet, n.URL()+"/api/v1/dlq?queue=jobs", nil, 200, &dlq)
		return dlq.Total == 1, nil
	}); err != nil {
		t.Fatalf("the rejected record never reached the DLQ: %+v: %v", dlq, err)
	}
	if row := dlq.Messages[0]; row.ConsumerGroup != "share-workers" || row.Offset != 1 || row.Data != "reject-me" {
		t.Fatalf("dlq row: %+v", row)
	}
	ds, _ := sc.deliveries()
	counts := map[string]int{}
	for _, d := range ds {
		counts[d.value]++
	}
	if counts["release-me"] != 2 || counts["reject-me"] < 1 || counts["accept-me"] < 1 {
		t.Fatalf("deliveries: %+v", ds)
	}
}
