package http

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// Queue mode delivers each message once across competing consumers, in
// order per partition; bus mode gives every named group every message;
// the subscription modes decide where a new group starts.
func TestQueueModeBusModeAndSubscriptions(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	cl := e2etest.NewClient(t, e2etest.Deadline(t, 2*time.Minute), c.Nodes[0])
	const perPartition = 30
	parts := []string{"a", "b", "c"}
	for _, p := range parts {
		var ps []any
		for i := 0; i < perPartition; i++ {
			ps = append(ps, map[string]any{"p": p, "i": i})
		}
		cl.Push(e2etest.PushItems("work", p, ps...)...)
	}

	// Four competing consumers in queue mode.
	var mu sync.Mutex
	seen := map[string][]int{}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				a, code := cl.Pop(e2etest.PopPath("work", "batch=4"))
				if code == http.StatusNoContent {
					mu.Lock()
					n := 0
					for _, v := range seen {
						n += len(v)
					}
					mu.Unlock()
					if n == perPartition*len(parts) {
						return
					}
					continue // other consumers hold the remaining partitions
				}
				mu.Lock()
				for _, m := range a.Messages {
					var d struct {
						P string
						I int
					}
					_ = json.Unmarshal(m.Data, &d)
					seen[d.P] = append(seen[d.P], d.I)
					if m.ConsumerGroup != "__QUEUE_MODE__" || m.LeaseID == "" || m.DeliveryAttempt != 1 {
						t.Errorf("message fields: %+v", m)
					}
				}
				mu.Unlock()
				for _, r := range cl.AckAll(a, "completed") {
					if !r.Success {
						t.Errorf("ack: %+v", r)
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, p := range parts {
		if len(seen[p]) != perPartition || !sort.IntsAreSorted(seen[p]) {
			t.Fatalf("partition %s delivered %v", p, seen[p])
		}
	}

	// Bus mode: two groups each get every message of a partition.
	for _, g := range []string{"billing", "audit"} {
		a := cl.MustPop(e2etest.PopPath("work/partition/a", "batch=100", "consumerGroup="+g, "subscriptionMode=all"), perPartition)
		if a.Messages[0].ConsumerGroup != g {
			t.Fatalf("group %s: %+v", g, a.Messages[0])
		}
	}

	// A group subscribing with mode new (an opt-in; the server default is
	// all, as Queen's) sees only
	// what is pushed after; subscriptionFrom a time, what came since. The
	// time is the server's own stamp on the new message: the test's wall
	// clock may run a few milliseconds ahead of the node's (which follows
	// the wall only within the clock skew bound), and a mark taken here
	// then fell after the message it meant to precede.
	cl.PopEmpty(e2etest.PopPath("work/partition/a", "consumerGroup=late", "subscriptionMode=new"))
	cl.PopEmpty(e2etest.PopPath("work/partition/a", "consumerGroup=fromnow", "subscriptionFrom=now"))
	cl.Push(e2etest.PushItems("work", "a", "after")...)
	a := cl.MustPop(e2etest.PopPath("work/partition/a", "consumerGroup=late"), 1)
	if string(a.Messages[0].Data) != `"after"` {
		t.Fatalf("mode new: %s", payloads(a))
	}
	mark := a.Messages[0].CreatedAt
	cl.MustPop(e2etest.PopPath("work/partition/a", "consumerGroup=fromnow"), 1)
	cl.MustPop(e2etest.PopPath("work/partition/a", "consumerGroup=fromts", "subscriptionFrom="+mark), 1)
	cl.MustPop(e2etest.PopPath("work/partition/a", "batch=1000", "consumerGroup=everything", "subscriptionMode=all"), perPartition+1)
}

// Leases: one batch per (partition, group); expiry redelivers with the
// next delivery attempt and spends no retry; failed acks do, and past the
// retry limit the message goes to the DLQ and the partition moves on. A
// stale lease's ack is rejected, a repeated ack is a noop.
func TestLeasesRetriesAndDeadLetters(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	cl := e2etest.NewClient(t, e2etest.Deadline(t, 2*time.Minute), c.Nodes[0])
	cl.Configure(map[string]any{"queue": "jobs", "options": map[string]any{"retryLimit": 1, "leaseTime": 30}})
	cl.Push(e2etest.PushItems("jobs", "p", "m0", "m1", "m2")...)

	first := cl.MustPop(e2etest.PopPath("jobs", "batch=1", "leaseSeconds=1"), 1)
	cl.PopEmpty(e2etest.PopPath("jobs", "batch=1")) // the one partition is leased
	// Expiry: the same message again, attempt 2, under a new lease.
	var again e2etest.PopAnswer
	cl.Eventually(10*time.Second, "lease expiry", func() bool {
		a, code := cl.Pop(e2etest.PopPath("jobs", "batch=1"))
		again = a
		return code == http.StatusOK
	})
	m := again.Messages[0]
	if m.TransactionID != first.Messages[0].TransactionID || m.DeliveryAttempt != 2 || m.LeaseID == first.LeaseID {
		t.Fatalf("redelivery: %+v after %+v", m, first.Messages[0])
	}
	if r := cl.Ack(e2etest.AckOf(first.Messages[0], "completed"))[0]; r.Success || !strings.Contains(e2etest.ErrText(r.Error), "rejected_ack") {
		t.Fatalf("stale lease ack: %+v", r)
	}
	// The expiry spent nothing: with retryLimit 1, one failure is retried...
	if r := cl.Ack(e2etest.AckOf(m, "failed"))[0]; !r.Success || r.DLQ || !r.LeaseReleased {
		t.Fatalf("first failure: %+v", r)
	}
	m = cl.MustPop(e2etest.PopPath("jobs", "batch=1"), 1).Messages[0]
	if m.Offset != 0 || m.DeliveryAttempt != 3 {
		t.Fatalf("retry after a failure: %+v", m)
	}
	// ...the second goes to the DLQ and the partition moves on.
	if r := cl.Ack(e2etest.AckOf(m, "failed"))[0]; !r.Success || !r.DLQ {
		t.Fatalf("second failure: %+v", r)
	}
	next := cl.MustPop(e2etest.PopPath("jobs", "batch=5"), 2)
	if next.Messages[0].Offset != 1 || next.Messages[0].DeliveryAttempt != 1 {
		t.Fatalf("after the DLQ: %+v", next.Messages[0])
	}
	// Lease extension, then acks; a repeated ack is a noop.
	var ext struct {
		LeaseID      string  `json:"leaseId"`
		Success      bool    `json:"success"`
		Renewed      int     `json:"renewed"`
		NewExpiresAt *string `json:"newExpiresAt"`
		ExpiresAt    *string `json:"expiresAt"`
		Snake        *string `json:"lease_expires_at"`
	}
	if code := cl.Do(http.MethodPost, "/api/v1/lease/"+next.LeaseID+"/extend", map[string]any{"seconds": 120}, &ext); code != 200 ||
		!ext.Success || ext.Renewed != 1 || ext.NewExpiresAt == nil || ext.Snake == nil || *ext.ExpiresAt != *ext.NewExpiresAt {
		t.Fatalf("extend: %d %+v", code, ext)
	}
	if at, err := time.Parse(time.RFC3339, *ext.NewExpiresAt); err != nil || time.Until(at) < 100*time.Second {
		t.Fatalf("extended to %v (%v)", at, err)
	}
	rs := cl.AckAll(next, "completed")
	if !rs[0].Success || rs[0].LeaseReleased || !rs[1].LeaseReleased {
		t.Fatalf("acks: %+v", rs)
	}
	if r := cl.Ack(e2etest.AckOf(next.Messages[1], "completed"))[0]; !r.Success || !r.Noop {
		t.Fatalf("repeated ack: %+v", r)
	}
	ext.Success = true
	if code := cl.Do(http.MethodPost, "/api/v1/lease/"+next.LeaseID+"/extend", nil, &ext); code != 200 || ext.Success || ext.Renewed != 0 || ext.NewExpiresAt != nil {
		t.Fatalf("extend a released lease: %d %+v", code, ext)
	}
	if code := cl.Do(http.MethodPost, "/api/v1/lease/not-a-lease/extend", nil, nil); code != http.StatusBadRequest {
		t.Fatalf("extend a malformed lease id: %d", code)
	}

	// commitOnDelivery (and its alias autoAck): no lease, the group has
	// moved on at delivery.
	cl.Push(e2etest.PushItems("jobs", "p", "m3", "m4")...)
	a := cl.MustPop(e2etest.PopPath("jobs", "batch=1", "commitOnDelivery=true"), 1)
	if a.LeaseID != "" || a.Messages[0].LeaseID != "" || string(a.Messages[0].Data) != `"m3"` {
		t.Fatalf("commitOnDelivery: %+v", a)
	}
	if a := cl.MustPop(e2etest.PopPath("jobs", "batch=1", "autoAck=true"), 1); string(a.Messages[0].Data) != `"m4"` {
		t.Fatalf("autoAck: %s", payloads(a))
	}
	cl.PopEmpty(e2etest.PopPath("jobs"))
}

// A long poll parks until a push wakes it, or answers 204 at its timeout;
// held-back messages (delayedProcessing, windowBuffer) wake it when they
// become visible.
func TestLongPollDelaysAndWindows(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	cl := e2etest.NewClient(t, e2etest.Deadline(t, 2*time.Minute), c.Nodes[0])
	start := time.Now()
	cl.PopEmpty(e2etest.PopPath("lp", "wait=true", "timeout=400"))
	if e := time.Since(start); e < 400*time.Millisecond {
		t.Fatalf("an empty long poll answered after %v", e)
	}
	type result struct {
		a    e2etest.PopAnswer
		code int
	}
	parked := func(path string) chan result {
		ch := make(chan result, 1)
		go func() { a, code := cl.Pop(path); ch <- result{a, code} }()
		return ch
	}
	waitParked := func(ch chan result) {
		// A poll that answered already has nothing to wait for.
		select {
		case r := <-ch:
			t.Fatalf("the poll answered before anything was pushed: %d", r.code)
		case <-time.After(300 * time.Millisecond):
		}
	}
	ch := parked(e2etest.PopPath("lp", "wait=true", "timeout=20000"))
	waitParked(ch)
	cl.Push(e2etest.PushItems("lp", "p", "wake")...)
	if r := <-ch; r.code != http.StatusOK || string(r.a.Messages[0].Data) != `"wake"` {
		t.Fatalf("woken poll: %d %+v", r.code, r.a)
	}

	// A lease expiring wakes a parked pop of the same group.
	cl.Push(e2etest.PushItems("lx", "p", "leased")...)
	cl.MustPop(e2etest.PopPath("lx", "leaseSeconds=1"), 1)
	leased := time.Now()
	if r := <-parked(e2etest.PopPath("lx", "wait=true", "timeout=20000")); r.code != http.StatusOK || r.a.Messages[0].DeliveryAttempt != 2 ||
		time.Since(leased) > 10*time.Second {
		t.Fatalf("poll woken by a lease expiry: %d %+v after %v", r.code, r.a, time.Since(leased))
	}

	for _, opt := range []string{"delayedProcessing", "windowBuffer"} {
		q := "held-" + opt
		cl.Configure(map[string]any{"queue": q, opt: 2})
		pushed := time.Now()
		cl.Push(e2etest.PushItems(q, "p", "x")...)
		cl.PopEmpty(e2etest.PopPath(q))
		r := <-parked(e2etest.PopPath(q, "wait=true", "timeout=20000"))
		if r.code != http.StatusOK || time.Since(pushed) < 2*time.Second {
			t.Fatalf("%s: %d after %v", opt, r.code, time.Since(pushed))
		}
	}
}

// Retention deletes what it should and moves the log start; a message
// waiting longer than maxWaitTimeSeconds leaves the group's way.
func TestRetentionAndMaxWait(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	cl := e2etest.NewClient(t, e2etest.Deadline(t, 2*time.Minute), c.Nodes[0])
	// Three queues set up at once: the sweeps run every few seconds.
	cl.Configure(map[string]any{"queue": "keep", "options": map[string]any{"retentionEnabled": true, "retentionSeconds": 1}})
	cl.Push(e2etest.PushItems("keep", "p", 1, 2, 3)...)
	// completedRetentionSeconds keeps what is not consumed. (It deletes
	// whole chunks, the records of one push: three pushes here.)
	cl.Configure(map[string]any{"queue": "done", "retentionEnabled": true, "completedRetentionSeconds": 1})
	for i := 1; i <= 3; i++ {
		cl.Push(e2etest.PushItems("done", "p", i)...)
	}
	cl.AckAll(cl.MustPop(e2etest.PopPath("done", "batch=1"), 1), "completed")
	// maxWaitTimeSeconds: the queue-mode group has subscribed (an empty
	// pop); its message expires, which completed retention then shows by
	// deleting it without anyone having consumed it.
	cl.Configure(map[string]any{"queue": "stale", "options": map[string]any{"maxWaitTimeSeconds": 1, "retentionEnabled": true, "completedRetentionSeconds": 1}})
	cl.PopEmpty(e2etest.PopPath("stale"))
	cl.Push(e2etest.PushItems("stale", "p", "too late")...)

	cl.Eventually(20*time.Second, "retentionSeconds", func() bool {
		recs, hwm, start := cl.Log("keep", "p")
		return start == 3 && hwm == 3 && len(recs) == 0
	})
	// A consumer that never got there starts at the log start.
	cl.Push(e2etest.PushItems("keep", "p", 4)...)
	if a := cl.MustPop(e2etest.PopPath("keep"), 1); a.Messages[0].Offset != 3 {
		t.Fatalf("after retention: %+v", a.Messages[0])
	}
	cl.Eventually(20*time.Second, "completedRetentionSeconds", func() bool {
		_, _, start := cl.Log("done", "p")
		return start == 1
	})
	cl.Eventually(20*time.Second, "maxWaitTimeSeconds", func() bool {
		_, _, start := cl.Log("stale", "p")
		return start == 1
	})
	cl.PopEmpty(e2etest.PopPath("stale"))
	// Another sweep later, what was not consumed is still there.
	cl.Push(e2etest.PushItems("done", "p", "marker")...)
	cl.Eventually(20*time.Second, "a later retention pass", func() bool {
		_, _, start := cl.Log("keep", "p")
		return start == 4
	})
	if _, hwm, start := cl.Log("done", "p"); start != 1 || hwm != 4 {
		t.Fatalf("unconsumed messages were deleted: start %d hwm %d", start, hwm)
	}
}

// Push dedup by transactionId answers duplicate with the original id and
// offset; the queue is created with a 60 s lease and labels from its name.
func TestPushDedupOverHTTP(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	cl := e2etest.NewClient(t, e2etest.Deadline(t, time.Minute), c.Nodes[0])
	first := cl.Push(e2etest.PushItem{Queue: "orders.eu.v1", Partition: "c1", Payload: 1, TransactionID: "order-1"})[0]
	again := cl.Push(e2etest.PushItem{Queue: "orders.eu.v1", Partition: "c1", Payload: 2, TransactionID: "order-1"},
		e2etest.PushItem{Queue: "orders.eu.v1", Partition: "c1", Payload: 3, TransactionID: "order-2"})
	if first.Status != "queued" || again[0].Status != "duplicate" || again[0].MessageID != first.MessageID ||
		again[0].Offset != first.Offset || again[0].TransactionID != "order-1" || again[1].Status != "queued" || again[1].Offset != 1 {
		t.Fatalf("dedup: %+v then %+v", first, again)
	}
	// The same id in another partition is another message.
	if r := cl.Push(e2etest.PushItem{Queue: "orders.eu.v1", Partition: "c2", Payload: 1, TransactionID: "order-1"})[0]; r.Status != "queued" {
		t.Fatalf("other partition: %+v", r)
	}
	opts := cl.Configure(map[string]any{"queue": "orders.eu.v1"})
	if opts["namespace"] != "orders" || opts["task"] != "eu" || opts["options"].(map[string]any)["leaseTime"] != 60.0 {
		t.Fatalf("push-created queue: %v", opts)
	}
}

// Configure merges by default, replace resets what it does not name, null
// restores a default; options inside "options" or at the top level.
func TestConfigureMergeReplaceAndNull(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	cl := e2etest.NewClient(t, e2etest.Deadline(t, time.Minute), c.Nodes[0])
	a := cl.Configure(map[string]any{"queue": "payments", "namespace": "billing", "task": "charge",
		"options": map[string]any{"leaseTime": 120, "retryLimit": 5}, "delayedProcessing": 3})
	o := a["options"].(map[string]any)
	if a["configured"] != true || a["queue"] != "payments" || a["namespace"] != "billing" || a["task"] != "charge" ||
		a["storage"] != "segments" || a["partitionId"] != nil || a["queueId"] == "" ||
		o["leaseTime"] != 120.0 || o["retryLimit"] != 5.0 || o["delayedProcessing"] != 3.0 || o["dedupWindowSeconds"] != 3600.0 {
		t.Fatalf("create: %v", a)
	}
	o = cl.Configure(map[string]any{"queue": "payments", "options": map[string]any{"retryLimit": 7, "leaseTime": nil}})["options"].(map[string]any)
	if o["retryLimit"] != 7.0 || o["leaseTime"] != 300.0 || o["delayedProcessing"] != 3.0 {
		t.Fatalf("merge with a null: %v", o)
	}
	a = cl.Configure(map[string]any{"queue": "payments", "mode": "replace", "options": map[string]any{"windowBuffer": 2}})
	o = a["options"].(map[string]any)
	if o["retryLimit"] != 3.0 || o["delayedProcessing"] != 0.0 || o["windowBuffer"] != 2.0 || a["namespace"] != "billing" {
		t.Fatalf("replace: %v", a)
	}
	for _, bad := range []map[string]any{
		{"options": map[string]any{"leaseTime": 1}},
		{"queue": "payments", "options": map[string]any{"leaseTime": -1}},
		{"queue": "payments", "options": map[string]any{"retryLimit": 1.5}},
		{"queue": "payments", "retentionEnabled": "yes"},
		{"queue": "payments", "mode": "overwrite"},
		{"queue": "payments", "options": map[string]any{"retentionSinkHold": "no spaces"}},
	} {
		var e e2etest.ErrorAnswer
		if code := cl.Do(http.MethodPost, "/api/v1/configure", bad, &e); code != http.StatusBadRequest || e.Code != "bad_request" {
			t.Fatalf("%v: %d %+v", bad, code, e)
		}
	}
	if o := cl.Configure(map[string]any{"queue": "payments", "minPopWaitTime": 999999})["options"].(map[string]any); o["minPopWaitTime"] != 60000.0 {
		t.Fatalf("minPopWaitTime is clamped: %v", o["minPopWaitTime"])
	}
}

// Discovery pop by namespace and task; fetch/offsets by time; changed
// partitions since a time.
func TestDiscoveryOffsetsAndChangedPartitions(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	cl := e2etest.NewClient(t, e2etest.Deadline(t, time.Minute), c.Nodes[0])
	cl.Configure(map[string]any{"queue": "mail-out", "namespace": "notify", "task": "send"})
	cl.Push(e2etest.PushItems("sms.send", "p", "sms")...)
	cl.Push(e2etest.PushItems("mail-out", "p", "mail")...)
	cl.PopEmpty("/api/v1/pop?namespace=nobody")
	got := map[string]bool{}
	for i := 0; i < 2; i++ {
		a := cl.MustPop("/api/v1/pop?task=send", 1)
		got[a.Queue] = true
	}
	cl.PopEmpty("/api/v1/pop?task=send")
	if !got["sms.send"] || !got["mail-out"] {
		t.Fatalf("discovery by task: %v", got)
	}
	if code := cl.Do(http.MethodGet, "/api/v1/pop", nil, nil); code != http.StatusBadRequest {
		t.Fatalf("discovery without labels: %d", code)
	}

	before := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	cl.Push(e2etest.PushItems("ts", "p", 0, 1)...)
	cl.Eventually(5*time.Second, "a later millisecond", func() bool { return true })
	mark := time.Now().UnixMilli() + 1
	for time.Now().UnixMilli() <= mark {
		time.Sleep(time.Millisecond) // the next push must land after mark
	}
	cl.Push(e2etest.PushItems("ts", "p", 2)...)
	cl.Push(e2etest.PushItems("ts", "q", 0)...)
	var offs struct {
		Entries []struct {
			Offset         *uint64 `json:"offset"`
			TS             *string `json:"ts"`
			HighWatermark  uint64  `json:"highWatermark"`
			LogStartOffset uint64  `json:"logStartOffset"`
			Error          string  `json:"error"`
		} `json:"entries"`
	}
	body := map[string]any{"entries": []map[string]any{
		{"queue": "ts", "partition": "p", "timestamp": before}, {"queue": "ts", "partition": "p", "timestamp": mark},
		{"queue": "ts", "partition": "p", "timestamp": time.Now().Add(time.Hour).UnixMilli()},
		{"queue": "ts", "partition": "p", "timestamp": -2}, {"queue": "ts", "partition": "nope", "timestamp": -1},
	}}
	if code := cl.Do(http.MethodPost, "/api/v1/fetch/offsets", body, &offs); code != 200 || len(offs.Entries) != 5 {
		t.Fatalf("fetch/offsets: %d %+v", code, offs)
	}
	e := offs.Entries
	if *e[0].Offset != 0 || e[0].TS == nil || *e[1].Offset != 2 || *e[2].Offset != 3 || e[2].TS != nil || e[2].HighWatermark != 3 ||
		*e[3].Offset != 0 || e[4].Error != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Fatalf("offsets: %+v %+v %+v %+v %+v", e[0], e[1], e[2], e[3], e[4])
	}

	var ch struct {
		Entries []struct {
			Partitions []struct {
				ID          string `json:"id"`
				Name        string `json:"name"`
				LastOffset  int64  `json:"lastOffset"`
				LogStart    uint64 `json:"logStart"`
				LastWriteAt string `json:"lastWriteAt"`
			} `json:"partitions"`
			Next *string `json:"next"`
		} `json:"entries"`
		SafeTime string `json:"safeTime"`
	}
	page := func(after any) {
		body := map[string]any{"entries": []map[string]any{{"queue": "ts", "since": mark, "limit": 1, "after": after}}}
		if code := cl.Do(http.MethodPost, "/api/v1/partitions/changed", body, &ch); code != 200 || len(ch.Entries) != 1 || ch.SafeTime == "" {
			t.Fatalf("partitions/changed: %d %+v", code, ch)
		}
	}
	page(nil)
	p := ch.Entries[0].Partitions
	if len(p) != 1 || p[0].Name != "p" || p[0].LastOffset != 2 || p[0].ID == "" || ch.Entries[0].Next == nil {
		t.Fatalf("first page: %+v", ch.Entries[0])
	}
	page(*ch.Entries[0].Next)
	if p := ch.Entries[0].Partitions; len(p) != 1 || p[0].Name != "q" || ch.Entries[0].Next != nil {
		t.Fatalf("second page: %+v", ch.Entries[0])
	}
	if _, err := strconv.ParseUint(p[0].ID, 10, 64); err != nil {
		t.Fatalf("partition id %q", p[0].ID)
	}
}

// Every data-plane route answers malformed input with 400 and the error
// envelope, an oversized body with a plain 413, and an unknown route with
// the route-miss envelope.
func TestDataPlaneErrorsAndLimits(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{"QUEEN_MAX_BODY_BYTES": "4096"}})
	ctx := e2etest.Deadline(t, time.Minute)
	base := c.Nodes[0].URL()
	posts := []string{"/api/v1/push", "/api/v1/ack", "/api/v1/ack/batch", "/api/v1/lease/00000000-0000-0000-0000-000000000001/extend",
		"/api/v1/transaction", "/api/v1/configure", "/api/v1/fetch", "/api/v1/fetch/offsets", "/api/v1/partitions/changed"}
	for _, path := range posts {
		status, _, body := e2etest.RawRequest(t, ctx, http.MethodPost, base+path, `{"broken":`)
		var e e2etest.ErrorAnswer
		if json.Unmarshal(body, &e) != nil || status != 400 || e.Code != "bad_request" || e.Error == "" {
			t.Fatalf("%s with broken JSON: %d %s", path, status, body)
		}
		status, hdr, body := e2etest.RawRequest(t, ctx, http.MethodPost, base+path, `{"x":"`+strings.Repeat("y", 5000)+`"}`)
		if status != http.StatusRequestEntityTooLarge || strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
			t.Fatalf("%s over the body limit: %d %s %s", path, status, hdr.Get("Content-Type"), body)
		}
	}
	for _, path := range []string{"/api/v1/pop/queue/q?batch=x", "/api/v1/pop?task=t&leaseSeconds=0", "/api/v1/pop/queue/q?subscriptionFrom=yesterday"} {
		if status, _, body := e2etest.RawRequest(t, ctx, http.MethodGet, base+path, ""); status != 400 || !strings.Contains(string(body), `"code":"bad_request"`) {
			t.Fatalf("%s: %d %s", path, status, body)
		}
	}
	status, _, body := e2etest.RawRequest(t, ctx, http.MethodPost, base+"/api/v1/pop/queue/q", "")
	if status != 404 || !strings.Contains(string(body), "no_such_route") {
		t.Fatalf("POST to a GET route: %d %s", status, body)
	}
	// A pop of a queue that does not exist is empty, not an error.
	if status, _, _ := e2etest.RawRequest(t, ctx, http.MethodGet, base+"/api/v1/pop/queue/never", ""); status != http.StatusNoContent {
		t.Fatalf("pop of a missing queue: %d", status)
	}
	long := strings.Repeat("q", 440)
	if status, _, body := e2etest.RawRequest(t, ctx, http.MethodGet, base+"/api/v1/pop/queue/"+long+"?consumerGroup=gg", ""); status != 413 ||
		!strings.Contains(string(body), "name_too_long") {
		t.Fatalf("long names: %d %s", status, body)
	}
	_ = fmt.Sprint
}

// payloads are the messages' data as compact JSON strings.
func payloads(a e2etest.PopAnswer) []string {
	var out []string
	for _, m := range a.Messages {
		out = append(out, string(m.Data))
	}
	return out
}
