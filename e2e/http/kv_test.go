package http

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

func jsonBody(s string) io.Reader { return strings.NewReader(s) }

func TestKVOperationsAndErrors(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	base := c.Nodes[0].URL()
	ctx := e2etest.Deadline(t, time.Minute)

	a, code, err := e2etest.KVCall(ctx, base,
		map[string]any{"op": "put", "ns": "app", "key": "user/1", "value": map[string]any{"name": "ada"}},
		map[string]any{"op": "putIfAbsent", "ns": "app", "key": "user/2", "value": 2},
		map[string]any{"op": "incr", "ns": "app", "key": "hits", "delta": 5, "max": 10},
		map[string]any{"op": "get", "ns": "app", "key": "user/1"},
		map[string]any{"op": "getMany", "ns": "app", "keys": []string{"user/1", "nope"}},
		map[string]any{"op": "getPrefix", "ns": "app", "prefix": "user/"},
		map[string]any{"op": "check", "ns": "app", "key": "user/2", "expect": 2},
	)
	if err != nil || code != 200 || !a.OK || len(a.Results) != 7 {
		t.Fatalf("batch: %d %v %+v", code, err, a)
	}
	if string(a.Results[3].Value) != `{"name":"ada"}` || !a.Results[3].Found || string(a.Results[2].Value) != "5" {
		t.Fatalf("values: %+v", a.Results)
	}
	// incr past its max, delete, putIfAbsent on an existing key.
	a, _, _ = e2etest.KVCall(ctx, base,
		map[string]any{"op": "incr", "ns": "app", "key": "hits", "delta": 6, "max": 10},
		map[string]any{"op": "putIfAbsent", "ns": "app", "key": "user/1", "value": 0},
		map[string]any{"op": "delete", "ns": "app", "key": "user/2"})
	if a.Results[0].Applied || *a.Results[0].Reason != "out_of_bounds" || a.Results[1].Applied || *a.Results[1].Reason != "exists" || !a.Results[2].Applied {
		t.Fatalf("refusals: %+v", a.Results)
	}
	// A failed required operation aborts the batch: nothing is written.
	a, code, _ = e2etest.KVCall(ctx, base,
		map[string]any{"op": "put", "ns": "app", "key": "x", "value": 1},
		map[string]any{"op": "check", "ns": "app", "key": "user/1", "expect": 999, "required": true})
	if code != 200 || a.OK || a.Reason != "kv_precondition" || a.FailedIndex != 1 || a.KVReason != "version_mismatch" {
		t.Fatalf("required failure: %d %+v", code, a)
	}
	var got map[string]any
	if code, _ := e2etest.Call(ctx, http.MethodGet, base+"/api/v1/kv/app/x", nil, &got); code != 200 || got["found"] != false {
		t.Fatalf("aborted put is visible: %v", got)
	}
	// Key routes: ETag is the version; a miss is 200 found:false.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/kv/app/user/1", nil)
	resp, err := e2etest.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("ETag") != `"1"` {
		t.Fatalf("GET key: %d etag %q", resp.StatusCode, resp.Header.Get("ETag"))
	}
	putReq, _ := http.NewRequestWithContext(ctx, http.MethodPut, base+"/api/v1/kv/app/cfg/a?ttlSeconds=60", jsonBody(`{"on":true}`))
	if resp, err = e2etest.HTTPClient.Do(putReq); err != nil || resp.StatusCode != 200 {
		t.Fatalf("PUT: %v %v", resp, err)
	}
	resp.Body.Close()
	// Errors: bad namespace, oversized key, reserved namespace, unknown op.
	for _, tc := range []struct {
		op     map[string]any
		status int
	}{
		{map[string]any{"op": "put", "ns": "Bad NS", "key": "k", "value": 1}, 400},
		{map[string]any{"op": "put", "ns": "app", "key": string(make([]byte, 513)), "value": 1}, 413},
		{map[string]any{"op": "put", "ns": "queen-locks", "key": "k", "value": 1}, 403},
		{map[string]any{"op": "frobnicate", "ns": "app", "key": "k"}, 400},
	} {
		var e e2etest.ErrorAnswer
		if code, _ := e2etest.Call(ctx, http.MethodPost, base+"/api/v1/kv", map[string]any{"operations": []any{tc.op}}, &e); code != tc.status || e.Code == "" {
			t.Fatalf("%v: %d %+v", tc.op, code, e)
		}
	}
	// Namespaces and cursor paging.
	var ns struct{ Namespaces []string }
	if code, _ := e2etest.Call(ctx, http.MethodGet, base+"/api/v1/resources/kv/namespaces", nil, &ns); code != 200 || len(ns.Namespaces) != 1 || ns.Namespaces[0] != "app" {
		t.Fatalf("namespaces: %+v", ns)
	}
	var page struct {
		Items []struct{ Key string }
		Next  *string
	}
	if code, _ := e2etest.Call(ctx, http.MethodPost, base+"/api/v1/resources/kv/list", map[string]any{"ns": "app", "limit": 2}, &page); code != 200 || len(page.Items) != 2 || page.Next == nil {
		t.Fatalf("list page 1: %+v", page)
	}
	after := *page.Next
	if code, _ := e2etest.Call(ctx, http.MethodPost, base+"/api/v1/resources/kv/list", map[string]any{"ns": "app", "limit": 2, "after": after}, &page); code != 200 || len(page.Items) == 0 || page.Items[0].Key <= after {
		t.Fatalf("list page 2: %+v", page)
	}
}

