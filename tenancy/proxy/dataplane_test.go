package proxy

import (
	"context"
	"net/http"
	"testing"

	"github.com/valyala/fasthttp"
)

// dataProxy is a proxy with two clusters, a key each, and a broker stub
// that answers 200 with the tenant it was handed.
func dataProxy(t *testing.T, cfg Config) (p *Proxy, keys map[string]string, clusters map[string]*Cluster) {
	t.Helper()
	p, _ = testProxy(t, cfg)
	p.broker = func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(http.StatusOK) }
	ctx := context.Background()
	keys, clusters = map[string]string{}, map[string]*Cluster{}
	for _, slug := range []string{"alpha", "beta"} {
		tn, _, _ := p.store.ensureTenant(ctx, slug, "")
		c, _, _ := p.store.ensureCluster(ctx, tn, slug, "dev", nil)
		key, _ := NewKey("test")
		if _, _, err := p.store.ensureKey(ctx, c.ID, "k", HashKey(key), AllScopes); err != nil {
			t.Fatal(err)
		}
		keys[slug], clusters[slug] = key, c
	}
	return p, keys, clusters
}

func dataCall(p *Proxy, method, path, host, key string) (int, string) {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	req.Header.SetHost(host)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	var rc fasthttp.RequestCtx
	rc.Init(&req, nil, nil)
	p.serve(&rc)
	return rc.Response.StatusCode(), string(rc.Response.Body())
}

func TestClusterFromHost(t *testing.T) {
	p, keys, _ := dataProxy(t, Config{SharedHosts: []string{"api.queen.example.com"}})
	cases := []struct {
		host, key string
		want      int
	}{
		{"alpha.queen.example.com", keys["alpha"], http.StatusOK},
		{"ALPHA.queen.example.com.:6711", keys["alpha"], http.StatusOK},
		{"beta.queen.example.com", keys["alpha"], http.StatusForbidden},          // key/cluster mismatch
		{"api.queen.example.com", keys["alpha"], http.StatusOK},                  // shared: from the key
		{"api.queen.example.com", keys["beta"], http.StatusOK},                   //
		{"localhost:6711", keys["alpha"], http.StatusMisdirectedRequest},         // no default cluster
		{"alpha.queen.example.com", keys["alpha"][:20], http.StatusUnauthorized}, // malformed key
	}
	for _, c := range cases {
		if code, body := dataCall(p, "GET", "/api/v1/resources/queues", c.host, c.key); code != c.want {
			t.Errorf("%s: %d %s, want %d", c.host, code, body, c.want)
		}
	}
	p.cfg.DefaultCluster = "beta"
	if code, _ := dataCall(p, "GET", "/api/v1/resources/queues", "localhost", keys["beta"]); code != http.StatusOK {
		t.Errorf("the default cluster: %d", code)
	}
	if code, body := dataCall(p, "GET", "/api/v1/resources/queues", "localhost", keys["alpha"]); code != http.StatusForbidden ||
		body != `{"code":"forbidden","error":"key/cluster mismatch"}` {
		t.Errorf("another cluster's key on the default: %d %s", code, body)
	}
}

func TestStatusesTakeEffect(t *testing.T) {
	p, keys, clusters := dataProxy(t, Config{})
	ctx := context.Background()
	host := "alpha.example.com"
	set := func(cluster, tenant string) {
		c := *clusters["alpha"]
		c.Status = cluster
		var tn Tenant
		_, _ = p.store.get(ctx, tenantKey("alpha"), &tn)
		tn.Status = tenant
		if _, err := p.store.apply(ctx, putOp(clusterKey(c.ID), c, false), putOp(tenantKey("alpha"), tn, false)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		cluster, tenant    string
		push, pop, listing int
	}{
		{StatusActive, StatusActive, 200, 200, 200},
		{StatusPushBlocked, StatusActive, 403, 200, 200},
		{StatusActive, StatusGrace, 403, 200, 200},
		{StatusActive, StatusSuspended, 403, 403, 403},
		{StatusDeleting, StatusGrace, 403, 403, 403},
	}
	for _, c := range cases {
		set(c.cluster, c.tenant)
		push, body := dataCall(p, "POST", "/api/v1/push", host, keys["alpha"])
		pop, _ := dataCall(p, "GET", "/api/v1/pop/queue/q", host, keys["alpha"])
		list, _ := dataCall(p, "GET", "/api/v1/resources/queues", host, keys["alpha"])
		if push != c.push || pop != c.pop || list != c.listing {
			t.Errorf("cluster %s, tenant %s: push %d (%s), pop %d, list %d", c.cluster, c.tenant, push, body, pop, list)
		}
	}
	if code, body := dataCall(p, "GET", "/api/v1/resources/queues", "beta.example.com", keys["beta"]); code != 200 {
		t.Errorf("another cluster is not affected: %d %s", code, body)
	}
}

func TestParkedPopCap(t *testing.T) {
	p, _, clusters := dataProxy(t, Config{})
	c := clusters["alpha"]
	one := n(1)
	if !p.enterParked(c, one) {
		t.Fatal("the first parked pop refused")
	}
	if !p.enterParked(c, one) {
		t.Fatal("shadow mode refused a parked pop over the cap")
	}
	p.cfg.Enforce = true
	if p.enterParked(c, one) {
		t.Fatal("enforced, a parked pop over the cap passed")
	}
	p.parked.leave(c.ID)
	p.parked.leave(c.ID)
	if !p.enterParked(c, one) {
		t.Fatal("a freed slot was not reused")
	}
	for uri, want := range map[string]bool{"/api/v1/pop/queue/q?wait=true": true, "/api/v1/ephemeral/pop?wait=1": true,
		"/api/v1/pop/queue/q": false, "/api/v1/fetch?wait=true": false} {
		var rc fasthttp.RequestCtx
		rc.Request.SetRequestURI(uri)
		if got := isParkedPop(&rc, string(rc.Path())); got != want {
			t.Errorf("%s parks: %v", uri, got)
		}
	}
}

func TestGatedFeaturesFollowThePlan(t *testing.T) {
	p, keys, clusters := dataProxy(t, Config{})
	host := "alpha.example.com"
	if code, body := dataCall(p, "POST", "/api/v1/traces", host, keys["alpha"]); code != http.StatusForbidden || body !=
		`{"code":"feature_not_in_plan","error":"the cluster's plan does not include this feature"}` {
		t.Fatalf("traces on dev: %d %s", code, body)
	}
	if code, _ := dataCall(p, "GET", "/api/v1/kv/app/k", host, keys["alpha"]); code != http.StatusOK {
		t.Fatalf("kv on dev: %d", code)
	}
	c := *clusters["alpha"]
	c.Plan = "pro"
	if _, err := p.store.apply(context.Background(), putOp(clusterKey(c.ID), c, false)); err != nil {
		t.Fatal(err)
	}
	if code, _ := dataCall(p, "POST", "/api/v1/traces", host, keys["alpha"]); code != http.StatusOK {
		t.Fatalf("traces on pro: %d", code)
	}
}
