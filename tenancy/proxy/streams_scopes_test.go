package proxy

import (
	"context"
	"net/http"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

// TestStreamsCycleChecksEachOperationsScope: a Streams cycle pushes to its
// sink and acknowledges its source in one body, so, as in a transaction,
// each needs the scope its own route needs (issue 33, item 4): a consume
// key may not push through a cycle, nor a produce key ack through one.
// Their refusals never reach the broker; what each key may do still does.
func TestStreamsCycleChecksEachOperationsScope(t *testing.T) {
	p, _ := testProxy(t, Config{})
	broker := api.New(api.Config{}, p.engine, raftgroupstest.Quiet).Handler()
	calls := 0
	p.broker = func(ctx *fasthttp.RequestCtx) { calls++; broker(ctx) }
	ctx := context.Background()
	tn, _, _ := p.store.ensureTenant(ctx, "alpha", "")
	c, _, _ := p.store.ensureCluster(ctx, tn, "alpha", "pro", nil) // pro: Streams
	keys := map[string]string{}
	for name, scopes := range map[string][]string{"produce": {ScopeProduce}, "consume": {ScopeConsume}, "both": {ScopeProduce, ScopeConsume}} {
		key, _ := NewKey("test")
		if _, _, err := p.store.ensureKey(ctx, c.ID, name, HashKey(key), scopes); err != nil {
			t.Fatal(err)
		}
		keys[name] = key
	}
	const (
		push  = `{"query_id":"00000000-0000-4000-8000-000000000001","partition_id":"p","push_items":[{"queue":"sink","payload":1}]}`
		ack   = `{"query_id":"00000000-0000-4000-8000-000000000001","partition_id":"p","ack":{"transactionId":"x","leaseId":"","status":"completed","count":1}}`
		state = `{"query_id":"00000000-0000-4000-8000-000000000001","partition_id":"p","state_ops":[{"type":"upsert","key":"k","value":1}]}`
	)
	for _, tc := range []struct{ key, body string }{
		{"consume", push},
		{"produce", ack},
	} {
		before := calls
		if code, body := keyCall(p, "POST", "/streams/v1/cycle", keys[tc.key], tc.body); code != http.StatusForbidden {
			t.Errorf("%s key, cycle %s: %d %s, want 403", tc.key, tc.body, code, body)
		}
		if calls != before {
			t.Errorf("%s key, cycle %s reached the broker", tc.key, tc.body)
		}
	}
	// Allowed through the proxy: the broker answers (the query does not
	// exist, so the cycle itself fails there), not the proxy.
	for _, tc := range []struct{ key, body string }{
		{"produce", push}, {"consume", ack}, {"both", push}, {"consume", state}, {"produce", state},
	} {
		before := calls
		keyCall(p, "POST", "/streams/v1/cycle", keys[tc.key], tc.body)
		if calls != before+1 {
			t.Errorf("%s key, cycle %s did not reach the broker", tc.key, tc.body)
		}
	}
}

// TestStreamsCycleGrowthWeighs: a cycle that pushes or stores state grows
// the cluster and weighs against its rates; one that only acks or deletes
// state does not.
func TestStreamsCycleGrowthWeighs(t *testing.T) {
	r := Classify("POST", "/streams/v1/cycle")
	for body, want := range map[string]bool{
		`{"push_items":[{"queue":"s","payload":1}]}`:            true,
		`{"state_ops":[{"type":"upsert","key":"k","value":1}]}`: true,
		`{"state_ops":[{"type":"delete","key":"k"}]}`:           false,
		`{"ack":{"transactionId":"x","status":"completed"}}`:    false,
		`{"push_items":`: true, // the broker refuses it; weighed meanwhile
	} {
		if _, grows := refineMixed(r, []byte(body), nil); grows != want {
			t.Errorf("%s: grows %v, want %v", body, grows, want)
		}
	}
}
