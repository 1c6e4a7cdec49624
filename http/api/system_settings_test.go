package api

import (
	"strings"
	"testing"
)

const (
	grantTenantA = "11111111-1111-4111-8111-111111111111"
	grantTenantB = "22222222-2222-4222-8222-222222222222"
)

// With QUEEN_EPHEMERAL_REQUIRE_GRANT a tenant uses ephemeral queues only
// once an operator granted it, through a route no tenant-scoped request
// reaches; a revoked grant refuses again. Refusals change nothing.
func TestEphemeralGrantRequired(t *testing.T) {
	n := startNodeConfig(t, nil, func(c *Config) {
		c.TenancyHeader = true
		c.Ephemeral.RequireGrant = true
	})
	push := func(tenant string) (int, string) {
		return call(t, "POST", n.url+"/api/v1/ephemeral/push", "", `{"queue":"g","messages":[{"payload":1}]}`, "x-queen-tenant", tenant)
	}
	if code, body := push(grantTenantA); code != 403 || !strings.Contains(body, `"ephemeral_not_granted"`) {
		t.Fatalf("push without a grant: %d %s", code, body)
	}
	if st := n.srv.eph.store.Stats(); st.Messages != 0 {
		t.Fatalf("a refused push stored %d messages", st.Messages)
	}
	grant := `{"tenant":"` + grantTenantA + `","kind":"ephemeral"}`
	if code, body := call(t, "POST", n.url+"/api/v1/system/quota", "", grant, "x-queen-tenant", grantTenantA); code != 403 {
		t.Fatalf("a tenant granted itself: %d %s", code, body)
	}
	for _, bad := range []string{`{"tenant":"` + grantTenantA + `","kind":"kv"}`, `{"tenant":"nope","kind":"ephemeral"}`,
		`{"kind":"ephemeral"}`, `{"tenant":"00000000-0000-0000-0000-000000000000","kind":"ephemeral"}`} {
		if code, body := call(t, "POST", n.url+"/api/v1/system/quota", "", bad); code != 400 || !strings.Contains(body, `"bad_request"`) {
			t.Fatalf("quota %s: %d %s", bad, code, body)
		}
	}
	if code, body := call(t, "POST", n.url+"/api/v1/system/quota", "", grant); code != 200 || !strings.Contains(body, `"granted":true`) {
		t.Fatalf("grant: %d %s", code, body)
	}
	if code, body := push(grantTenantA); code != 201 {
		t.Fatalf("push once granted: %d %s", code, body)
	}
	if code, body := push(grantTenantB); code != 403 {
		t.Fatalf("another tenant pushed on A's grant: %d %s", code, body)
	}
	if code, body := call(t, "GET", n.url+"/api/v1/system/quota?kind=ephemeral&tenant="+grantTenantA, "", ""); code != 200 ||
		!strings.Contains(body, `"granted":true`) {
		t.Fatalf("read the grant: %d %s", code, body)
	}
	revoke := `{"tenant":"` + grantTenantA + `","kind":"ephemeral","granted":false}`
	if code, body := call(t, "POST", n.url+"/api/v1/system/quota", "", revoke); code != 200 || !strings.Contains(body, `"granted":false`) {
		t.Fatalf("revoke: %d %s", code, body)
	}
	if code, body := call(t, "GET", n.url+"/api/v1/ephemeral/pop?queue=g", "", "", "x-queen-tenant", grantTenantA); code != 403 {
		t.Fatalf("pop after the revoke: %d %s", code, body)
	}
}

// The system switch is kept in raft: an HTTP layer started afresh on the
// same raft state (as after a restart) starts with the switch off.
func TestEphemeralSwitchSurvivesARestart(t *testing.T) {
	n := startNode(t)
	if code, body := call(t, "POST", n.url+"/api/v1/system/ephemeral", "", `{"enabled":false}`); code != 200 {
		t.Fatalf("switch off: %d %s", code, body)
	}
	url := serveEngine(t, n.engine, nil).url
	if code, body := call(t, "POST", url+"/api/v1/ephemeral/push", "", `{"queue":"s","messages":[{"payload":1}]}`); code != 503 ||
		!strings.Contains(body, `"ephemeral_disabled"`) {
		t.Fatalf("push after a restart with the switch off: %d %s", code, body)
	}
	if code, body := call(t, "POST", url+"/api/v1/system/ephemeral", "", `{"enabled":true}`); code != 200 {
		t.Fatalf("switch on: %d %s", code, body)
	}
	if code, body := call(t, "POST", url+"/api/v1/ephemeral/push", "", `{"queue":"s","messages":[{"payload":1}]}`); code != 201 {
		t.Fatalf("push with the switch on: %d %s", code, body)
	}
}