func TestKVTTLExpiry(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	base := c.Nodes[0].URL()
	ctx := e2etest.Deadline(t, time.Minute)
	if a, _, err := e2etest.KVCall(ctx, base, map[string]any{"op": "put", "ns": "s", "key": "session", "value": 1, "ttlSeconds": 1}); err != nil || !a.OK {
		t.Fatal(a, err)
	}
	var got map[string]any
	if e2etest.Call(ctx, http.MethodGet, base+"/api/v1/kv/s/session", nil, &got); got["found"] != true {
		t.Fatalf("fresh key: %v", got)
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		_, err := e2etest.Call(ctx, http.MethodGet, base+"/api/v1/kv/s/session", nil, &got)
		return err == nil && got["found"] == false, err
	}); err != nil {
		t.Fatal("key with a 1 s TTL never expired:", err)
	}
}

func TestKVCompareAndSetRaceHasOneWinnerPerVersion(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	base := c.Nodes[0].URL()
	ctx := e2etest.Deadline(t, 2*time.Minute)
	a, _, _ := e2etest.KVCall(ctx, base, map[string]any{"op": "put", "ns": "race", "key": "k", "value": 0})
	version := a.Results[0].Version
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []int
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				a, code, err := e2etest.KVCall(ctx, base, map[string]any{"op": "put", "ns": "race", "key": "k", "value": i, "expect": version})
				if err != nil || code != 200 {
					t.Errorf("client %d: %d %v", i, code, err)
					return
				}
				if a.Results[0].Applied {
					mu.Lock()
					winners = append(winners, i)
					mu.Unlock()
				}
			}(i)
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners for version %d", round, len(winners), version)
		}
		got, _, _ := e2etest.KVCall(ctx, base, map[string]any{"op": "get", "ns": "race", "key": "k"})
		if string(got.Results[0].Value) != fmt.Sprint(winners[0]) {
			t.Fatalf("round %d: value %s, winner %d", round, got.Results[0].Value, winners[0])
		}
		version = got.Results[0].Version
	}
}

func TestSemaphoreOfThreeUnderTwentyContenders(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	base := c.Nodes[0].URL()
	ctx := e2etest.Deadline(t, time.Minute)
	var wg sync.WaitGroup
	var mu sync.Mutex
	slots := map[float64]string{}
	refused := 0
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var out struct{ Results []map[string]any }
			op := map[string]any{"op": "acquire", "name": "pool", "limit": 3, "ttlSeconds": 60, "owner": fmt.Sprintf("w%d", i)}
			if code, err := e2etest.Call(ctx, http.MethodPost, base+"/api/v1/locks", map[string]any{"operations": []any{op}}, &out); err != nil || code != 200 {
				t.Errorf("contender %d: %d %v", i, code, err)
				return
			}
			r := out.Results[0]
			mu.Lock()
			defer mu.Unlock()
			if r["acquired"] == true {
				if prev, dup := slots[r["slot"].(float64)]; dup {
					t.Errorf("slot %v held by %s and w%d", r["slot"], prev, i)
				}
				slots[r["slot"].(float64)] = fmt.Sprintf("w%d", i)
				if g, ok := r["guard"].(map[string]any); !ok || g["op"] != "check" || g["ns"] != "queen-locks" {
					t.Errorf("no guard: %v", r)
				}
			} else if r["reason"] == "contended" {
				refused++
			}
		}(i)
	}
	wg.Wait()
	if len(slots) != 3 || refused != 17 {
		t.Fatalf("%d holders, %d refused as contended", len(slots), refused)
	}
}

func TestTimerFiresOnceAcrossALeaderSIGKILL(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	// Timers live in their queue's home; kill the node leading it.
	leader := e2etest.GroupLeader(t, ctx, c, e2etest.PlacementOf(ctx, t, c.Nodes[0].URL(), "reminders").Queue.Home)
	survivor := c.Nodes[(leader+1)%3]
	var out struct{ Results []map[string]any }
	op := map[string]any{"op": "schedule", "queue": "reminders", "timerKey": "campaign-42", "delayMs": 3000, "payload": "aGVsbG8="}
	if code, err := e2etest.Call(ctx, http.MethodPost, c.Nodes[leader].URL()+"/api/v1/timers", map[string]any{"operations": []any{op}}, &out); err != nil || code != 200 || out.Results[0]["status"] != "scheduled" {
		t.Fatalf("schedule: %d %v %v", code, err, out)
	}
	c.Nodes[leader].Kill()
	// The new leader fires it from the replicated clock.
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		r, _, err := e2etest.FetchAll(ctx, survivor.URL(), "reminders", "Default")
		return err == nil && len(r) > 0, nil
	}); err != nil {
		t.Fatal("timer never fired after the leader was killed:", err)
	}
	// And only once, also after the killed node comes back.
	if err := c.Start(c.Nodes[leader]); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAllHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
			r, _, err := e2etest.FetchAll(ctx, n.URL(), "reminders", "Default")
			return err == nil && len(r) >= 1, nil
		}); err != nil {
			t.Fatal(err)
		}
		r, _, _ := e2etest.FetchAll(ctx, n.URL(), "reminders", "Default")
		if len(r) != 1 || string(r[0].Payload) != `"hello"` {
			t.Fatalf("node %d holds %d fired messages: %+v", n.ID, len(r), r)
		}
	}
	if out := scheduleAgain(ctx, t, survivor.URL(), op); out != "too_late" {
		t.Fatalf("rescheduling a fired timer: %s", out)
	}
}

