package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/wire"
)

// routeCall is one request and the status that shows its handler ran.
type routeCall struct {
	method, path, body string
	ran                int
}

// operatorCalls reach every operator route (spec §2.3 routes 40, 83-92
// as this node serves them), with bodies whose answer shows the handler
// ran: 200, or 400 or 409 for a change refused for naming no node (so
// nothing in the cluster changes).
var operatorCalls = []routeCall{
	{"GET", "/api/v1/system/raft/membership", "", http.StatusOK},
	{"POST", "/api/v1/system/raft/membership/learners", `{}`, http.StatusBadRequest},
	{"POST", "/api/v1/system/raft/membership/promote", `{}`, http.StatusBadRequest},
	{"PUT", "/api/v1/system/raft/membership/voters", `{}`, http.StatusConflict}, // last_voter
	{"DELETE", "/api/v1/system/raft/membership/members/0", "", http.StatusBadRequest},
	{"GET", "/api/v1/system/ephemeral", "", http.StatusOK},
	{"POST", "/api/v1/system/ephemeral", `{"enabled":true}`, http.StatusOK},
	{"GET", "/api/v1/system/quota?kind=ephemeral&tenant=" + tenantB, "", http.StatusOK},
	{"POST", "/api/v1/system/quota", `{"tenant":"` + tenantB + `","kind":"ephemeral","granted":false}`, http.StatusOK},
	{"POST", "/api/v1/stats/refresh", "", http.StatusOK},
	{"GET", "/api/v1/system/maintenance", "", http.StatusOK},
	{"POST", "/api/v1/system/maintenance", `{"enabled":"yes"}`, http.StatusBadRequest}, // not a boolean: nothing changes
	{"GET", "/api/v1/system/maintenance/pop", "", http.StatusOK},
	{"POST", "/api/v1/system/maintenance/pop", `{}`, http.StatusBadRequest},
	{"GET", "/api/v1/system/shared-state", "", http.StatusOK},
	{"GET", "/api/v1/system/partitions/moves", "", http.StatusOK},
	{"POST", "/api/v1/system/partitions/moves", `{}`, http.StatusBadRequest}, // names no queue: nothing moves
}

// refusedJSON fails t unless the answer is a 403 with the error envelope.
func refusedJSON(t *testing.T, what string, code int, body string) {
	t.Helper()
	var e struct{ Error, Code string }
	if code != http.StatusForbidden || json.Unmarshal([]byte(body), &e) != nil || e.Error == "" || e.Code == "" {
		t.Errorf("%s: %d %s, want 403 {\"error\":...,\"code\":...}", what, code, body)
	}
}

// TestOperatorRoutesRefuseTenantAdmins: an admin token that names a
// tenant is that tenant's admin, not the cluster's: every operator route
// (membership, quotas, the ephemeral switch, stats) refuses it, with or
// without the x-queen-tenant header, and changes nothing. A token of the
// admin role naming no tenant is the operator and is served; the tenant's
// admin keeps the admin routes of its own tenant.
func TestOperatorRoutesRefuseTenantAdmins(t *testing.T) {
	n := startJWTNode(t, func(c *Config) { c.TenancyHeader = true })
	tenantAdmin := token(t, jwt.MapClaims{"role": "admin", "tenant": tenantB})
	operator := token(t, jwt.MapClaims{"role": "admin"})
	for _, c := range operatorCalls {
		code, body := call(t, c.method, n.url+c.path, tenantAdmin, c.body)
		refusedJSON(t, c.method+" "+c.path+" as B's admin", code, body)
		code, body = call(t, c.method, n.url+c.path, tenantAdmin, c.body, "x-queen-tenant", tenantB)
		refusedJSON(t, c.method+" "+c.path+" as B's admin with B's header", code, body)
		if code, body := call(t, c.method, n.url+c.path, operator, c.body); code != c.ran {
			t.Errorf("%s %s as the operator: %d %s, want %d", c.method, c.path, code, body, c.ran)
		}
	}

	// The refusals changed nothing: no grant, the switch still on.
	grant := `{"tenant":"` + tenantB + `","kind":"ephemeral"}`
	code, body := call(t, "POST", n.url+"/api/v1/system/quota", tenantAdmin, grant)
	refusedJSON(t, "B's admin grants B", code, body)
	code, body = call(t, "POST", n.url+"/api/v1/system/ephemeral", tenantAdmin, `{"enabled":false}`)
	refusedJSON(t, "B's admin switches ephemeral off", code, body)
	if code, body := call(t, "GET", n.url+"/api/v1/system/quota?kind=ephemeral&tenant="+tenantB, operator, ""); code != 200 ||
		!strings.Contains(body, `"granted":false`) {
		t.Errorf("after a refused grant: %d %s", code, body)
	}
	if code, body := call(t, "GET", n.url+"/api/v1/system/ephemeral", operator, ""); code != 200 || !strings.Contains(body, `"enabled":true`) {
		t.Errorf("after a refused switch: %d %s", code, body)
	}

	// A read-write token without a tenant is no operator either.
	rw := token(t, jwt.MapClaims{"role": "read-write"})
	if code, body := call(t, "GET", n.url+"/api/v1/system/raft/membership", rw, ""); code != http.StatusForbidden {
		t.Errorf("read-write token on membership: %d %s", code, body)
	}

	// The tenant's admin routes still serve the tenant's admin.
	for _, c := range []routeCall{
		{"POST", "/api/v1/push", `{"items":[{"queue":"mine","payload":1}]}`, http.StatusCreated},
		{"DELETE", "/api/v1/resources/queues/mine", "", http.StatusOK},
		{"GET", "/api/v1/system/placement", "", http.StatusOK},
	} {
		if code, body := call(t, c.method, n.url+c.path, tenantAdmin, c.body, "x-queen-tenant", tenantB); code != c.ran {
			t.Errorf("%s %s as B's admin: %d %s, want %d", c.method, c.path, code, body, c.ran)
		}
	}
}

