package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/tenancy/acl"
	"github.com/queen-mq/queen/wire"
)

// TestACLConfigureCreatesOrAlters: configuring a queue that does not exist
// is CREATE, one that does ALTER_CONFIGS; delete is DELETE.
func TestACLConfigureCreatesOrAlters(t *testing.T) {
	n := startACLNode(t, nil)
	alice := token(t, jwt.MapClaims{"role": "admin", "sub": "alice"})
	n.grant(t, binding("topic", "new.", "prefixed", "User:alice", "create", "allow"))
	cfg := `{"queue":"new.q","options":{"leaseTime":30}}`
	if code, body := call(t, "POST", n.url+"/api/v1/configure", alice, cfg); code != http.StatusOK {
		t.Fatalf("create new.q: %d %s", code, body)
	}
	aclDenied(t, "alter new.q without ALTER_CONFIGS", "POST", n.url+"/api/v1/configure", alice, cfg)
	aclDenied(t, "delete new.q without DELETE", "DELETE", n.url+"/api/v1/resources/queues/new.q", alice, "")
	n.grant(t, binding("topic", "new.q", "literal", "User:alice", "alter_configs", "allow"),
		binding("topic", "new.q", "literal", "User:alice", "delete", "allow"))
	if code, body := call(t, "POST", n.url+"/api/v1/configure", alice, cfg); code != http.StatusOK {
		t.Fatalf("alter new.q: %d %s", code, body)
	}
	if code, body := call(t, "DELETE", n.url+"/api/v1/resources/queues/new.q", alice, ""); code >= 300 {
		t.Fatalf("delete new.q: %d %s", code, body)
	}
}

// TestACLTransactionChecksEachOperation: a transaction's push to a queue
// the principal may not write is refused whole (403, not a rollback
// answer), and nothing of it commits.
func TestACLTransactionChecksEachOperation(t *testing.T) {
	n := startACLNode(t, nil)
	alice := token(t, jwt.MapClaims{"role": "read-write", "sub": "alice"})
	n.grant(t, binding("topic", "orders.", "prefixed", "User:alice", "write", "allow"))
	txn := func(queues ...string) string {
		var ops []string
		for _, q := range queues {
			ops = append(ops, `{"type":"push","items":[{"queue":"`+q+`","payload":1}]}`)
		}
		return `{"operations":[` + strings.Join(ops, ",") + `]}`
	}
	if code, body := call(t, "POST", n.url+"/api/v1/transaction", alice, txn("orders.a")); code != http.StatusOK || !strings.Contains(body, `"success":true`) {
		t.Fatalf("txn to orders.a: %d %s", code, body)
	}
	aclDenied(t, "txn to orders.b and payments", "POST", n.url+"/api/v1/transaction", alice, txn("orders.b", "payments"))
	if code, _ := call(t, "GET", n.url+"/api/v1/resources/queues/orders.b", n.root, ""); code != http.StatusNotFound {
		t.Fatalf("a refused transaction wrote orders.b: %d", code)
	}
}

// TestACLGroupListingFiltered: the consumer-group listing leaves out the
// groups the principal may not DESCRIBE, on queues it may.
func TestACLGroupListingFiltered(t *testing.T) {
	n := startACLNode(t, nil)
	if code, body := call(t, "POST", n.url+"/api/v1/push", n.root, push("orders.a")); code != http.StatusCreated {
		t.Fatalf("push: %d %s", code, body)
	}
	for _, g := range []string{"mine", "theirs"} {
		if code, body := call(t, "GET", n.url+"/api/v1/pop/queue/orders.a?consumerGroup="+g, n.root, ""); code >= 300 {
			t.Fatalf("pop as %s: %d %s", g, code, body)
		}
	}
	alice := token(t, jwt.MapClaims{"role": "read-only", "sub": "alice"})
	n.grant(t, binding("topic", "orders.", "prefixed", "User:alice", "describe", "allow"),
		binding("group", "mine", "literal", "User:alice", "describe", "allow"))
	code, body := call(t, "GET", n.url+"/api/v1/consumer-groups", alice, "")
	if code != http.StatusOK || !strings.Contains(body, `"mine"`) || strings.Contains(body, `"theirs"`) {
		t.Fatalf("alice's groups: %d %s", code, body)
	}
	if code, body := call(t, "GET", n.url+"/api/v1/consumer-groups", n.root, ""); !strings.Contains(body, `"theirs"`) {
		t.Fatalf("root's groups: %d %s", code, body)
	}
	aclDenied(t, "describe theirs", "GET", n.url+"/api/v1/consumer-groups/theirs", alice, "")
}

