package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

// scopedProxy is a proxy in front of a real broker, with one cluster
// (alpha, dev plan: kv and timers) and a key per scope set; calls counts
// the requests that reached the broker.
func scopedProxy(t *testing.T) (p *Proxy, keys map[string]string, calls *int) {
	t.Helper()
	p, _ = testProxy(t, Config{})
	broker := api.New(api.Config{}, p.engine, raftgroupstest.Quiet).Handler()
	calls = new(int)
	p.broker = func(ctx *fasthttp.RequestCtx) { *calls++; broker(ctx) }
	ctx := context.Background()
	tn, _, _ := p.store.ensureTenant(ctx, "alpha", "")
	c, _, _ := p.store.ensureCluster(ctx, tn, "alpha", "dev", nil)
	keys = map[string]string{}
	for name, scopes := range map[string][]string{
		"produce": {ScopeProduce}, "consume": {ScopeConsume}, "producer": {ScopeProduce, ScopeRead}, "admin": AllScopes,
	} {
		key, _ := NewKey("test")
		if _, _, err := p.store.ensureKey(ctx, c.ID, name, HashKey(key), scopes); err != nil {
			t.Fatal(err)
		}
		keys[name] = key
	}
	return p, keys, calls
}

// keyCall sends one request with a body through the proxy as key.
func keyCall(p *Proxy, method, path, key, body string) (int, string) {
	code, _, out := webCall(p, method, path, body, map[string]string{"Authorization": "Bearer " + key, "Host": "alpha.example.com"})
	return code, out
}

