package http

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/wire"
)

// The Streams routes (issue 34), driven as Queen's SDKs drive them: register
// a query, pop a batch from the source, read the partition's state, then
// commit state writes, sink pushes and the source's cumulative ack in one
// cycle.

type streamsClient struct {
	*e2etest.Client
	t *testing.T
}

type streamQueryAns struct {
	Success    bool   `json:"success"`
	QueryID    string `json:"query_id"`
	Name       string `json:"name"`
	ConfigHash string `json:"config_hash"`
	Fresh      bool   `json:"fresh"`
	Reset      bool   `json:"reset"`
	Error      string `json:"error"`
}

type streamRowAns struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	UpdatedAt string          `json:"updated_at"`
}

type streamCycleAns struct {
	Success         bool   `json:"success"`
	QueryID         string `json:"query_id"`
	PartitionID     string `json:"partition_id"`
	QueueName       string `json:"queueName"`
	StateOpsApplied int    `json:"state_ops_applied"`
	PushResults     []struct {
		Status string `json:"status"`
	} `json:"push_results"`
	AckResult *struct {
		Success       bool `json:"success"`
		Count         int  `json:"count"`
		LeaseReleased bool `json:"lease_released"`
		DLQ           bool `json:"dlq"`
	} `json:"ack_result"`
	Error string `json:"error"`
}

func (s streamsClient) register(body map[string]any) (streamQueryAns, int) {
	s.t.Helper()
	var out streamQueryAns
	code := s.Do(http.MethodPost, "/streams/v1/queries", body, &out)
	return out, code
}

func (s streamsClient) mustRegister(name, source, sink, hash string) streamQueryAns {
	s.t.Helper()
	q, code := s.register(map[string]any{"name": name, "source_queue": source, "sink_queue": sink, "config_hash": hash})
	if code != http.StatusOK || !q.Success || q.QueryID == "" {
		s.t.Fatalf("register %s: %d %+v", name, code, q)
	}
	return q
}

func (s streamsClient) state(body map[string]any) []streamRowAns {
	s.t.Helper()
	var out struct {
		Success bool           `json:"success"`
		Rows    []streamRowAns `json:"rows"`
	}
	if code := s.Do(http.MethodPost, "/streams/v1/state/get", body, &out); code != http.StatusOK || !out.Success {
		s.t.Fatalf("state/get %v: %d %+v", body, code, out)
	}
	return out.Rows
}

func (s streamsClient) cycle(body map[string]any) streamCycleAns {
	s.t.Helper()
	var out streamCycleAns
	if code := s.Do(http.MethodPost, "/streams/v1/cycle", body, &out); code != http.StatusOK {
		s.t.Fatalf("cycle: %d %+v", code, out)
	}
	return out
}

func (s streamsClient) mustCycle(body map[string]any) streamCycleAns {
	s.t.Helper()
	out := s.cycle(body)
	if !out.Success {
		s.t.Fatalf("cycle failed: %+v", out)
	}
	return out
}

// ack is the cycle's ack of the last message of msgs.
func ack(msgs []e2etest.PopMessage, status string) map[string]any {
	last := msgs[len(msgs)-1]
	return map[string]any{"transactionId": last.TransactionID, "leaseId": last.LeaseID, "status": status, "count": len(msgs)}
}

func sinkPayloads(t *testing.T, cl *e2etest.Client, queue, partition string) []string {
	t.Helper()
	recs, _, _ := cl.Log(queue, partition)
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Payload))
	}
	return out
}

// newStreams starts a node and waits for its groups to reach the format
// whose transactions carry a cycle's acknowledgment (the leader raises it
// a moment after start).
func newStreams(t *testing.T) (streamsClient, *harness.Cluster) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	cl := e2etest.NewClient(t, e2etest.Deadline(t, 3*time.Minute), c.Nodes[0])
	waitFormat(cl, wire.FormatV3)
	return streamsClient{cl, t}, c
}