func scheduleAgain(ctx context.Context, t *testing.T, base string, op map[string]any) string {
	var out struct{ Results []map[string]any }
	if code, err := e2etest.Call(ctx, http.MethodPost, base+"/api/v1/timers", map[string]any{"operations": []any{op}}, &out); err != nil || code != 200 {
		t.Fatalf("schedule again: %d %v", code, err)
	}
	return fmt.Sprint(out.Results[0]["status"])
}

func TestLockGuardFencesATransaction(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	base := c.Nodes[0].URL()
	ctx := e2etest.Deadline(t, time.Minute)
	acquire := func(owner string) map[string]any {
		var out struct{ Results []map[string]any }
		op := map[string]any{"op": "acquire", "name": "job-42", "ttlSeconds": 30, "owner": owner}
		if code, err := e2etest.Call(ctx, http.MethodPost, base+"/api/v1/locks", map[string]any{"operations": []any{op}}, &out); err != nil || code != 200 {
			t.Fatalf("acquire: %d %v", code, err)
		}
		return out.Results[0]
	}
	type txnOut struct {
		Success  bool   `json:"success"`
		Reason   string `json:"reason"`
		KVReason string `json:"kvReason"`
		Results  []struct {
			Type   string             `json:"type"`
			KV     []e2etest.KVResult `json:"kv"`
			Timers []map[string]any   `json:"timers"`
		} `json:"results"`
	}
	txn := func(guard any, payload string) txnOut {
		var out txnOut
		body := map[string]any{
			"operations": []any{map[string]any{"type": "push", "items": []any{map[string]any{"queue": "fenced", "payload": payload}}}},
			"kv":         []any{guard, map[string]any{"op": "put", "ns": "jobs", "key": "job-42", "value": payload}},
			"timers":     []any{map[string]any{"op": "schedule", "queue": "later", "timerKey": payload, "delayMs": 60000, "payload": "eA=="}},
		}
		if code, err := e2etest.Call(ctx, http.MethodPost, base+"/api/v1/transaction", body, &out); err != nil || code != 200 {
			t.Fatalf("transaction: %d %v", code, err)
		}
		return out
	}
	held := acquire("worker-a")
	guard := held["guard"]
	if r := txn(guard, "first"); !r.Success || len(r.Results) != 3 || r.Results[1].Type != "kv" || !r.Results[1].KV[1].Applied || r.Results[2].Timers[0]["status"] != "scheduled" {
		t.Fatalf("guarded transaction while holding the lock: %+v", r)
	}
	// The lock moves: release it and let another worker take it.
	var out struct{ Results []map[string]any }
	rel := map[string]any{"op": "release", "name": "job-42", "token": held["token"], "slot": held["slot"]}
	if code, _ := e2etest.Call(ctx, http.MethodPost, base+"/api/v1/locks", map[string]any{"operations": []any{rel}}, &out); code != 200 || out.Results[0]["released"] != true {
		t.Fatalf("release: %v", out)
	}
	if b := acquire("worker-b"); b["acquired"] != true {
		t.Fatalf("second worker: %v", b)
	}
	// The first worker's guard now fails and nothing of its transaction
	// happens: no push, no KV write, no timer.
	r := txn(guard, "second")
	if r.Success || r.Reason != "kv_precondition" || r.KVReason != "version_mismatch" {
		t.Fatalf("stale guard: %+v", r)
	}
	recs, _, err := e2etest.FetchAll(ctx, base, "fenced", "Default")
	if err != nil || len(recs) != 1 {
		t.Fatalf("fenced queue holds %d records (%v)", len(recs), err)
	}
	a, _, _ := e2etest.KVCall(ctx, base, map[string]any{"op": "get", "ns": "jobs", "key": "job-42"})
	if string(a.Results[0].Value) != `"first"` {
		t.Fatalf("kv after the fenced transaction: %s", a.Results[0].Value)
	}
	var timers map[string]any
	e2etest.Call(ctx, http.MethodGet, base+"/api/v1/timers/later?mode=count", nil, &timers)
	if timers["count"] != float64(1) {
		t.Fatalf("timers after the fenced transaction: %v", timers)
	}
}
