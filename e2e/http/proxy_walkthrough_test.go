package http

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

const (
	missingCredentialBody = `{"code":"unauthorized","error":"missing bearer credential"}`
	notPermittedBody      = `{"code":"forbidden","error":"operation not permitted for this credential"}`
	keyMismatchBody       = `{"code":"forbidden","error":"key/cluster mismatch"}`
)

// proxyNode starts one node with the proxy on its own port and the
// seed's bootstrap environment plus extra, and waits for the bootstrap.
func proxyNode(t *testing.T, key, cpToken string, extra map[string]string) (*harness.Cluster, string) {
	t.Helper()
	port := proxyPort(t)
	env := map[string]string{
		"QUEEN_PROXY_EMBEDDED":           "true",
		"QUEEN_PROXY_PORT":               strconv.Itoa(port),
		"QUEEN_PROXY_JWT_SECRET":         "session-secret-for-tests",
		"QUEEN_PROXY_CP_TOKEN":           cpToken,
		"QUEEN_PROXY_BOOTSTRAP_TENANT":   "acme",
		"QUEEN_PROXY_BOOTSTRAP_API_KEY":  key,
		"QUEEN_PROXY_DEFAULT_CLUSTER":    "acme",
		"QUEEN_PROXY_BOOTSTRAP_PASSWORD": "hunter22",
		"QUEEN_PROXY_METER_FLUSH_MS":     "200",
	}
	for k, v := range extra {
		env[k] = v
	}
	c := e2etest.StartPreparedCluster(t, harness.Options{Nodes: 1, Env: env}, func(c *harness.Cluster) {
		c.Nodes[0].Env["QUEEN_PROXY_SPOOL_DIR"] = filepath.Join(c.Nodes[0].Dir, "proxy-spool")
	})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 20*time.Second)
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		return n.Grep("proxy: bootstrap tenant ready"), nil
	}); err != nil {
		t.Fatalf("no bootstrap line: %v", err)
	}
	return c, fmt.Sprintf("http://127.0.0.1:%d", port)
}