// A tumbling 10-unit window sum: rows keyed by window with windowEnd, read
// back ripe (windowEnd <= the batch's watermark), emitted to the sink and
// deleted in the cycle that closes them.
func TestStreamsWindowedSum(t *testing.T) {
	s, _ := newStreams(t)
	type ev struct {
		TS     int `json:"ts"`
		Amount int `json:"amount"`
	}
	var items []e2etest.PushItem
	for i, ts := range []int{1, 2, 5, 12, 15, 23} {
		items = append(items, e2etest.PushItem{Queue: "ws-src", Partition: "p", Payload: ev{ts, i + 1}})
	}
	s.Push(items...)
	q := s.mustRegister("window-sum", "ws-src", "ws-sink", "h1")
	group := "streams.window-sum"
	var pid string
	for _, batch := range []int{4, 2} {
		a := s.MustPop(e2etest.PopPath("ws-src", fmt.Sprint("batch=", batch), "consumerGroup="+group), batch)
		pid = a.Messages[0].PartitionID
		sums := map[string]map[string]int{}
		watermark := 0
		for _, m := range a.Messages {
			var e ev
			if err := json.Unmarshal(m.Data, &e); err != nil {
				t.Fatal(err)
			}
			start := e.TS / 10 * 10
			key := fmt.Sprintf("w:%03d", start)
			if sums[key] == nil {
				sums[key] = map[string]int{"windowStart": start, "windowEnd": start + 10}
				for _, r := range s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid, "keys": []string{key}}) {
					var v map[string]int
					_ = json.Unmarshal(r.Value, &v)
					sums[key]["sum"] = v["sum"]
				}
			}
			sums[key]["sum"] += e.Amount
			watermark = max(watermark, e.TS)
		}
		var ops []map[string]any
		for k, v := range sums {
			ops = append(ops, map[string]any{"type": "upsert", "key": k, "value": v})
		}
		// Windows already stored that the watermark closes, plus those of
		// this batch.
		var emit []map[string]any
		ripe := map[string]bool{}
		for _, r := range s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid, "ripe_at_or_before": watermark}) {
			ripe[r.Key] = true
		}
		for k, v := range sums {
			if v["windowEnd"] <= watermark {
				ripe[k] = true
			}
		}
		keys := make([]string, 0, len(ripe))
		for k := range ripe {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sum := sums[k]
			if sum == nil {
				rows := s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid, "keys": []string{k}})
				_ = json.Unmarshal(rows[0].Value, &sum)
			}
			emit = append(emit, map[string]any{"queue": "ws-sink", "partition": "p", "payload": sum})
			ops = append(ops, map[string]any{"type": "delete", "key": k})
		}
		r := s.mustCycle(map[string]any{"query_id": q.QueryID, "partition_id": pid, "consumer_group": group,
			"state_ops": ops, "push_items": emit, "ack": ack(a.Messages, "completed")})
		if r.AckResult == nil || !r.AckResult.Success || !r.AckResult.LeaseReleased || r.AckResult.Count != batch ||
			r.QueueName != "ws-src" || r.StateOpsApplied != len(ops) || len(r.PushResults) != len(emit) {
			t.Fatalf("cycle: %+v", r)
		}
	}
	got := sinkPayloads(t, s.Client, "ws-sink", "p")
	want := []string{`{"sum":6,"windowEnd":10,"windowStart":0}`, `{"sum":9,"windowEnd":20,"windowStart":10}`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sink: %v, want %v", got, want)
	}
	// The open window is the only row left: it is not ripe at 29, it is at 30.
	rows := s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid})
	if len(rows) != 1 || rows[0].Key != "w:020" || string(rows[0].Value) != `{"sum":6,"windowEnd":30,"windowStart":20}` || rows[0].UpdatedAt == "" {
		t.Fatalf("state: %+v", rows)
	}
	if r := s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid, "ripe_at_or_before": 29}); len(r) != 0 {
		t.Fatalf("ripe at 29: %+v", r)
	}
	if r := s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid, "ripe_at_or_before": 30, "key_prefix": "w:0"}); len(r) != 1 {
		t.Fatalf("ripe at 30: %+v", r)
	}
	if r := s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid, "key_prefix": "x"}); len(r) != 0 {
		t.Fatalf("prefix x: %+v", r)
	}
	// The consumer group read everything: nothing comes back.
	s.PopEmpty(e2etest.PopPath("ws-src", "consumerGroup="+group))
	// The scrape counts the query, its one row and the two cycles.
	fams, _ := e2etest.Scrape(e2etest.Deadline(t, time.Minute), t, s.Base)
	sum := func(name string) float64 {
		total := 0.0
		if f := fams[name]; f != nil {
			for _, m := range f.GetMetric() {
				total += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		return total
	}
	if sum("queen_streams_queries") != 1 || sum("queen_streams_state_rows") != 1 || sum("queen_streams_state_bytes") == 0 {
		t.Fatalf("streams gauges: queries %v rows %v bytes %v", sum("queen_streams_queries"), sum("queen_streams_state_rows"), sum("queen_streams_state_bytes"))
	}
	if v, ok := e2etest.SampleValue(fams["queen_streams_cycles_total"], map[string]string{"outcome": "committed"}); !ok || v != 2 {
		t.Fatalf("committed cycles: %v %v", v, ok)
	}
	// The dashboard's listing: the query, its state's size, its source's
	// lag (its one consumer read everything).
	var list struct {
		Queries []struct {
			QueryID    string  `json:"query_id"`
			Name       string  `json:"name"`
			StateRows  int     `json:"state_rows"`
			StateBytes int     `json:"state_bytes"`
			Lag        *uint64 `json:"lag"`
		} `json:"queries"`
	}
	if code := s.Do(http.MethodGet, "/streams/v1/queries", nil, &list); code != http.StatusOK || len(list.Queries) != 1 {
		t.Fatalf("listing: %d %+v", code, list)
	}
	if l := list.Queries[0]; l.QueryID != q.QueryID || l.Name != "window-sum" || l.StateRows != 1 || l.StateBytes == 0 || l.Lag == nil || *l.Lag != 0 {
		t.Fatalf("listing: %+v", l)
	}
	if code, _, body := e2etest.RawRequest(t, e2etest.Deadline(t, time.Minute), http.MethodGet, s.Base+"/assets/pages/streams.js", ""); code != http.StatusOK || !strings.Contains(string(body), "/streams/v1/queries") {
		t.Fatalf("dashboard page: %d", code)
	}
	// The reserved namespace is not the KV routes' to read or write.
	if code := s.Do(http.MethodGet, "/api/v1/kv/_streams/q%2F"+q.QueryID, nil, nil); code != http.StatusBadRequest {
		t.Fatalf("KV read of the streams namespace: %d", code)
	}
	if code := s.Do(http.MethodPost, "/api/v1/kv", map[string]any{"operations": []any{map[string]any{"op": "put", "ns": "_streams", "key": "q/x", "value": 1}}}, nil); code != http.StatusBadRequest {
		t.Fatalf("KV write of the streams namespace: %d", code)
	}
	var ns struct {
		Namespaces []string `json:"namespaces"`
	}
	if code := s.Do(http.MethodGet, "/api/v1/resources/kv/namespaces", nil, &ns); code != http.StatusOK || slices.Contains(ns.Namespaces, "_streams") {
		t.Fatalf("KV namespaces: %d %v", code, ns.Namespaces)
	}
}

// Dedup: a row per id seen; a message whose id is seen is not emitted, and
// a sink push repeating a transaction id is answered duplicate without
// failing the cycle.
func TestStreamsDedup(t *testing.T) {
	s, _ := newStreams(t)
	for _, id := range []string{"a", "b", "a", "c", "b", "d"} {
		s.Push(e2etest.PushItem{Queue: "dd-src", Partition: "p", Payload: map[string]string{"id": id}})
	}
	q := s.mustRegister("dedup", "dd-src", "dd-sink", "h")
	for _, batch := range []int{3, 3} {
		a := s.MustPop(e2etest.PopPath("dd-src", fmt.Sprint("batch=", batch)), batch)
		pid := a.Messages[0].PartitionID
		var ids []string
		for _, m := range a.Messages {
			var v map[string]string
			_ = json.Unmarshal(m.Data, &v)
			ids = append(ids, "seen:"+v["id"])
		}
		seen := map[string]bool{}
		for _, r := range s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid, "keys": ids}) {
			seen[r.Key] = true
		}
		var ops, emit []map[string]any
		for _, k := range ids {
			if seen[k] {
				continue
			}
			seen[k] = true
			ops = append(ops, map[string]any{"type": "upsert", "key": k, "value": map[string]any{"firstSeen": true}})
			emit = append(emit, map[string]any{"queue": "dd-sink", "partition": "p", "payload": k, "transactionId": "dd-" + k})
		}
		r := s.mustCycle(map[string]any{"query_id": q.QueryID, "partition_id": pid, "state_ops": ops, "push_items": emit,
			"ack": ack(a.Messages, "completed")})
		for _, p := range r.PushResults {
			if p.Status != "queued" {
				t.Fatalf("push results: %+v", r.PushResults)
			}
		}
	}
	if got := sinkPayloads(t, s.Client, "dd-sink", "p"); fmt.Sprint(got) != `["seen:a" "seen:b" "seen:c" "seen:d"]` {
		t.Fatalf("sink: %v", got)
	}
	// A sink push that repeats a transaction id: skipped as a push skips
	// it, the cycle commits.
	s.Push(e2etest.PushItem{Queue: "dd-src", Partition: "p", Payload: map[string]string{"id": "e"}})
	a := s.MustPop(e2etest.PopPath("dd-src"), 1)
	r := s.mustCycle(map[string]any{"query_id": q.QueryID, "partition_id": a.Messages[0].PartitionID,
		"push_items": []map[string]any{{"queue": "dd-sink", "partition": "p", "payload": "seen:a", "transactionId": "dd-seen:a"},
			{"queue": "dd-sink", "partition": "p", "payload": "seen:e", "transactionId": "dd-seen:e"}},
		"ack": ack(a.Messages, "completed")})
	if len(r.PushResults) != 2 || r.PushResults[0].Status != "duplicate" || r.PushResults[1].Status != "queued" {
		t.Fatalf("duplicate sink push: %+v", r.PushResults)
	}
	if got := sinkPayloads(t, s.Client, "dd-sink", "p"); len(got) != 5 {
		t.Fatalf("sink: %v", got)
	}
}