// TestMixedRoutesCheckEachOperationsScope: an operation inside a mixed
// route (a transaction's push, ack, positions, kv and timers; a KV or
// timer batch) needs the scopes its own route needs. A produce key moving
// a group's position in a transaction, produce and consume keys reading
// KV through a batch or a transaction, deleting KV keys or cancelling
// timers: each is 403 {"code","error"} and never reaches the broker,
// while what the key may do still works.
func TestMixedRoutesCheckEachOperationsScope(t *testing.T) {
	p, keys, calls := scopedProxy(t)
	admin := keys["admin"]
	// Data for the refused calls to leave alone.
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v1/push", `{"items":[{"queue":"q","payload":1}]}`},
		{"PUT", "/api/v1/kv/app/k", `{"value":"v"}`},
		{"POST", "/api/v1/timers", `{"operations":[{"op":"schedule","queue":"q","timerKey":"t","delayMs":3600000}]}`},
		{"POST", "/api/v1/consumer-groups/positions", `{"consumerGroup":"g","write":[{"queue":"q","partition":"Default","offset":1}]}`},
	} {
		if code, body := keyCall(p, c.method, c.path, admin, c.body); code >= 300 {
			t.Fatalf("setup %s %s: %d %s", c.method, c.path, code, body)
		}
	}

	kvGet := `{"operations":[{"op":"get","ns":"app","key":"k"}]}`
	refused := []struct {
		key, method, path, body string
	}{
		// A produce key may not move a group's position: the positions route is 403 for it.
		{"produce", "POST", "/api/v1/transaction", `{"positions":[{"queue":"q","consumerGroup":"g","offset":5}]}`},
		{"produce", "POST", "/api/v1/consumer-groups/positions", `{"consumerGroup":"g","write":[{"queue":"q","partition":"Default","offset":5}]}`},
		// Nor ack, which is consumption.
		{"produce", "POST", "/api/v1/transaction", `{"operations":[{"type":"ack","transactionId":"x","partitionId":"y","leaseId":"z"}]}`},
		// Reading KV needs read, as GET /api/v1/kv does.
		{"produce", "GET", "/api/v1/kv/app/k", ""},
		{"produce", "POST", "/api/v1/kv", kvGet},
		{"produce", "POST", "/api/v1/kv", `{"operations":[{"op":"getPrefix","ns":"app","prefix":"k"}]}`},
		{"produce", "POST", "/api/v1/kv", `{"operations":[{"op":"getMany","ns":"app","keys":["k"]}]}`},
		{"produce", "POST", "/api/v1/kv", `{"operations":[{"op":"put","ns":"app","key":"n","value":1},{"op":"get","ns":"app","key":"k"}]}`},
		{"produce", "POST", "/api/v1/transaction", `{"operations":[{"type":"push","items":[{"queue":"q","payload":2}]}],"kv":[{"op":"get","ns":"app","key":"k"}]}`},
		{"consume", "GET", "/api/v1/kv/app/k", ""},
		{"consume", "POST", "/api/v1/kv", kvGet},
		{"consume", "POST", "/api/v1/kv", `{"operations":[{"op":"getPrefix","ns":"app","prefix":"k"}]}`},
		// Writing KV needs produce, as PUT does.
		{"consume", "PUT", "/api/v1/kv/app/k", `{"value":"w"}`},
		{"consume", "POST", "/api/v1/kv", `{"operations":[{"op":"put","ns":"app","key":"k","value":"w"}]}`},
		// Deleting KV keys and cancelling or moving timers: admin.
		{"produce", "DELETE", "/api/v1/kv/app/k", ""},
		{"produce", "POST", "/api/v1/kv", `{"operations":[{"op":"delete","ns":"app","key":"k"}]}`},
		{"produce", "POST", "/api/v1/transaction", `{"operations":[{"type":"push","items":[{"queue":"q","payload":3}]}],"kv":[{"op":"delete","ns":"app","key":"k"}]}`},
		{"consume", "DELETE", "/api/v1/kv/app/k", ""},
		{"consume", "POST", "/api/v1/kv", `{"operations":[{"op":"delete","ns":"app","key":"k"}]}`},
		{"produce", "DELETE", "/api/v1/timers/q/t", ""},
		{"produce", "POST", "/api/v1/timers", `{"operations":[{"op":"cancel","queue":"q","timerKey":"t"}]}`},
		{"produce", "POST", "/api/v1/timers", `{"operations":[{"op":"reschedule","queue":"q","timerKey":"t","delayMs":1}]}`},
		{"produce", "POST", "/api/v1/transaction", `{"operations":[{"type":"push","items":[{"queue":"q","payload":4}]}],"timers":[{"op":"cancel","queue":"q","timerKey":"t"}]}`},
		{"consume", "DELETE", "/api/v1/timers/q/t", ""},
		{"consume", "POST", "/api/v1/timers", `{"operations":[{"op":"cancel","queue":"q","timerKey":"t"}]}`},
	}
	for _, c := range refused {
		before := *calls
		code, body := keyCall(p, c.method, c.path, keys[c.key], c.body)
		var e struct{ Code, Error string }
		if code != http.StatusForbidden || json.Unmarshal([]byte(body), &e) != nil || e.Code == "" || e.Error == "" {
			t.Errorf("%s key, %s %s %s: %d %s, want 403 {code,error}", c.key, c.method, c.path, c.body, code, body)
		}
		if *calls != before {
			t.Errorf("%s key, %s %s %s reached the broker", c.key, c.method, c.path, c.body)
		}
	}
	// A body the proxy cannot read is not passed on unchecked.
	before := *calls
	if code, body := keyCall(p, "POST", "/api/v1/kv", keys["produce"], `{"operations":[{"op":"get","ns":"app","key":"k"}]`); code != http.StatusBadRequest || *calls != before {
		t.Errorf("a malformed batch: %d %s, reached the broker: %v", code, body, *calls != before)
	}

	// Nothing changed: the value, the timer, the position, one message.
	if code, body := keyCall(p, "GET", "/api/v1/kv/app/k", admin, ""); code != 200 || !strings.Contains(body, `"v"`) {
		t.Errorf("the KV key after the refusals: %d %s", code, body)
	}
	if code, body := keyCall(p, "GET", "/api/v1/timers/q/t", admin, ""); code != 200 {
		t.Errorf("the timer after the refusals: %d %s", code, body)
	}
	readG := `{"consumerGroup":"g","read":[{"queue":"q","partition":"Default"}]}`
	if code, body := keyCall(p, "POST", "/api/v1/consumer-groups/positions", admin, readG); code != 200 || !strings.Contains(body, `"offset":1`) {
		t.Errorf("the group after the refusals: %d %s", code, body)
	}

	// What each key may do still works.
	allowed := []struct {
		key, method, path, body string
	}{
		{"produce", "POST", "/api/v1/transaction", `{"operations":[{"type":"push","items":[{"queue":"q","payload":5}]}]}`},
		{"produce", "POST", "/api/v1/kv", `{"operations":[{"op":"put","ns":"app","key":"p","value":1},{"op":"incr","ns":"app","key":"c"}]}`},
		{"produce", "PUT", "/api/v1/kv/app/p2", `{"value":1}`},
		{"produce", "POST", "/api/v1/timers", `{"operations":[{"op":"schedule","queue":"q","timerKey":"t2","delayMs":3600000}]}`},
		{"producer", "POST", "/api/v1/kv", kvGet},
		{"producer", "POST", "/api/v1/transaction", `{"operations":[{"type":"push","items":[{"queue":"q","payload":6}]}],"kv":[{"op":"get","ns":"app","key":"k"}]}`},
		{"producer", "GET", "/api/v1/kv/app/k", ""},
		{"admin", "POST", "/api/v1/transaction", `{"positions":[{"queue":"q","consumerGroup":"g","offset":0}]}`},
		{"admin", "POST", "/api/v1/kv", `{"operations":[{"op":"get","ns":"app","key":"k"},{"op":"delete","ns":"app","key":"p"}]}`},
		{"admin", "POST", "/api/v1/timers", `{"operations":[{"op":"cancel","queue":"q","timerKey":"t2"}]}`},
		{"admin", "DELETE", "/api/v1/kv/app/p2", ""},
		{"admin", "DELETE", "/api/v1/timers/q/t", ""},
	}
	for _, c := range allowed {
		code, body := keyCall(p, c.method, c.path, keys[c.key], c.body)
		if code >= 300 || (c.path == "/api/v1/transaction" && !strings.Contains(body, `"success":true`)) {
			t.Errorf("%s key, %s %s %s: %d %s", c.key, c.method, c.path, c.body, code, body)
		}
	}
}
