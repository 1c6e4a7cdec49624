package http

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

const (
	tenantB = "22222222-2222-4222-8222-222222222222"
)

// ephCallNoFatal is e2etest.EphemeralCall for goroutines other than the
// test's: a transport error is status 0.
func ephCallNoFatal(ctx context.Context, method, url, tenant string, body any) (int, string, []byte) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(b))
	if err != nil {
		return 0, "", nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-queen-tenant", tenant)
	resp, err := e2etest.HTTPClient.Do(req)
	if err != nil {
		return 0, "", nil
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("x-queen-ephemeral-node"), out
}

type ephAckOut struct {
	Index   int    `json:"index"`
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
}

func ephCluster(t *testing.T, env map[string]string) *harness.Cluster {
	base := map[string]string{"QUEEN_RAFT_TOKEN": "ephemeral-e2e-token", "QUEEN_TENANCY_HEADER": "true",
		"QUEEN_KV_TRUSTED_PROXY": "1", "QUEEN_EPHEMERAL_MEMBER_TTL_MS": "2000"}
	for k, v := range env {
		base[k] = v
	}
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: base})
	// The tenancy header makes QUEEN_EPHEMERAL_REQUIRE_GRANT default on:
	// the operator grants both tenants on one node, and every node knows
	// once raft applied it.
	ctx := e2etest.Deadline(t, time.Minute)
	for _, tenant := range []string{e2etest.TenantA, tenantB} {
		grant := map[string]any{"tenant": tenant, "kind": "ephemeral"}
		if code, _, b := e2etest.EphemeralCall(ctx, t, "POST", c.Nodes[0].URL()+"/api/v1/system/quota", "", grant, nil); code != 200 {
			t.Fatalf("grant %s: %d %s", tenant, code, b)
		}
		err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
			for _, n := range c.Nodes {
				var q struct{ Granted bool }
				if code, _, _ := e2etest.EphemeralCall(ctx, t, "GET", n.URL()+"/api/v1/system/quota?kind=ephemeral&tenant="+tenant, "", nil, &q); code != 200 || !q.Granted {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("the grant of %s never reached every node: %v", tenant, err)
		}
	}
	return c
}