// A token bucket of two tokens per cycle: each cycle passes two messages
// and keeps the lease (release_lease false), so the rest of the batch comes
// back only when it expires, in order.
func TestStreamsTokenBucketGateKeepsFIFOAcrossLeaseExpiry(t *testing.T) {
	s, _ := newStreams(t)
	var items []e2etest.PushItem
	for i := range 7 {
		items = append(items, e2etest.PushItem{Queue: "tb-src", Partition: "p", Payload: i})
	}
	s.Push(items...)
	q := s.mustRegister("gate", "tb-src", "tb-sink", "h")
	passed := 0
	for cycle := 0; passed < 7; cycle++ {
		if cycle > 6 {
			t.Fatalf("gate did not drain: passed %d", passed)
		}
		var a e2etest.PopAnswer
		s.Eventually(30*time.Second, "the gated batch after its lease expires", func() bool {
			got, code := s.Pop(e2etest.PopPath("tb-src", "batch=10", "leaseSeconds=1"))
			a = got
			return code == http.StatusOK
		})
		if string(a.Messages[0].Data) != fmt.Sprint(passed) {
			t.Fatalf("cycle %d: batch starts at %s, want %d (FIFO)", cycle, a.Messages[0].Data, passed)
		}
		pid := a.Messages[0].PartitionID
		bucket := s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid, "keys": []string{"bucket"}})
		used := 0
		if len(bucket) == 1 {
			var v map[string]int
			_ = json.Unmarshal(bucket[0].Value, &v)
			used = v["cycles"]
		}
		take := a.Messages[:min(2, len(a.Messages))]
		var emit []map[string]any
		for _, m := range take {
			emit = append(emit, map[string]any{"queue": "tb-sink", "partition": "p", "payload": json.RawMessage(m.Data)})
		}
		release := len(take) == len(a.Messages)
		r := s.mustCycle(map[string]any{"query_id": q.QueryID, "partition_id": pid, "push_items": emit,
			"state_ops":     []map[string]any{{"type": "upsert", "key": "bucket", "value": map[string]int{"cycles": used + 1}}},
			"ack":           ack(take, "completed"),
			"release_lease": release})
		if r.AckResult.LeaseReleased != release {
			t.Fatalf("cycle %d: lease released %v, want %v", cycle, r.AckResult.LeaseReleased, release)
		}
		passed += len(take)
		if !release {
			// The lease is kept: nothing of the partition until it expires.
			s.PopEmpty(e2etest.PopPath("tb-src"))
		}
	}
	if got := sinkPayloads(t, s.Client, "tb-sink", "p"); fmt.Sprint(got) != "[0 1 2 3 4 5 6]" {
		t.Fatalf("sink order: %v", got)
	}
	s.PopEmpty(e2etest.PopPath("tb-src"))
}

