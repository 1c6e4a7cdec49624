package kafka

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// throttleSeen counts the throttles a kgo client is answered.
type throttleSeen struct{ n, maxMs atomic.Int64 }

func (s *throttleSeen) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		s.n.Add(1)
		if ms := d.Milliseconds(); ms > s.maxMs.Load() {
			s.maxMs.Store(ms)
		}
	}
}

// Client quotas through kadm on a three-node cluster: set on node 1,
// described on nodes 2 and 3; then a producer whose client id has a low
// producer_byte_rate is answered throttle_time_ms > 0 by the partition's
// leader, gets no error, and every record it sent is there to consume.
func TestKafkaAdminClientQuotas(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	const rate = 20_000 // bytes/s
	name := func(s string) *string { return &s }
	res, err := adminOf(e2etest.KafkaClient(t, c.Nodes[0])).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: name("quota-slow")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user"}, {Type: "client-id"}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 50}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("alter %v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
	for _, n := range c.Nodes[1:] {
		qs, err := adminOf(e2etest.KafkaClient(t, n)).DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{
			{Type: "client-id", MatchName: name("quota-slow"), MatchType: kmsg.QuotasMatchTypeExact}})
		if err != nil || len(qs) != 1 || len(qs[0].Values) != 1 || qs[0].Values[0].Value != rate {
			t.Fatalf("describe on %s: %v %+v", n.KafkaAddr, err, qs)
		}
		all, err := adminOf(e2etest.KafkaClient(t, n)).DescribeClientQuotas(ctx, false, nil)
		if err != nil || len(all) != 2 {
			t.Fatalf("describe all on %s: %v %+v", n.KafkaAddr, err, all)
		}
	}

	createTopics(ctx, t, adminOf(e2etest.KafkaClient(t, c.Nodes[0])), 1, "quota-orders")
	seen := &throttleSeen{}
	// Uncompressed: the rate meters the batches' bytes as sent.
	prod := e2etest.KafkaClient(t, c.Nodes[1], kgo.ClientID("quota-slow"), kgo.WithHooks(seen),
		kgo.DefaultProduceTopic("quota-orders"), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := bytes.Repeat([]byte("q"), 1000)
	sent, began := 0, time.Now()
	// Each node's cache catches up within a second or so; keep producing
	// (10 KB a round) until a throttle comes back.
	for seen.n.Load() == 0 {
		if ctx.Err() != nil || time.Since(began) > 30*time.Second {
			t.Fatalf("no throttle after %d records of 1 KB in %v at %d B/s", sent, time.Since(began), rate)
		}
		var recs []*kgo.Record
		for i := 0; i < 10; i++ {
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(sent + i)), Value: value})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce after %d records: %v", sent, err)
		}
		sent += len(recs)
	}
	t.Logf("throttled after %d records, %v; longest throttle %d ms", sent, time.Since(began), seen.maxMs.Load())

	// Throttled, the producer writes at about the rate: over 4 s at most
	// the rate plus what the throttles already answered let through.
	start, bytesFrom := time.Now(), sent
	for time.Since(start) < 4*time.Second {
		var recs []*kgo.Record
		for i := 0; i < 10; i++ {
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(sent + i)), Value: value})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce after %d records: %v", sent, err)
		}
		sent += len(recs)
	}
	measured := float64((sent-bytesFrom)*len(value)) / time.Since(start).Seconds()
	t.Logf("throttled rate %.0f B/s for a quota of %d B/s; %d throttles, longest %d ms", measured, rate, seen.n.Load(), seen.maxMs.Load())
	if measured > 2*rate {
		t.Fatalf("throttled producer wrote %.0f B/s, quota %d B/s", measured, rate)
	}

	cons := e2etest.KafkaClient(t, c.Nodes[2], kgo.ConsumeTopics("quota-orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]bool{}
	for len(got) < sent {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", len(got), sent)
		}
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Key)] = true })
	}
}
