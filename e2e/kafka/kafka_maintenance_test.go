package kafka

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// TestPopMaintenancePausesShareGroupsNotFetch: pop maintenance empties a
// share group's fetches (they pop, docs/http-api.md "Maintenance mode")
// until it is off, then every record is delivered once; a classic
// consumer group, which fetches by offset, keeps reading meanwhile.
func TestPopMaintenancePausesShareGroupsNotFetch(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: consumerProtocolClusterEnv()})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 3*time.Minute)
	cl := e2etest.NewClient(t, ctx, n)

	produceValues(ctx, t, n, "kpm", 1, nil)
	// The group subscribes from the start before anything is produced.
	cl.PopEmpty(e2etest.PopPath("kpm", "consumerGroup=workers", "subscriptionMode=all"))
	const total = 20
	values := make([]string, total)
	for i := range values {
		values[i] = fmt.Sprintf("v-%d", i)
	}
	prod := e2etest.KafkaClient(t, n, kgo.DefaultProduceTopic("kpm"))
	recs := make([]*kgo.Record, total)
	for i, v := range values {
		recs[i] = &kgo.Record{Value: []byte(v)}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	if code := cl.Do(http.MethodPost, "/api/v1/system/maintenance/pop", map[string]any{"enabled": true}, nil); code != http.StatusOK {
		t.Fatalf("enable pop maintenance: %d", code)
	}
	sc := startShareConsumer(t, []string{n.KafkaAddr}, "workers", "kpm", func(shareDelivery) kgo.AckStatus { return kgo.AckAccept })

	// A classic consumer group reads every record meanwhile.
	cons := e2etest.KafkaClient(t, n, kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("kpm"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if recs := e2etest.ConsumeN(ctx, t, cons, total); len(recs) != total {
		t.Fatalf("classic group read %d records", len(recs))
	}
	// The share consumer, polling all along, got nothing (an observation
	// window, not a synchronisation: it polls every 500 ms).
	observe := time.NewTimer(3 * time.Second)
	select {
	case <-observe.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if ds, errs := sc.deliveries(); len(ds) != 0 || len(errs) != 0 {
		t.Fatalf("share consumer during pop maintenance: %d records, errors %v", len(ds), errs)
	}

	if code := cl.Do(http.MethodPost, "/api/v1/system/maintenance/pop", map[string]any{"enabled": false}, nil); code != http.StatusOK {
		t.Fatalf("disable pop maintenance: %d", code)
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		ds, _ := sc.deliveries()
		return len(ds) >= total, nil
	}); err != nil {
		t.Fatal(err)
	}
	ds, errs := sc.deliveries()
	seen := map[string]int{}
	for _, d := range ds {
		seen[d.value]++
	}
	for _, v := range values {
		if seen[v] != 1 {
			t.Errorf("%s delivered %d times (errors %v)", v, seen[v], errs)
		}
	}
}