// A cycle that cannot apply changes nothing: no sink push, no state row,
// the cursor where it was (a sink queue its pushes named may be created,
// as by a rolled-back transaction). A failed cycle dead-letters the message it names
// and moves past it.
func TestStreamsFailedCycleRollsBackWhole(t *testing.T) {
	s, _ := newStreams(t)
	s.Configure(map[string]any{"queue": "fc-src", "options": map[string]any{"dlqAfterMaxRetries": true, "leaseTime": 60}})
	s.Push(e2etest.PushItems("fc-src", "p", "m0", "m1", "m2")...)
	s.Push(e2etest.PushItem{Queue: "fc-sink", Partition: "p", Payload: "seed"})
	q := s.mustRegister("fail", "fc-src", "fc-sink", "h")
	a := s.MustPop(e2etest.PopPath("fc-src", "batch=2", "leaseSeconds=2"), 2)
	pid := a.Messages[0].PartitionID
	body := func(a map[string]any) map[string]any {
		return map[string]any{"query_id": q.QueryID, "partition_id": pid,
			"state_ops":  []map[string]any{{"type": "upsert", "key": "k", "value": 1}},
			"push_items": []map[string]any{{"queue": "fc-sink", "partition": "p", "payload": "out"}, {"queue": "fc-new", "payload": "out"}},
			"ack":        a}
	}
	wrongLease := ack(a.Messages, "completed")
	wrongLease["leaseId"] = "01890a5d-ac96-774b-bcce-b302099a8057"
	unknownMsg := ack(a.Messages, "completed")
	unknownMsg["transactionId"] = "nope"
	for name, b := range map[string]map[string]any{
		"a lease that is not the group's": body(wrongLease),
		"a message not in the partition":  body(unknownMsg),
		"an unknown query":                func() map[string]any { x := body(ack(a.Messages, "completed")); x["query_id"] = "nope"; return x }(),
		"a bad state op": func() map[string]any {
			x := body(ack(a.Messages, "completed"))
			x["state_ops"] = []any{map[string]any{"type": "merge", "key": "k"}}
			return x
		}(),
	} {
		r := s.cycle(b)
		if r.Success || r.Error == "" {
			t.Fatalf("%s: %+v", name, r)
		}
		if got := sinkPayloads(t, s.Client, "fc-sink", "p"); fmt.Sprint(got) != `["seed"]` {
			t.Fatalf("%s pushed: %v", name, got)
		}
		if rows := s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid}); len(rows) != 0 {
			t.Fatalf("%s wrote state: %+v", name, rows)
		}
	}
	// The cursor did not move: after the lease expires the same batch.
	var again e2etest.PopAnswer
	s.Eventually(30*time.Second, "redelivery after the lease", func() bool {
		got, code := s.Pop(e2etest.PopPath("fc-src", "batch=2"))
		again = got
		return code == http.StatusOK
	})
	if again.Messages[0].TransactionID != a.Messages[0].TransactionID || len(again.Messages) != 2 {
		t.Fatalf("after rollbacks: %+v", again.Messages)
	}
	// status failed: one DLQ row for the named message, past it.
	r := s.mustCycle(map[string]any{"query_id": q.QueryID, "partition_id": pid, "ack": ack(again.Messages[:1], "failed")})
	if !r.AckResult.DLQ || !r.AckResult.LeaseReleased {
		t.Fatalf("failed cycle: %+v", r.AckResult)
	}
	next := s.MustPop(e2etest.PopPath("fc-src", "batch=5"), 2)
	if string(next.Messages[0].Data) != `"m1"` {
		t.Fatalf("after the failed cycle: %s", payloads(next))
	}
	var dlq struct {
		Messages []struct {
			ErrorMessage string `json:"errorMessage"`
		} `json:"messages"`
		Total int `json:"total"`
	}
	s.Do(http.MethodGet, "/api/v1/dlq?queue=fc-src", nil, &dlq)
	if len(dlq.Messages) != 1 {
		t.Fatalf("dlq: %+v", dlq)
	}
}