// Push, pop and ack on three nodes through any node: every partition lives
// on one owner, the others relay with the tenant kept (another tenant sees
// nothing), acks settle, listings gather all nodes, bad input is a 400
// that changes nothing, a forged node call is refused, and the memory caps
// answer reject/dropOldest over HTTP.
func TestEphemeralThreeNodes(t *testing.T) {
	c := ephCluster(t, map[string]string{"QUEEN_EPHEMERAL_MAX_BYTES": "262144"})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	e2etest.WaitEphemeralLive(ctx, t, c)
	url := func(i int, path string) string { return c.Nodes[i%3].URL() + path }

	const parts = 12
	owners := map[string]string{}
	for p := 0; p < parts; p++ {
		part := fmt.Sprint("p", p)
		code, node, b := e2etest.EphemeralCall(ctx, t, "POST", url(p, "/api/v1/ephemeral/push"), e2etest.TenantA,
			map[string]any{"queue": "eq", "partition": part, "messages": e2etest.EphemeralMessages(5, part)}, nil)
		if code != 201 || string(b) != `{"pushed":5}` {
			t.Fatalf("push %s: %d %s", part, code, b)
		}
		owners[part] = node
	}
	seen := map[string]bool{}
	for _, o := range owners {
		seen[o] = true
	}
	if len(seen) < 2 {
		t.Fatalf("12 partitions all on one node: %v", owners)
	}

	// Another tenant, through a relaying node, sees nothing.
	var empty e2etest.EphemeralPopAnswer
	if code, _, b := e2etest.EphemeralCall(ctx, t, "GET", url(1, "/api/v1/ephemeral/pop?queue=eq&partition=p0&batch=10"), tenantB, nil, &empty); code != 200 || len(empty.Messages) != 0 {
		t.Fatalf("tenant B pop: %d %s", code, b)
	}
	var qs struct {
		Queues []struct {
			Name     string `json:"name"`
			Messages int    `json:"messages"`
		} `json:"queues"`
	}
	if code, _, b := e2etest.EphemeralCall(ctx, t, "GET", url(2, "/api/v1/ephemeral/queues"), e2etest.TenantA, nil, &qs); code != 200 || len(qs.Queues) != 1 || qs.Queues[0].Messages != parts*5 {
		t.Fatalf("queues: %d %s", code, b)
	}

	// Pop through one node, ack through another.
	for p := 0; p < parts; p++ {
		part := fmt.Sprint("p", p)
		var a e2etest.EphemeralPopAnswer
		code, node, b := e2etest.EphemeralCall(ctx, t, "GET", url(p+1, "/api/v1/ephemeral/pop?queue=eq&group=g&batch=10&partition="+part), e2etest.TenantA, nil, &a)
		if code != 200 || len(a.Messages) != 5 || node != owners[part] {
			t.Fatalf("pop %s: %d from node %s (owner %s) %s", part, code, node, owners[part], b)
		}
		var acks []map[string]any
		for _, m := range a.Messages {
			acks = append(acks, map[string]any{"id": m.ID, "partition": m.Partition})
		}
		var out []ephAckOut
		if code, _, b := e2etest.EphemeralCall(ctx, t, "POST", url(p+2, "/api/v1/ephemeral/ack"), e2etest.TenantA, map[string]any{"queue": "eq", "group": "g", "acks": acks}, &out); code != 200 || len(out) != 5 {
			t.Fatalf("ack %s: %d %s", part, code, b)
		}
		for _, o := range out {
			if o.Outcome != "acked" {
				t.Fatalf("ack %s: %+v", part, out)
			}
		}
	}
	var depth struct {
		Depth int `json:"depth"`
	}
	if code, _, b := e2etest.EphemeralCall(ctx, t, "GET", url(0, "/api/v1/ephemeral/queues/eq/depth"), e2etest.TenantA, nil, &depth); code != 200 || depth.Depth != 0 {
		t.Fatalf("depth after acks: %d %s", code, b)
	}

	// Bad input: a clear 400, nothing changed.
	for _, bad := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/api/v1/ephemeral/push", map[string]any{"partition": "p0", "messages": e2etest.EphemeralMessages(1, "x")}},
		{"POST", "/api/v1/ephemeral/push", map[string]any{"queue": "eq", "messages": []any{}}},
		{"POST", "/api/v1/ephemeral/push", map[string]any{"queue": "eq", "messages": []any{map[string]any{}}}},
		{"POST", "/api/v1/ephemeral/ack", map[string]any{"queue": "eq", "acks": []any{map[string]any{"id": "x", "status": "maybe"}}}},
		{"POST", "/api/v1/ephemeral/configure", map[string]any{"queue": "eq", "options": map[string]any{"policy": "dropNewest"}}},
		{"POST", "/api/v1/ephemeral/configure", map[string]any{"queue": "eq", "options": map[string]any{"maxLength": -1}}},
		{"GET", "/api/v1/ephemeral/pop?queue=eq&batch=0", nil},
	} {
		var e e2etest.ErrorAnswer
		code, _, b := e2etest.EphemeralCall(ctx, t, bad.method, url(0, bad.path), e2etest.TenantA, bad.body, nil)
		_ = json.Unmarshal(b, &e)
		if code != 400 || e.Code != "bad_request" || e.Error == "" {
			t.Fatalf("%s %s %v: %d %s", bad.method, bad.path, bad.body, code, b)
		}
	}
	if code, _, b := e2etest.EphemeralCall(ctx, t, "GET", url(1, "/api/v1/ephemeral/queues/eq/depth"), e2etest.TenantA, nil, &depth); code != 200 || depth.Depth != 0 {
		t.Fatalf("bad input changed the queue: %d %s", code, b)
	}
	// The hand-over route is not on the broker port; on the node channel
	// (the raft listener) a wrong token is refused.
	for _, forged := range []struct {
		url  string
		want int
	}{{url(0, "/api/v1/ephemeral/_adopt"), 404}, {"http://" + c.Nodes[0].RaftAddr + "/node/v1/ephemeral/_adopt", 401}} {
		req, _ := http.NewRequestWithContext(ctx, "POST", forged.url, strings.NewReader(`{"dumps":[]}`))
		req.Header.Set("x-queen-raft-token", "wrong")
		if resp, err := e2etest.HTTPClient.Do(req); err != nil || resp.StatusCode != forged.want {
			t.Fatalf("forged _adopt at %s: %v %v", forged.url, resp, err)
		} else {
			resp.Body.Close()
		}
	}

	// reject: the queue's maxLength, then the node's 256 KiB.
	if code, _, b := e2etest.EphemeralCall(ctx, t, "POST", url(1, "/api/v1/ephemeral/configure"), e2etest.TenantA,
		map[string]any{"queue": "rq", "options": map[string]any{"maxLength": 5, "policy": "reject"}}, nil); code != 200 {
		t.Fatalf("configure: %d %s", code, b)
	}
	if code, _, b := e2etest.EphemeralCall(ctx, t, "POST", url(2, "/api/v1/ephemeral/push"), e2etest.TenantA, map[string]any{"queue": "rq", "messages": e2etest.EphemeralMessages(5, "r")}, nil); code != 201 {
		t.Fatalf("push 5: %d %s", code, b)
	}
	var e e2etest.ErrorAnswer
	code, _, b := e2etest.EphemeralCall(ctx, t, "POST", url(0, "/api/v1/ephemeral/push"), e2etest.TenantA, map[string]any{"queue": "rq", "messages": e2etest.EphemeralMessages(1, "r")}, nil)
	if _ = json.Unmarshal(b, &e); code != 507 || e.Code != "ephemeral_full" {
		t.Fatalf("push over maxLength: %d %s", code, b)
	}
	big := strings.Repeat("x", 20000)
	full, owner := false, ""
	for i := 0; i < 20 && !full; i++ {
		code, node, b := e2etest.EphemeralCall(ctx, t, "POST", url(i, "/api/v1/ephemeral/push"), e2etest.TenantA,
			map[string]any{"queue": "bq", "partition": "one", "messages": []any{map[string]any{"payload": big}}}, nil)
		switch code {
		case 201:
			owner = node
		case 507:
			full = true
		default:
			t.Fatalf("big push %d: %d %s", i, code, b)
		}
	}
	if !full {
		t.Fatal("20 pushes of 20 kB never hit the 256 KiB node cap")
	}
	for _, n := range c.Nodes {
		var s e2etest.EphemeralSystem
		e2etest.EphemeralCall(ctx, t, "GET", n.URL()+"/api/v1/system/ephemeral", "", nil, &s)
		if s.Bytes > s.MaxBytes || s.MaxBytes != 262144 {
			t.Fatalf("node %d over its cap: %+v", n.ID, s)
		}
		if fmt.Sprint(s.Node) == owner && s.Bytes < 200000 {
			t.Fatalf("owner %s holds only %d bytes", owner, s.Bytes)
		}
	}

	// dropOldest: ten pushes into maxLength 4 keep the newest four.
	if code, _, b := e2etest.EphemeralCall(ctx, t, "POST", url(0, "/api/v1/ephemeral/configure"), e2etest.TenantA,
		map[string]any{"queue": "dq", "options": map[string]any{"maxLength": 4, "policy": "dropOldest"}}, nil); code != 200 {
		t.Fatalf("configure: %d %s", code, b)
	}
	for i := 0; i < 10; i++ {
		if code, _, b := e2etest.EphemeralCall(ctx, t, "POST", url(i, "/api/v1/ephemeral/push"), e2etest.TenantA,
			map[string]any{"queue": "dq", "messages": []any{map[string]any{"payload": i}}}, nil); code != 201 {
			t.Fatalf("dropOldest push %d: %d %s", i, code, b)
		}
	}
	var a e2etest.EphemeralPopAnswer
	e2etest.EphemeralCall(ctx, t, "GET", url(2, "/api/v1/ephemeral/pop?queue=dq&batch=10&commitOnDelivery=true"), e2etest.TenantA, nil, &a)
	var got []string
	for _, m := range a.Messages {
		got = append(got, string(m.Payload))
	}
	if strings.Join(got, ",") != "6,7,8,9" {
		t.Fatalf("dropOldest kept %v, want 6,7,8,9", got)
	}
	// Deleting frees the memory on every node.
	if code, _, b := e2etest.EphemeralCall(ctx, t, "DELETE", url(1, "/api/v1/ephemeral/queue/bq"), e2etest.TenantA, nil, nil); code != 200 {
		t.Fatalf("delete: %d %s", code, b)
	}
}

