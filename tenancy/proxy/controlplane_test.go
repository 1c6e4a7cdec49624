package proxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// call runs one request through the proxy's handler in-process.
func call(p *Proxy, method, path, token string, body io.Reader, size int) (int, string) {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	if token != "" {
		req.Header.Set(cpTokenHeader, token)
	}
	var rc fasthttp.RequestCtx
	rc.Init(&req, nil, nil)
	if body != nil {
		rc.Request.SetBodyStream(body, size)
	}
	p.serve(&rc)
	return rc.Response.StatusCode(), string(rc.Response.Body())
}

// unread fails the test if the body is read.
type unread struct{ t *testing.T }

func (u unread) Read([]byte) (int, error) {
	u.t.Error("the body was read before the token was checked")
	return 0, io.EOF
}

func TestControlPlaneGuard(t *testing.T) {
	off := &Proxy{cfg: Config{}}
	if code, _ := call(off, "POST", "/api/cp/provision", "anything", nil, 0); code != http.StatusNotFound {
		t.Fatalf("without QUEEN_PROXY_CP_TOKEN: %d", code)
	}
	p := &Proxy{cfg: Config{CPToken: "right"}}
	code, body := call(p, "POST", "/api/cp/provision", "wrong", unread{t}, 100)
	if code != http.StatusUnauthorized || !strings.Contains(body, "bad control-plane token") {
		t.Fatalf("a wrong token: %d %s", code, body)
	}
	code, body = call(p, "POST", "/api/cp/provision", "right", strings.NewReader(strings.Repeat("x", cpBodyLimit+1)), cpBodyLimit+1)
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over 1 MiB: %d %s", code, body)
	}
}

func TestControlPlaneBootstrapRouteAndS3(t *testing.T) {
	p, _ := testProxy(t, Config{CPToken: "tok"})
	if err := p.seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.seeded.Store(true)
	body := `{"tenant_slug":"hooli","admin_email":"gavin@hooli.example","key_name":"first"}`
	var first, second map[string]any
	for _, out := range []*map[string]any{&first, &second} {
		code, b := call(p, "POST", "/api/cp/bootstrap", "tok", strings.NewReader(body), len(body))
		if code != http.StatusOK || json.Unmarshal([]byte(b), out) != nil {
			t.Fatalf("bootstrap: %d %s", code, b)
		}
	}
	key, _ := first["api_key"].(string)
	if !ValidKey(key) || second["api_key"] != nil || first["key_id"] != second["key_id"] || first["cluster_id"] != second["cluster_id"] ||
		first["plan_code"] != "free" {
		t.Fatalf("bootstrap twice: %v then %v", first, second)
	}
	cred, err := p.keyCredential(context.Background(), key)
	if err != nil || cred.cluster.Slug != "hooli" {
		t.Fatalf("the minted key: %+v %v", cred, err)
	}
	if code, b := call(p, "GET", "/api/cp/clusters/hooli/s3", "tok", nil, 0); code != http.StatusNotFound || !strings.Contains(b, "s3_unavailable") {
		t.Fatalf("s3: %d %s", code, b)
	}
	for _, bad := range []string{`{"tenant_slug":"Bad Slug","admin_email":"a@b"}`, `{"tenant_slug":"ok","admin_email":"nope"}`,
		`{"tenant_slug":"ok","admin_email":"a@b","plan":"platinum"}`, `not json`} {
		if code, b := call(p, "POST", "/api/cp/bootstrap", "tok", strings.NewReader(bad), len(bad)); code != http.StatusBadRequest ||
			!strings.Contains(b, `"code":"invalid"`) {
			t.Errorf("%s: %d %s", bad, code, b)
		}
	}
}

func TestOperatorListIsTheWholeTruth(t *testing.T) {
	p, _ := testProxy(t, Config{})
	ctx := context.Background()
	tn, _, _ := p.store.ensureTenant(ctx, "acme", "")
	for _, e := range []string{"ops@example.com", "alice@example.com", "bob@example.com"} {
		if _, _, err := p.store.ensureUser(ctx, "", e, tn, "", "", ""); err != nil {
			t.Fatal(err)
		}
	}
	operators := func() map[string]bool {
		out := map[string]bool{}
		_ = p.store.scan(ctx, "user/", "", func(_ string, v []byte) bool {
			var u User
			_ = json.Unmarshal(v, &u)
			if u.Operator {
				out[u.Email] = true
			}
			return true
		})
		return out
	}
	p.cfg.Operators, p.cfg.OperatorsSet = []string{"ops@example.com", "ALICE@example.com"}, true
	if err := p.applyOperators(ctx); err != nil {
		t.Fatal(err)
	}
	if got := operators(); len(got) != 2 || !got["ops@example.com"] || !got["alice@example.com"] {
		t.Fatalf("operators %v", got)
	}
	p.cfg.Operators = []string{"bob@example.com"}
	if err := p.applyOperators(ctx); err != nil {
		t.Fatal(err)
	}
	if got := operators(); len(got) != 1 || !got["bob@example.com"] {
		t.Fatalf("operators after the list changed %v", got)
	}
	p.cfg.Operators = nil
	if err := p.applyOperators(ctx); err != nil {
		t.Fatal(err)
	}
	if got := operators(); len(got) != 0 {
		t.Fatalf("an empty list left operators %v", got)
	}
}