// Registration: the same hash keeps the query, another is refused unless
// reset, and a reset drops the state.
func TestStreamsResetOnChangedHash(t *testing.T) {
	s, _ := newStreams(t)
	s.Push(e2etest.PushItems("rs-src", "p", "m0")...)
	q := s.mustRegister("agg", "rs-src", "", "h1")
	if !q.Fresh || q.Reset || q.ConfigHash != "h1" {
		t.Fatalf("first: %+v", q)
	}
	a := s.MustPop(e2etest.PopPath("rs-src"), 1)
	pid := a.Messages[0].PartitionID
	s.mustCycle(map[string]any{"query_id": q.QueryID, "partition_id": pid,
		"state_ops": []map[string]any{{"type": "upsert", "key": "total", "value": map[string]int{"n": 1}}}, "ack": ack(a.Messages, "completed")})
	if rows := s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid}); len(rows) != 1 {
		t.Fatalf("state: %+v", rows)
	}
	again := s.mustRegister("agg", "rs-src", "rs-sink", "h1")
	if again.Fresh || again.Reset || again.QueryID != q.QueryID {
		t.Fatalf("same hash: %+v", again)
	}
	conflict, code := s.register(map[string]any{"name": "agg", "source_queue": "rs-src", "config_hash": "h2"})
	if code != http.StatusConflict || conflict.Success || conflict.QueryID != q.QueryID || conflict.Name != "agg" || conflict.Error == "" {
		t.Fatalf("changed hash without reset: %d %+v", code, conflict)
	}
	if rows := s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid}); len(rows) != 1 {
		t.Fatalf("state after a refused change: %+v", rows)
	}
	reset, code := s.register(map[string]any{"name": "agg", "source_queue": "rs-src", "config_hash": "h2", "reset": true})
	if code != http.StatusOK || !reset.Success || !reset.Reset || reset.Fresh || reset.QueryID != q.QueryID || reset.ConfigHash != "h2" {
		t.Fatalf("reset: %d %+v", code, reset)
	}
	if rows := s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid}); len(rows) != 0 {
		t.Fatalf("state after reset: %+v", rows)
	}
	if same := s.mustRegister("agg", "rs-src", "", "h2"); same.Fresh || same.Reset {
		t.Fatalf("after reset: %+v", same)
	}
	// A cycle with nothing to do (an idle tick) commits nothing.
	if r := s.mustCycle(map[string]any{"query_id": q.QueryID, "partition_id": pid}); r.AckResult == nil || !r.AckResult.Success || r.StateOpsApplied != 0 {
		t.Fatalf("empty cycle: %+v", r)
	}
	for _, body := range []map[string]any{{"source_queue": "x", "config_hash": "h"}, {"name": "n", "config_hash": "h"}, {"name": "n", "source_queue": "x"}} {
		if _, code := s.register(body); code != http.StatusBadRequest {
			t.Fatalf("register %v: %d", body, code)
		}
	}
	if code := s.Do(http.MethodPost, "/streams/v1/state/get", map[string]any{"query_id": "nope", "partition_id": pid}, nil); code != http.StatusNotFound {
		t.Fatalf("state of an unknown query: %d", code)
	}
}