// SIGTERM on a node hands its partitions to the next owners before it
// stops: every message pushed is popped exactly once afterwards, and a
// lease taken at the old owner can still be acked at the new one.
func TestEphemeralHandoverOnShutdown(t *testing.T) {
	c := ephCluster(t, nil)
	ctx := e2etest.Deadline(t, 2*time.Minute)
	e2etest.WaitEphemeralLive(ctx, t, c)
	leaver := c.Nodes[2]

	const parts, per = 30, 4
	onLeaver := []string{}
	for p := 0; p < parts; p++ {
		part := fmt.Sprint("h", p)
		code, node, b := e2etest.EphemeralCall(ctx, t, "POST", c.Nodes[p%2].URL()+"/api/v1/ephemeral/push", e2etest.TenantA,
			map[string]any{"queue": "hq", "partition": part, "messages": e2etest.EphemeralMessages(per, part)}, nil)
		if code != 201 {
			t.Fatalf("push: %d %s", code, b)
		}
		if node == fmt.Sprint(leaver.ID) {
			onLeaver = append(onLeaver, part)
		}
	}
	if len(onLeaver) == 0 {
		t.Fatal("node 3 owns none of 30 partitions")
	}
	// Lease one message on the leaver.
	var leased e2etest.EphemeralPopAnswer
	if code, _, b := e2etest.EphemeralCall(ctx, t, "GET", c.Nodes[0].URL()+"/api/v1/ephemeral/pop?queue=hq&group=g&partition="+onLeaver[0], e2etest.TenantA, nil, &leased); code != 200 || len(leased.Messages) != 1 {
		t.Fatalf("lease: %d %s", code, b)
	}

	// Pushes go on through every node while node 3 hands over: each one
	// answered 201 must be found afterwards.
	// A push without an answer (the leaver's connection cut) or answered
	// outcome_unknown may or may not have been stored; any other answer
	// but 201 means it was not.
	type livePushes struct{ ok, maybe []string }
	stopPush := make(chan struct{})
	pushed := make(chan livePushes)
	go func() {
		var lp livePushes
		for i := 0; ; i++ {
			select {
			case <-stopPush:
				pushed <- lp
				return
			default:
			}
			part := fmt.Sprint("h", i%parts)
			tag := fmt.Sprint("live", i)
			code, _, b := ephCallNoFatal(ctx, "POST", c.Nodes[i%3].URL()+"/api/v1/ephemeral/push", e2etest.TenantA,
				map[string]any{"queue": "hq", "partition": part, "messages": []any{map[string]any{"payload": tag}}})
			var eb e2etest.ErrorAnswer
			_ = json.Unmarshal(b, &eb)
			switch {
			case code == 201:
				lp.ok = append(lp.ok, `"`+tag+`"`)
			case code == 0 || eb.Code == "outcome_unknown":
				lp.maybe = append(lp.maybe, `"`+tag+`"`)
			}
		}
	}()
	leaver.Stop()
	close(stopPush)
	live := <-pushed
	during := live.ok
	if !leaver.Grep("shutdown: ephemeral rings handed over") || !leaver.Grep("lost=0") {
		t.Fatalf("no clean hand-over in the log:\n%s", leaver.Tail(3000))
	}

	var out []ephAckOut
	if code, _, b := e2etest.EphemeralCall(ctx, t, "POST", c.Nodes[1].URL()+"/api/v1/ephemeral/ack", e2etest.TenantA,
		map[string]any{"queue": "hq", "group": "g", "partition": onLeaver[0], "acks": []any{map[string]any{"id": leased.Messages[0].ID}}}, &out); code != 200 || out[0].Outcome != "acked" {
		t.Fatalf("ack of a handed-over lease: %d %s", code, b)
	}
	seen := map[string]bool{}
	for p := 0; p < parts; p++ {
		part := fmt.Sprint("h", p)
		for { // until the partition is empty: the live pushes add an unknown number
			var a e2etest.EphemeralPopAnswer
			code, node, b := e2etest.EphemeralCall(ctx, t, "GET", c.Nodes[p%2].URL()+"/api/v1/ephemeral/pop?queue=hq&batch=100&commitOnDelivery=true&partition="+part, e2etest.TenantA, nil, &a)
			if code != 200 || node == fmt.Sprint(leaver.ID) {
				t.Fatalf("pop %s: %d node %s %s", part, code, node, b)
			}
			if len(a.Messages) == 0 {
				break
			}
			for _, m := range a.Messages {
				if seen[string(m.Payload)] {
					t.Fatalf("duplicate %s", m.Payload)
				}
				seen[string(m.Payload)] = true
			}
		}
	}
	for _, tag := range during {
		if !seen[tag] {
			t.Fatalf("%s, pushed (201) during the hand-over, is lost", tag)
		}
	}
	maybe := 0
	for _, tag := range live.maybe {
		if seen[tag] {
			maybe++
		}
	}
	if want := parts*per - 1 + len(during) + maybe; len(seen) != want {
		t.Fatalf("after hand-over %d messages, want %d (one acked, %d pushed meanwhile, %d of %d with an unknown outcome stored)",
			len(seen), want, len(during), maybe, len(live.maybe))
	}
	t.Logf("%d pushes answered 201 during the hand-over, %d of %d with an unknown outcome stored", len(during), maybe, len(live.maybe))
}
