package api

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

const testJWTSecret = "http-test-secret-long-enough-for-hs256"

// tenantA and tenantB are two tenants of the tenancy-mode tests.
const (
	tenantA = "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c"
	tenantB = "0b9e2c41-5d3a-4f7e-8a6b-1c2d3e4f5a6b"
)

// startJWTNode starts a node with broker JWT on (HS256, testJWTSecret);
// edit may change the rest of its config.
func startJWTNode(t *testing.T, edit func(*Config)) *node {
	t.Helper()
	acfg := authn.DefaultConfig()
	acfg.Enabled, acfg.Secret = true, testJWTSecret
	v, err := authn.New(context.Background(), acfg, raftgroupstest.Quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return startNodeConfig(t, nil, func(c *Config) {
		c.Auth = v
		if edit != nil {
			edit(c)
		}
	})
}

func token(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	claims["exp"] = time.Now().Add(time.Hour).Unix()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(testJWTSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// call sends one request with an optional bearer token and headers (pairs)
// and returns the status and body.
func call(t *testing.T, method, url, tok, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTenantIDsAreNotPublic: in tenancy mode with broker JWT on, the public
// Prometheus scrape must not name tenants (a tenant id plus any valid token
// was a Kafka login as that tenant), nor may a tenant's admin token see the
// others; the operator's token (admin, no tenant) still sees them.
func TestTenantIDsAreNotPublic(t *testing.T) {
	n := startJWTNode(t, func(c *Config) { c.TenancyHeader = true })
	rw := token(t, jwt.MapClaims{"role": "read-write", "tenant": tenantA})
	if code, body := call(t, "POST", n.url+"/api/v1/push", rw, `{"items":[{"queue":"orders","payload":1}]}`,
		"x-queen-tenant", tenantA); code != http.StatusCreated {
		t.Fatalf("push: %d %s", code, body)
	}
	code, body := call(t, "GET", n.url+"/metrics/prometheus", "", "")
	if code != http.StatusOK || strings.Contains(body, tenantA) {
		t.Fatalf("public scrape: %d, names the tenant: %v", code, strings.Contains(body, tenantA))
	}
	if !strings.Contains(body, "queen_raft_term") {
		t.Fatalf("public scrape lost the node's own metrics")
	}
	adminOfB := token(t, jwt.MapClaims{"role": "admin", "tenant": tenantB})
	if code, body := call(t, "GET", n.url+"/metrics/prometheus", adminOfB, ""); code != http.StatusOK || strings.Contains(body, tenantA) {
		t.Fatalf("B's admin scrape: %d, names A: %v", code, strings.Contains(body, tenantA))
	}
	admin := token(t, jwt.MapClaims{"role": "admin"})
	if code, body := call(t, "GET", n.url+"/metrics/prometheus", admin, ""); code != http.StatusOK || !strings.Contains(body, tenantA) {
		t.Fatalf("admin scrape: %d, names the tenant: %v", code, strings.Contains(body, tenantA))
	}
}

// TestTokenTenantMustMatchTheHeader: a token that names a tenant acts for
// that tenant only, whatever x-queen-tenant says.
func TestTokenTenantMustMatchTheHeader(t *testing.T) {
	n := startJWTNode(t, func(c *Config) { c.TenancyHeader = true })
	ofA := token(t, jwt.MapClaims{"role": "read-write", "tenant": tenantA})
	code, body := call(t, "POST", n.url+"/api/v1/push", ofA, `{"items":[{"queue":"orders","payload":1}]}`, "x-queen-tenant", tenantB)
	if code != http.StatusForbidden || !strings.Contains(body, `"code":"wrong_tenant"`) {
		t.Fatalf("A's token as tenant B: %d %s", code, body)
	}
	if code, body := call(t, "GET", n.url+"/api/v1/resources/queues", ofA, "", "x-queen-tenant", tenantB); code != http.StatusForbidden {
		t.Fatalf("A's token listing B's queues: %d %s", code, body)
	}
	if code, body := call(t, "GET", n.url+"/api/v1/resources/queues", ofA, "", "x-queen-tenant", tenantA); code != http.StatusOK {
		t.Fatalf("A's token as A: %d %s", code, body)
	}
}

// TestWriteOnlyTokensOnlyScheduleTimers: write-only may add timers (a
// schedule of an existing key changes nothing), but cancelling or
// rescheduling one destroys or changes what others scheduled, which
// DELETE /api/v1/timers/... already reserves for read-write.
func TestWriteOnlyTokensOnlyScheduleTimers(t *testing.T) {
	n := startJWTNode(t, nil)
	wo := token(t, jwt.MapClaims{"role": "write-only"})
	rw := token(t, jwt.MapClaims{"role": "read-write"})
	op := func(kind string) string {
		return `{"operations":[{"op":"` + kind + `","queue":"q","timerKey":"k","delayMs":60000,"payload":"eA=="}]}`
	}
	if code, body := call(t, "POST", n.url+"/api/v1/timers", wo, op("schedule")); code != http.StatusOK || !strings.Contains(body, `"scheduled"`) {
		t.Fatalf("write-only schedule: %d %s", code, body)
	}
	for _, kind := range []string{"cancel", "reschedule"} {
		code, body := call(t, "POST", n.url+"/api/v1/timers", wo, op(kind))
		if code != http.StatusForbidden || !strings.Contains(body, `"code":"forbidden"`) {
			t.Errorf("write-only %s: %d %s", kind, code, body)
		}
	}
	if code, body := call(t, "GET", n.url+"/api/v1/timers/q/k", rw, ""); code != http.StatusOK {
		t.Fatalf("the timer is gone after refused cancels: %d %s", code, body)
	}
	if code, body := call(t, "POST", n.url+"/api/v1/timers", rw, op("cancel")); code != http.StatusOK || !strings.Contains(body, `"cancelled"`) {
		t.Fatalf("read-write cancel: %d %s", code, body)
	}
}