// A cycle whose source partition and sink live in different raft groups
// commits by the cross-group commit, or not at all; the state of a query
// whose sink is encrypted, and its sink's messages, are not on disk in
// clear.
func TestStreamsCycleAcrossGroupsWithAnEncryptedSink(t *testing.T) {
	key := hex.EncodeToString(randBytes(32))
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Groups: 2, Env: map[string]string{"QUEEN_ENCRYPTION_KEY": key}})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 3*time.Minute)
	cl := e2etest.NewClient(t, ctx, n)
	s := streamsClient{cl, t}
	waitFormat(cl, wire.FormatV3)
	tag := hex.EncodeToString(randBytes(6))
	s.Push(e2etest.PushItem{Queue: "xg-src", Partition: "p", Payload: "CLEARSRC-" + tag})
	src := e2etest.FirstPartitionGroup(ctx, t, n.URL(), "xg-src")
	sink := ""
	for i := 0; sink == "" && i < 32; i++ {
		name := fmt.Sprintf("xg-sink-%d", i)
		s.Configure(map[string]any{"queue": name, "options": map[string]any{"encryptionEnabled": true}})
		s.Push(e2etest.PushItem{Queue: name, Payload: "seed"})
		if e2etest.FirstPartitionGroup(ctx, t, n.URL(), name) != src {
			sink = name
		}
	}
	if sink == "" {
		t.Fatal("no sink queue placed in another group than the source")
	}
	q := s.mustRegister("xg", "xg-src", sink, "h")
	a := s.MustPop(e2etest.PopPath("xg-src"), 1)
	pid := a.Messages[0].PartitionID
	body := func(txn string) map[string]any {
		return map[string]any{"query_id": q.QueryID, "partition_id": pid,
			"state_ops":  []map[string]any{{"type": "upsert", "key": "k", "value": map[string]string{"note": "STATE-MARK-" + tag}}},
			"push_items": []map[string]any{{"queue": sink, "payload": "SINK-MARK-" + tag}},
			"ack":        map[string]any{"transactionId": txn, "leaseId": a.LeaseID, "status": "completed", "count": 1}}
	}
	// The ack part refuses (in the source's group): the sink push and the
	// state write (in other groups) do not happen either.
	if r := s.cycle(body("not-a-message")); r.Success {
		t.Fatalf("cycle with a wrong message: %+v", r)
	}
	if recs, _, _ := cl.Log(sink, "Default"); len(recs) != 1 {
		t.Fatalf("sink after a refused cycle: %d records", len(recs))
	}
	if rows := s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid}); len(rows) != 0 {
		t.Fatalf("state after a refused cycle: %+v", rows)
	}
	r := s.mustCycle(body(a.Messages[0].TransactionID))
	if len(r.PushResults) != 1 || r.PushResults[0].Status != "queued" || !r.AckResult.LeaseReleased {
		t.Fatalf("cycle: %+v", r)
	}
	rows := s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid})
	if len(rows) != 1 || !strings.Contains(string(rows[0].Value), "STATE-MARK-"+tag) {
		t.Fatalf("state: %+v", rows)
	}
	if m := s.MustPop(e2etest.PopPath(sink, "batch=10"), 2).Messages[1]; !strings.Contains(string(m.Data), "SINK-MARK-"+tag) {
		t.Fatalf("sink message: %s", m.Data)
	}
	s.PopEmpty(e2etest.PopPath("xg-src"))
	n.Stop()
	for _, what := range []string{"STATE-MARK-", "SINK-MARK-"} {
		if hits := raftgroupstest.FilesContaining(t, n.Dir, []byte(what+tag)); len(hits) != 0 {
			t.Errorf("%s in clear on disk: %v", what, hits)
		}
	}
	if hits := raftgroupstest.FilesContaining(t, n.Dir, []byte("CLEARSRC-"+tag)); len(hits) == 0 {
		t.Error("the unencrypted source's payload is not found: the scan proves nothing")
	}
}

