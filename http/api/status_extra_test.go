package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// The routes that show the whole cluster (the maintenance hold's count,
// the storage engine's figures) refuse a tenant, as the proxy classes them
// operator; the operator, and a reader naming no tenant, are served.
func TestClusterWideStatusRefusesTenants(t *testing.T) {
	n := startJWTNode(t, func(c *Config) { c.TenancyHeader = true })
	tenantReader := token(t, jwt.MapClaims{"role": "read-only", "tenant": tenantB})
	reader := token(t, jwt.MapClaims{"role": "read-only"})
	for _, path := range []string{"/api/v1/status/buffers", "/api/v1/analytics/postgres-stats"} {
		code, body := call(t, "GET", n.url+path, tenantReader, "")
		refusedJSON(t, path+" as B's reader", code, body)
		code, body = call(t, "GET", n.url+path, reader, "", "x-queen-tenant", tenantB)
		refusedJSON(t, path+" with B's header", code, body)
		if code, body := call(t, "GET", n.url+path, reader, ""); code != http.StatusOK {
			t.Errorf("%s unscoped: %d %s", path, code, body)
		}
	}
	// A tenant reads its own queue's messages through the status route.
	if code, body := call(t, "GET", n.url+"/api/v1/status/queues/mine/messages?limit=10000", tenantReader, "", "x-queen-tenant", tenantB); code != http.StatusOK ||
		!strings.Contains(body, `"limit":1000`) {
		t.Errorf("status/queues/mine/messages: %d %s", code, body)
	}
}
