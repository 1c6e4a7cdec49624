package http

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// maintAnswer is GET /api/v1/system/maintenance.
type maintAnswer struct {
	MaintenanceMode    bool           `json:"maintenanceMode"`
	PopMaintenanceMode bool           `json:"popMaintenanceMode"`
	BufferedMessages   int64          `json:"bufferedMessages"`
	BufferHealthy      bool           `json:"bufferHealthy"`
	BufferStats        map[string]any `json:"bufferStats"`
}

func maintenance(t *testing.T, cl *e2etest.Client) maintAnswer {
	t.Helper()
	var a maintAnswer
	if code := cl.Do(http.MethodGet, "/api/v1/system/maintenance", nil, &a); code != http.StatusOK {
		t.Fatalf("GET maintenance: %d", code)
	}
	return a
}

func setMaintenance(t *testing.T, cl *e2etest.Client, path string, on bool) {
	t.Helper()
	if code := cl.Do(http.MethodPost, path, map[string]any{"enabled": on}, nil); code != http.StatusOK {
		t.Fatalf("POST %s %v: %d", path, on, code)
	}
}

// TestMaintenanceModeHoldsPushesUnderLoad: with HTTP pushes and a Kafka
// producer running, maintenance is switched on and off. HTTP pushes are
// answered 201 throughout and held while it is on; Kafka produce goes on
// (a produce must answer offsets). Afterwards every HTTP item and
// every Kafka record is in its log exactly once, in the order it was sent.
// Then a hold survives a node's kill and restart, and is delivered once
// the switch is off.
func TestMaintenanceModeHoldsPushesUnderLoad(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 6*time.Minute)
	cl := e2etest.NewClient(t, ctx, n)

	var code int
	if code = cl.Do(http.MethodPost, "/api/v1/system/maintenance", map[string]any{"enabled": "yes"}, nil); code != http.StatusBadRequest {
		t.Fatalf("enabled not a boolean: %d, want 400", code)
	}

	prod := e2etest.KafkaClient(t, n, kgo.DefaultProduceTopic("kmaint"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	e2etest.CreateTopicOn(ctx, t, prod, "kmaint", 1)

	// The load: one HTTP pusher (one request at a time, so its order is
	// defined) and one idempotent Kafka producer.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var httpSent []string
	held := 0
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; loadCtx.Err() == nil; i++ {
			items := e2etest.PushItems("hmaint", "p", fmt.Sprintf("h-%d-a", i), fmt.Sprintf("h-%d-b", i))
			res, code, err := e2etest.Push(ctx, n.URL(), items)
			if err != nil || code != http.StatusCreated || len(res) != 2 {
				t.Errorf("push %d: %d %v %+v", i, code, err, res)
				return
			}
			mu.Lock()
			httpSent = append(httpSent, fmt.Sprintf("h-%d-a", i), fmt.Sprintf("h-%d-b", i))
			if i > 0 && res[0].Offset == 0 {
				held += 2 // held: an offset is known once delivered
			}
			mu.Unlock()
		}
	}()
	var kafkaSent int
	var kerrs []error
	go func() {
		defer wg.Done()
		for i := 0; loadCtx.Err() == nil; i++ {
			rec := &kgo.Record{Value: []byte(fmt.Sprintf("k-%d", i)), Partition: 0}
			mu.Lock()
			kafkaSent++
			mu.Unlock()
			prod.Produce(ctx, rec, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					kerrs = append(kerrs, err)
					mu.Unlock()
				}
			})
			time.Sleep(2 * time.Millisecond) // a steady trickle, not a flood
		}
	}()

	wait := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	wait(time.Second)
	setMaintenance(t, cl, "/api/v1/system/maintenance", true)
	if a := maintenance(t, cl); !a.MaintenanceMode || !a.BufferHealthy {
		t.Fatalf("after enabling: %+v", a)
	}
	cl.Eventually(time.Minute, "pushes to be held", func() bool { return maintenance(t, cl).BufferedMessages >= 20 })
	// Kafka produce is neither held nor refused while it is on: a producer
	// that gives up after 2 s has its record written.
	impatient := e2etest.KafkaClient(t, n, kgo.DefaultProduceTopic("kmaint-accepted"), kgo.RecordDeliveryTimeout(2*time.Second),
		kgo.AllowAutoTopicCreation())
	if err := impatient.ProduceSync(ctx, &kgo.Record{Value: []byte("accepted")}).FirstErr(); err != nil {
		t.Fatalf("a Kafka produce while maintenance was on: %v", err)
	}
	heldAtOff := maintenance(t, cl).BufferedMessages
	setMaintenance(t, cl, "/api/v1/system/maintenance", false)
	offAt := time.Now()
	// The drain outpaces the pushes it holds meanwhile (they keep going to
	// the hold until it is empty, so nothing overtakes what it held).
	cl.Eventually(2*time.Minute, "the hold to drain under load", func() bool { return maintenance(t, cl).BufferedMessages == 0 })
	t.Logf("%d items held when switched off; the hold drained under load in %v", heldAtOff, time.Since(offAt).Round(time.Millisecond))
	wait(500 * time.Millisecond)
	stopLoad()
	wg.Wait()
	if err := prod.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if len(kerrs) > 0 {
		t.Fatalf("kafka produce failed: %v", kerrs[0])
	}
	if held == 0 {
		t.Fatal("no HTTP push was held while maintenance was on")
	}
	cl.Eventually(time.Minute, "the hold to drain", func() bool { return maintenance(t, cl).BufferedMessages == 0 })

	checkLogExactlyOnce(t, cl, "hmaint", "p", httpSent)
	cons := e2etest.KafkaClient(t, n, kgo.ConsumeTopics("kmaint"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	recs := e2etest.ConsumeN(ctx, t, cons, kafkaSent)
	for i, r := range recs {
		if want := fmt.Sprintf("k-%d", i); string(r.Value) != want {
			t.Fatalf("kafka record %d is %q, want %q (lost, doubled or reordered)", i, r.Value, want)
		}
	}
	t.Logf("%d HTTP items (%d held), %d Kafka records, each once and in order", len(httpSent), held, kafkaSent)

	// A hold survives a kill and restart of the node.
	setMaintenance(t, cl, "/api/v1/system/maintenance", true)
	var later []string
	for i := 0; i < 25; i++ {
		p := []string{fmt.Sprintf("r-%d-a", i), fmt.Sprintf("r-%d-b", i)}
		cl.Push(e2etest.PushItems("hmaint", "p", p[0], p[1])...)
		later = append(later, p...)
	}
	n.Kill()
	if err := c.Start(n); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if a := maintenance(t, cl); !a.MaintenanceMode || a.BufferedMessages != 50 {
		t.Fatalf("after a restart: %+v, want maintenance on and 50 held", a)
	}
	setMaintenance(t, cl, "/api/v1/system/maintenance", false)
	cl.Eventually(time.Minute, "the hold to drain after the restart", func() bool { return maintenance(t, cl).BufferedMessages == 0 })
	checkLogExactlyOnce(t, cl, "hmaint", "p", append(httpSent, later...))
}

// checkLogExactlyOnce fails t unless the partition's log is exactly want,
// in order.
func checkLogExactlyOnce(t *testing.T, cl *e2etest.Client, queue, partition string, want []string) {
	t.Helper()
	var got []string
	cl.Eventually(time.Minute, "every item in the log", func() bool {
		got = readLog(t, cl, queue, partition)
		return len(got) >= len(want)
	})
	if len(got) != len(want) {
		t.Fatalf("log has %d items, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("log item %d is %q, want %q (lost, doubled or reordered)", i, got[i], want[i])
		}
	}
}

// TestPopMaintenanceEmptiesPops: while pop maintenance is on every pop is
// empty (the messages stay), and once off they are delivered.
func TestPopMaintenanceEmptiesPops(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	cl := e2etest.NewClient(t, ctx, c.Nodes[0])

	cl.Push(e2etest.PushItems("pmaint", "p", 1, 2, 3)...)
	if code := cl.Do(http.MethodPost, "/api/v1/system/maintenance/pop", map[string]any{"enabled": 1}, nil); code != http.StatusBadRequest {
		t.Fatalf("enabled not a boolean: %d, want 400", code)
	}
	var a struct {
		PopMaintenanceMode bool   `json:"popMaintenanceMode"`
		Message            string `json:"message"`
	}
	if code := cl.Do(http.MethodPost, "/api/v1/system/maintenance/pop", map[string]any{"enabled": true}, &a); code != http.StatusOK || !a.PopMaintenanceMode || a.Message == "" {
		t.Fatalf("enable pop maintenance: %d %+v", code, a)
	}
	if code := cl.Do(http.MethodGet, "/api/v1/system/maintenance/pop", nil, &a); code != http.StatusOK || !a.PopMaintenanceMode {
		t.Fatalf("GET pop maintenance: %d %+v", code, a)
	}
	cl.PopEmpty(e2etest.PopPath("pmaint", "batch=10", "wait=false"))
	cl.PopEmpty(e2etest.PopPath("pmaint", "batch=10", "consumerGroup=g", "wait=true", "timeout=300"))
	if m := maintenance(t, cl); !m.PopMaintenanceMode || m.MaintenanceMode {
		t.Fatalf("GET maintenance: %+v", m)
	}
	setMaintenance(t, cl, "/api/v1/system/maintenance/pop", false)
	cl.MustPop(e2etest.PopPath("pmaint", "batch=10"), 3)
	cl.MustPop(e2etest.PopPath("pmaint", "batch=10", "consumerGroup=g"), 3)
}

// readLog reads a partition's whole log, page by page, as JSON strings.
func readLog(t *testing.T, cl *e2etest.Client, queue, partition string) []string {
	t.Helper()
	var got []string
	for offset := uint64(0); ; {
		var out struct {
			Entries []struct {
				Records       []e2etest.FetchRecord `json:"records"`
				HighWatermark uint64                `json:"highWatermark"`
				Error         string                `json:"error"`
			} `json:"entries"`
		}
		body := map[string]any{"entries": []map[string]any{{"queue": queue, "partition": partition, "offset": offset, "maxBytes": 8 << 20}}}
		if code := cl.Do(http.MethodPost, "/api/v1/fetch", body, &out); code != http.StatusOK || len(out.Entries) != 1 || out.Entries[0].Error != "" {
			t.Fatalf("fetch %s/%s at %d: %d %+v", queue, partition, offset, code, out)
		}
		e := out.Entries[0]
		for _, r := range e.Records {
			var s string
			if err := json.Unmarshal(r.Payload, &s); err != nil {
				t.Fatalf("payload %s: %v", r.Payload, err)
			}
			got = append(got, s)
			offset = r.Offset + 1
		}
		if len(e.Records) == 0 || offset >= e.HighWatermark {
			return got
		}
	}
}

// TestMaintenanceModeAcrossNodes: the switch set through one node holds
// pushes made through every node; the hold survives a node's restart and is
// delivered once the switch is turned off through another node, each
// item once and in order.
func TestMaintenanceModeAcrossNodes(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 5*time.Minute)
	cl := e2etest.NewClient(t, ctx, c.Nodes[0])
	setMaintenance(t, cl, "/api/v1/system/maintenance", true)
	for _, n := range c.Nodes {
		on := cl.On(n)
		on.Eventually(time.Minute, "the node to hold pushes", func() bool {
			a := maintenance(t, on)
			return a.MaintenanceMode && a.BufferStats["holdingOnThisNode"] == true
		})
	}
	sent := make([][]string, len(c.Nodes))
	for i := 0; i < 30; i++ {
		for k, n := range c.Nodes {
			p := fmt.Sprintf("p%d", k)
			items := []string{fmt.Sprintf("%s-%d-a", p, i), fmt.Sprintf("%s-%d-b", p, i)}
			res := cl.On(n).Push(e2etest.PushItems("xmaint", p, items[0], items[1])...)
			if res[0].Status != "queued" || res[1].Offset != 0 {
				t.Fatalf("push through node %d while held: %+v", n.ID, res)
			}
			sent[k] = append(sent[k], items...)
		}
	}
	if a := maintenance(t, cl.On(c.Nodes[2])); a.BufferedMessages != 180 {
		t.Fatalf("held: %+v, want 180", a)
	}
	// Nothing is delivered while held.
	cl.On(c.Nodes[1]).PopEmpty(e2etest.PopPath("xmaint", "batch=10"))

	// A node restarts with the hold in place.
	c.Nodes[2].Kill()
	if err := c.Start(c.Nodes[2]); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAllHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	setMaintenance(t, cl.On(c.Nodes[1]), "/api/v1/system/maintenance", false)
	for _, n := range c.Nodes {
		on := cl.On(n)
		on.Eventually(2*time.Minute, "the hold to drain", func() bool { return maintenance(t, on).BufferedMessages == 0 })
	}
	for k := range c.Nodes {
		checkLogExactlyOnce(t, cl.On(c.Nodes[k]), "xmaint", fmt.Sprintf("p%d", k), sent[k])
	}
}