// TestOperatorRoutesRefuseTenantScopedRequests: whatever the credential,
// a request scoped to a tenant — by the x-queen-tenant header, or handed
// in by the embedded proxy for a tenant — is not an operator's. With JWT
// off the routes are open otherwise, as before.
func TestOperatorRoutesRefuseTenantScopedRequests(t *testing.T) {
	n := startNodeConfig(t, nil, func(c *Config) { c.TenancyHeader = true })
	b, _ := wire.ParseID(tenantB)
	for _, c := range operatorCalls {
		if code, body := call(t, c.method, n.url+c.path, "", c.body); code != c.ran {
			t.Errorf("%s %s, JWT off: %d %s, want %d", c.method, c.path, code, body, c.ran)
		}
		code, body := call(t, c.method, n.url+c.path, "", c.body, "x-queen-tenant", tenantB)
		refusedJSON(t, c.method+" "+c.path+" with a tenant header", code, body)
		code, body = inProcess(n.srv, c.method, c.path, &b, c.body)
		refusedJSON(t, c.method+" "+c.path+" through the proxy for B", code, body)
	}
}

// TestOperatorTokenWithATenantHeaderIsRefused: the operator's own token
// does not make a tenant-scoped request an operator's.
func TestOperatorTokenWithATenantHeaderIsRefused(t *testing.T) {
	n := startJWTNode(t, func(c *Config) { c.TenancyHeader = true })
	operator := token(t, jwt.MapClaims{"role": "admin"})
	for _, c := range operatorCalls {
		code, body := call(t, c.method, n.url+c.path, operator, c.body, "x-queen-tenant", tenantB)
		refusedJSON(t, c.method+" "+c.path+" as the operator with a tenant header", code, body)
	}
}

// TestEveryOperatorRouteIsAdminAndTested: the operator routes are the
// /api/v1/system/ routes but placement and acls (a tenant's own), and
// /api/v1/stats/refresh; each is
// at the admin level and in operatorCalls, so the tests above reach it.
func TestEveryOperatorRouteIsAdminAndTested(t *testing.T) {
	matches := func(pattern, path string) bool {
		path, _, _ = strings.Cut(path, "?")
		ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
		if len(ps) != len(xs) {
			return false
		}
		for i := range ps {
			if ps[i] != xs[i] && !strings.HasPrefix(ps[i], "{") {
				return false
			}
		}
		return true
	}
	operators := 0
	for _, rt := range (&Server{}).routes() {
		wantOperator := strings.HasPrefix(rt.path, "/api/v1/system/") && rt.path != "/api/v1/system/placement" && rt.path != aclsPath ||
			rt.path == "/api/v1/stats/refresh"
		if operatorRoute(rt.path) != wantOperator {
			t.Errorf("%s %s: operator route %v, want %v", rt.method, rt.path, operatorRoute(rt.path), wantOperator)
		}
		if !operatorRoute(rt.path) {
			continue
		}
		operators++
		if rt.level != authn.LevelAdmin {
			t.Errorf("%s %s: an operator route at level %v", rt.method, rt.path, rt.level)
		}
		tested := false
		for _, c := range operatorCalls {
			tested = tested || c.method == rt.method && matches(rt.path, c.path)
		}
		if !tested {
			t.Errorf("%s %s: an operator route no test calls", rt.method, rt.path)
		}
	}
	if operators != len(operatorCalls) {
		t.Errorf("%d operator routes, %d tested calls", operators, len(operatorCalls))
	}
}