// TestACLProxiedAPIKeyPrincipal: a request the embedded proxy hands in
// acts as the principal it names (an API key's), in the proxy's tenant;
// one naming none is User:ANONYMOUS.
func TestACLProxiedAPIKeyPrincipal(t *testing.T) {
	a := acl.New(acl.Config{Enabled: true, Store: acl.NewMemStore()})
	n := startNodeConfig(t, nil, func(c *Config) { c.ACL = a })
	tenant, _ := wire.ParseID(tenantA)
	key := acl.PrincipalForAPIKey("c1", "k1")
	if err := a.Create(context.Background(), tenant.String(), []acl.Binding{{Resource: acl.ResourceTopic, Name: "*",
		Pattern: acl.PatternLiteral, Principal: key, Host: "*", Op: acl.OpWrite, Perm: acl.PermAllow}}); err != nil {
		t.Fatal(err)
	}
	send := func(principal string) int {
		var req fasthttp.Request
		req.Header.SetMethod("POST")
		req.SetRequestURI("/api/v1/push")
		req.Header.SetContentType("application/json")
		req.SetBodyString(push("q"))
		var rc fasthttp.RequestCtx
		rc.Init(&req, nil, nil)
		Proxied(&rc, tenant)
		if principal != "" {
			ProxiedPrincipal(&rc, principal)
		}
		n.srv.Handler()(&rc)
		return rc.Response.StatusCode()
	}
	if code := send(key); code != http.StatusCreated {
		t.Fatalf("the key's push: %d", code)
	}
	if code := send(""); code != http.StatusForbidden {
		t.Fatalf("an anonymous proxied push: %d", code)
	}
	if code := send(acl.PrincipalForAPIKey("c1", "k2")); code != http.StatusForbidden {
		t.Fatalf("another key's push: %d", code)
	}
}

// BenchmarkACLPushCheck is the HTTP door's ACL cost for one push item:
// off (the nil check), and on with 1,000 prefixed bindings of other
// principals plus the one that allows.
func BenchmarkACLPushCheck(b *testing.B) {
	items := []pushItem{{Queue: "orders.eu.1"}}
	var req fasthttp.Request
	var rc fasthttp.RequestCtx
	rc.Init(&req, nil, nil)
	rc.SetUserValue(principalKey, authn.Principal{Subject: "alice"})
	b.Run("off", func(b *testing.B) {
		s := &Server{}
		for b.Loop() {
			if err := s.aclPush(&rc, wire.DefaultTenant, items); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("on-1000-prefixed", func(b *testing.B) {
		a := acl.New(acl.Config{Enabled: true, Store: acl.NewMemStore()})
		bs := []acl.Binding{{Resource: acl.ResourceTopic, Name: "orders.", Pattern: acl.PatternPrefixed,
			Principal: "User:alice", Host: "*", Op: acl.OpWrite, Perm: acl.PermAllow}}
		for i := range 999 {
			bs = append(bs, acl.Binding{Resource: acl.ResourceTopic, Name: fmt.Sprintf("t%d.", i), Pattern: acl.PatternPrefixed,
				Principal: fmt.Sprintf("User:u%d", i), Host: "*", Op: acl.OpWrite, Perm: acl.PermAllow})
		}
		if err := a.Create(context.Background(), wire.DefaultTenant.String(), bs); err != nil {
			b.Fatal(err)
		}
		s := &Server{acl: a}
		for b.Loop() {
			if err := s.aclPush(&rc, wire.DefaultTenant, items); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestACLAdminIsTenantScoped: in tenancy header mode the admin routes act
// on the request's tenant: a tenant's admin (here the super user's token
// naming the tenant) manages its own bindings, another tenant sees none of
// them, and they grant nothing there.
func TestACLAdminIsTenantScoped(t *testing.T) {
	n := startACLNode(t, func(c *Config) { c.TenancyHeader = true })
	rootOf := func(tenant string) string {
		return token(t, jwt.MapClaims{"role": "admin", "sub": "root", "tenant": tenant})
	}
	body := `{"acls":[` + binding("topic", "*", "literal", "User:alice", "write", "allow") + `]}`
	if code, resp := call(t, "POST", n.url+aclsPath, rootOf(tenantA), body, "x-queen-tenant", tenantA); code != http.StatusCreated {
		t.Fatalf("create in A: %d %s", code, resp)
	}
	if _, resp := call(t, "GET", n.url+aclsPath, rootOf(tenantB), "", "x-queen-tenant", tenantB); strings.Contains(resp, "User:alice") {
		t.Fatalf("B sees A's bindings: %s", resp)
	}
	if _, resp := call(t, "GET", n.url+aclsPath, rootOf(tenantA), "", "x-queen-tenant", tenantA); !strings.Contains(resp, "User:alice") {
		t.Fatalf("A does not see its bindings: %s", resp)
	}
	aliceOf := func(tenant string) string {
		return token(t, jwt.MapClaims{"role": "read-write", "sub": "alice", "tenant": tenant})
	}
	if code, resp := call(t, "POST", n.url+"/api/v1/push", aliceOf(tenantA), push("q"), "x-queen-tenant", tenantA); code != http.StatusCreated {
		t.Fatalf("alice pushing in A: %d %s", code, resp)
	}
	code, resp := call(t, "POST", n.url+"/api/v1/push", aliceOf(tenantB), push("q"), "x-queen-tenant", tenantB)
	if code != http.StatusForbidden || !strings.Contains(resp, "acl_denied") {
		t.Fatalf("alice pushing in B: %d %s", code, resp)
	}
}