// TestProxySeedWalkthrough runs the seed's page command for command:
// boot with the bootstrap env, push with the key (201), without it (401
// with the seed's body), a produce-only key listing queues (403); then
// provisioning twice, key/cluster mismatch, usage, the teardown order,
// size caps and shadow mode on the same node.
func TestProxySeedWalkthrough(t *testing.T) {
	key, _ := newAPIKey(t)
	const token = "cp-token-for-tests"
	c, base := proxyNode(t, key, token, nil)
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 40*time.Second)
	if !n.Grep("boot: single binary: proxy in-process on its own port; the broker router serves PORT (internal)") ||
		!n.Grep("tenant=acme created=true") {
		t.Fatalf("boot lines missing:\n%s", n.Tail(3000))
	}

	push := `{"items":[{"queue":"orders","partition":"customer-123","payload":{"orderId":8891}}]}`
	code, _, body := proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", body: push})
	if code != http.StatusUnauthorized || body != missingCredentialBody {
		t.Fatalf("push without a key: %d %s", code, body)
	}
	// The client's own tenant header is dropped: the push lands in acme's
	// broker tenant, not the default tenant the raw port shows.
	code, _, body = proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", body: push, bearer: key,
		headers: map[string]string{"x-queen-tenant": "00000000-0000-0000-0000-000000000001"}})
	if code != http.StatusCreated || !strings.Contains(body, `"status":"queued"`) {
		t.Fatalf("push with the key: %d %s", code, body)
	}
	_, _, raw := proxyDo(t, ctx, n.URL(), proxyReq{method: "GET", path: "/api/v1/resources/queues"})
	if strings.Contains(raw, "orders") {
		t.Fatalf("the proxied push landed in the raw port's default tenant: %s", raw)
	}
	_, _, listed := proxyDo(t, ctx, base, proxyReq{method: "GET", path: "/api/v1/resources/queues", bearer: key})
	if !strings.Contains(listed, "orders") {
		t.Fatalf("acme's key does not list its queue: %s", listed)
	}

	// provision, twice: same ids, every created flag false the second time.
	gkey, ghash := newAPIKey(t)
	prov := provisionBody("globex", "308d3f3d-2306-41de-95f1-e32b12ec7470", ghash, "pro", "produce")
	var first, second struct {
		BrokerTenant string          `json:"broker_tenant_uuid"`
		ClusterID    string          `json:"cluster_id"`
		KeyID        string          `json:"key_id"`
		TenantID     string          `json:"tenant_id"`
		UserID       string          `json:"user_id"`
		PlanCode     string          `json:"plan_code"`
		Created      map[string]bool `json:"created"`
	}
	if c := cp(t, ctx, base, token, "POST", "/api/cp/provision", prov, &first); c != http.StatusOK {
		t.Fatalf("provision: %d", c)
	}
	if c := cp(t, ctx, base, token, "POST", "/api/cp/provision", prov, &second); c != http.StatusOK {
		t.Fatalf("provision again: %d", c)
	}
	for _, f := range []string{"cluster", "key", "tenant", "user"} {
		if !first.Created[f] || second.Created[f] {
			t.Fatalf("created flags: first %v, second %v", first.Created, second.Created)
		}
	}
	first.Created, second.Created = nil, nil
	if fmt.Sprint(first) != fmt.Sprint(second) || first.PlanCode != "pro" || first.ClusterID == "" {
		t.Fatalf("provision is not idempotent: %+v vs %+v", first, second)
	}
	if c := cp(t, ctx, base, "wrong", "POST", "/api/cp/provision", prov, nil); c != http.StatusUnauthorized {
		t.Fatalf("a wrong control-plane token: %d", c)
	}

	globex := "globex.queen.example.com"
	code, _, body = proxyDo(t, ctx, base, proxyReq{method: "GET", path: "/api/v1/resources/queues", bearer: gkey, host: globex})
	if code != http.StatusForbidden || body != notPermittedBody {
		t.Fatalf("a produce-only key listing queues: %d %s", code, body)
	}
	code, _, body = proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", body: pushBody("gq", `{"a":1}`), bearer: gkey})
	if code != http.StatusForbidden || body != keyMismatchBody {
		t.Fatalf("globex's key on acme's host: %d %s", code, body)
	}
	code, _, body = proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", body: pushBody("gq", `{"a":1}`), bearer: gkey, host: globex})
	if code != http.StatusCreated {
		t.Fatalf("globex push: %d %s", code, body)
	}
	code, _, body = proxyDo(t, ctx, base, proxyReq{method: "GET", path: "/api/v1/system/placement", bearer: key})
	if code != http.StatusNotFound || !strings.Contains(body, "route_blocked") {
		t.Fatalf("a system route through the proxy: %d %s", code, body)
	}

	// Usage rows for acme's push.
	var acme struct {
		Cluster struct {
			ID string `json:"id"`
		} `json:"cluster"`
	}
	if c := cp(t, ctx, base, token, "GET", "/api/cp/clusters/acme", "", &acme); c != http.StatusOK {
		t.Fatalf("cluster acme: %d", c)
	}
	var usage struct {
		Minutes []struct {
			Op      string `json:"op"`
			Msgs    int    `json:"msgs"`
			Reqs    int    `json:"reqs"`
			BytesIn int    `json:"bytes_in"`
		} `json:"minutes"`
	}
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		cp(t, ctx, base, token, "GET", "/api/cp/clusters/"+acme.Cluster.ID+"/usage", "", &usage)
		for _, m := range usage.Minutes {
			if m.Op == "push" && m.Msgs == 1 && m.Reqs == 1 && m.BytesIn == len(push) {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no usage row for the push: %+v", usage)
	}

	teardown(t, ctx, base, token, gkey, globex)
	sizeCapsAndShadow(t, ctx, n, base, key)

	// A per-cluster override replaces one limit; a null body clears them.
	small := pushBody("orders", `"`+strings.Repeat("y", 40)+`"`)
	if c := cp(t, ctx, base, token, "PUT", "/api/cp/clusters/"+acme.Cluster.ID+"/overrides", `{"max_payload_bytes": 16, "max_queues": null}`, nil); c != http.StatusOK {
		t.Fatalf("overrides: %d", c)
	}
	if code, _, body := proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", body: small, bearer: key}); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a payload over the overridden cap: %d %s", code, body)
	}
	if c := cp(t, ctx, base, token, "PUT", "/api/cp/clusters/"+acme.Cluster.ID+"/overrides", `null`, nil); c != http.StatusOK {
		t.Fatalf("clearing overrides: %d", c)
	}
	if code, _, body := proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", body: small, bearer: key}); code != http.StatusCreated {
		t.Fatalf("the same push with the overrides cleared: %d %s", code, body)
	}
	consoleSignIn(t, ctx, base, key)
}