// In a 3-node cluster a query registered through one node is cycled
// through another and read back through the third: queries and state are
// replicated raft state, not a node's.
func TestStreamsAcrossNodes(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 4*time.Minute)
	cls := []streamsClient{}
	for _, n := range c.Nodes {
		cls = append(cls, streamsClient{e2etest.NewClient(t, ctx, n), t})
	}
	for _, s := range cls {
		waitFormat(s.Client, wire.FormatV3)
	}
	cls[0].Push(e2etest.PushItems("an-src", "p", "m0", "m1")...)
	q := cls[0].mustRegister("across", "an-src", "an-sink", "h")
	if again := cls[2].mustRegister("across", "an-src", "an-sink", "h"); again.QueryID != q.QueryID || again.Fresh {
		t.Fatalf("registered again through another node: %+v", again)
	}
	a := cls[1].MustPop(e2etest.PopPath("an-src", "batch=2"), 2)
	pid := a.Messages[0].PartitionID
	cls[1].mustCycle(map[string]any{"query_id": q.QueryID, "partition_id": pid,
		"state_ops":  []map[string]any{{"type": "upsert", "key": "count", "value": map[string]int{"n": 2}}},
		"push_items": []map[string]any{{"queue": "an-sink", "partition": "p", "payload": 2}},
		"ack":        ack(a.Messages, "completed")})
	for i, s := range cls {
		rows := s.state(map[string]any{"query_id": q.QueryID, "partition_id": pid, "keys": []string{"count"}})
		if len(rows) != 1 || string(rows[0].Value) != `{"n":2}` {
			t.Fatalf("node %d state: %+v", i, rows)
		}
	}
	if got := sinkPayloads(t, cls[2].Client, "an-sink", "p"); fmt.Sprint(got) != "[2]" {
		t.Fatalf("sink: %v", got)
	}
	cls[2].PopEmpty(e2etest.PopPath("an-src"))
}