func TestOperatorRoutes(t *testing.T) {
	p, _ := testProxy(t, Config{JWTSecret: "s", CPToken: "tok", OperatorEnabled: true, Operators: []string{"ops@example.com"}, OperatorsSet: true})
	reached := 0
	p.broker = func(ctx *fasthttp.RequestCtx) { reached++; ctx.SetStatusCode(http.StatusOK) }
	ctx := context.Background()
	tn, _, _ := p.store.ensureTenant(ctx, "acme", "")
	ops, _, _ := p.store.ensureUser(ctx, "", "ops@example.com", tn, "", "", "")
	user, _, _ := p.store.ensureUser(ctx, "", "dev@example.com", tn, "", "", "")
	if err := p.applyOperators(ctx); err != nil {
		t.Fatal(err)
	}
	opsToken, _ := p.issueSession(ops, time.Now())
	userToken, _ := p.issueSession(user, time.Now())
	get := func(path, bearer string, hdr map[string]string) int {
		var req fasthttp.Request
		req.SetRequestURI(path)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		var rc fasthttp.RequestCtx
		rc.Init(&req, nil, nil)
		p.serve(&rc)
		return rc.Response.StatusCode()
	}
	if code := get("/api/v1/status", opsToken, nil); code != http.StatusOK {
		t.Fatalf("an operator: %d", code)
	}
	if code := get("/api/v1/status", userToken, nil); code != http.StatusNotFound {
		t.Fatalf("a user who is no operator: %d", code)
	}
	if code := get("/metrics/prometheus", "", map[string]string{cpTokenHeader: "tok"}); code != http.StatusOK {
		t.Fatalf("prometheus with the control-plane token: %d", code)
	}
	if code := get("/metrics/prometheus", "nope", nil); code != http.StatusNotFound {
		t.Fatalf("prometheus without it: %d", code)
	}
	p.cfg.OperatorEnabled = false
	if code := get("/api/v1/status", opsToken, nil); code != http.StatusNotFound {
		t.Fatalf("operators off: %d", code)
	}
	if reached != 2 {
		t.Fatalf("the broker was reached %d times, want 2", reached)
	}
}

// TestSharedBrokerTenantRefusesDataRoutes: with
// QUEEN_PROXY_TENANT_HEADER=false every cluster is the broker's default
// tenant, so the control plane will not act on a cluster's broker data.
func TestSharedBrokerTenantRefusesDataRoutes(t *testing.T) {
	p, _ := testProxy(t, Config{CPToken: "tok"})
	p.cfg.TenantHeader = false
	ctx := context.Background()
	tn, _, _ := p.store.ensureTenant(ctx, "acme", "")
	if _, _, err := p.store.ensureCluster(ctx, tn, "acme", "dev", nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ method, path string }{{"GET", "/api/cp/clusters/acme/queues"}, {"POST", "/api/cp/clusters/acme/configure"}} {
		if code, body := call(p, r.method, r.path, "tok", strings.NewReader(`{"queue":"q"}`), 13); code != http.StatusConflict ||
			!strings.Contains(body, "system_tenant") {
			t.Errorf("%s %s: %d %s", r.method, r.path, code, body)
		}
	}
	body := `{"status":"deleting"}`
	if code, _ := call(p, "PUT", "/api/cp/tenants/acme/status", "tok", strings.NewReader(body), len(body)); code != http.StatusOK {
		t.Fatalf("status: %d", code)
	}
	if code, out := call(p, "POST", "/api/cp/tenants/acme/purge", "tok", nil, 0); code != http.StatusConflict || !strings.Contains(out, "system_tenant") {
		t.Fatalf("purge of a shared tenant: %d %s", code, out)
	}
}