// teardown takes globex down in the seed's order, each step refused out
// of order.
func teardown(t *testing.T, ctx context.Context, base, token, gkey, host string) {
	t.Helper()
	expect := func(method, path, body string, want int, wantIn string) string {
		t.Helper()
		code, _, got := proxyDo(t, ctx, base, proxyReq{method: method, path: path, body: body, headers: map[string]string{"x-queen-cp-token": token}})
		if code != want || !strings.Contains(got, wantIn) {
			t.Fatalf("%s %s: %d %s, want %d with %s", method, path, code, got, want, wantIn)
		}
		return got
	}
	expect("DELETE", "/api/cp/tenants/globex", "", 409, "not_deleting")
	expect("POST", "/api/cp/tenants/globex/purge", "", 409, "not_deleting")
	expect("PUT", "/api/cp/tenants/globex/status", `{"status":"deleting"}`, 200, `"ok":true`)
	code, _, body := proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", body: pushBody("gq", `{"a":2}`), bearer: gkey, host: host})
	if code != http.StatusForbidden || !strings.Contains(body, "cluster_suspended") {
		t.Fatalf("a deleting tenant's push: %d %s", code, body)
	}
	expect("DELETE", "/api/cp/tenants/globex", "", 409, "not_purged")
	var pass struct {
		Done     bool `json:"done"`
		Clusters []struct {
			PartitionsDeleted int `json:"partitions_deleted"`
		} `json:"clusters"`
	}
	if err := json.Unmarshal([]byte(expect("POST", "/api/cp/tenants/globex/purge", "", 200, `"existed":true`)), &pass); err != nil ||
		pass.Done || len(pass.Clusters) != 1 || pass.Clusters[0].PartitionsDeleted != 1 {
		t.Fatalf("first purge pass: %+v %v", pass, err)
	}
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		_, _, b := proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/cp/tenants/globex/purge", headers: map[string]string{"x-queen-cp-token": token}})
		return strings.Contains(b, `"done":true,"existed":true`), nil
	}); err != nil {
		t.Fatal("the purge never finished")
	}
	expect("DELETE", "/api/cp/tenants/globex", "", 200, `"existed":true`)
	expect("DELETE", "/api/cp/tenants/globex", "", 200, `"existed":false`)
	code, _, _ = proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", body: pushBody("gq", `{"a":3}`), bearer: gkey, host: host})
	if code != http.StatusUnauthorized {
		t.Fatalf("a deleted tenant's key: %d", code)
	}
}

// sizeCapsAndShadow: a payload over the dev plan's 512 KiB is 413 even in
// shadow mode; a burst over its rate passes and is logged would_block.
func sizeCapsAndShadow(t *testing.T, ctx context.Context, n *harness.Node, base, key string) {
	t.Helper()
	big := `"` + strings.Repeat("x", 600<<10) + `"`
	code, _, body := proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", body: pushBody("orders", big), bearer: key})
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "payload_too_large") {
		t.Fatalf("an oversized payload in shadow mode: %d %s", code, body)
	}
	// dev: 10 requests/s, burst 50. Every request passes; some are logged.
	for i := 0; !n.Grep("would_block=true"); i++ {
		if i == 500 {
			t.Fatal("500 requests in a row logged no would_block=true")
		}
		code, _, body := proxyDo(t, ctx, base, proxyReq{method: "GET", path: "/api/v1/resources/queues", bearer: key})
		if code != http.StatusOK {
			t.Fatalf("request %d of a burst in shadow mode: %d %s", i, code, body)
		}
	}
}

// consoleSignIn signs the bootstrap admin in with the local password.
func consoleSignIn(t *testing.T, ctx context.Context, base, key string) {
	t.Helper()
	code, _, body := proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/auth/login", body: `{"email":"admin@localhost","password":"hunter22"}`})
	var login struct {
		Token string `json:"token"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &login) != nil || login.Token == "" {
		t.Fatalf("login: %d %s", code, body)
	}
	if code, _, _ := proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/auth/login", body: `{"email":"admin@localhost","password":"nope"}`}); code != http.StatusUnauthorized {
		t.Fatalf("a wrong password: %d", code)
	}
	code, _, body = proxyDo(t, ctx, base, proxyReq{method: "GET", path: "/api/console/me", bearer: login.Token})
	if code != http.StatusOK || !strings.Contains(body, `"slug":"acme"`) || !strings.Contains(body, `"role":"admin"`) {
		t.Fatalf("console me: %d %s", code, body)
	}
	if code, _, _ := proxyDo(t, ctx, base, proxyReq{method: "GET", path: "/api/console/me", bearer: key}); code != http.StatusUnauthorized {
		t.Fatalf("an API key on the console: %d", code)
	}
	// A session works on the data plane with the admin's role; its cookie
	// (the dashboard's) for reads only.
	if code, _, body := proxyDo(t, ctx, base, proxyReq{method: "GET", path: "/api/v1/resources/queues", bearer: login.Token}); code != http.StatusOK {
		t.Fatalf("a session listing queues: %d %s", code, body)
	}
	cookie := map[string]string{"Cookie": "queen_session=" + login.Token}
	if code, _, body := proxyDo(t, ctx, base, proxyReq{method: "GET", path: "/api/v1/resources/queues", headers: cookie}); code != http.StatusOK {
		t.Fatalf("the session cookie listing queues: %d %s", code, body)
	}
	if code, _, body := proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", body: pushBody("orders", "1"), headers: cookie}); code != http.StatusForbidden || !strings.Contains(body, `"web_header_required"`) {
		t.Fatalf("a push carried by the session cookie alone: %d %s", code, body)
	}
}
