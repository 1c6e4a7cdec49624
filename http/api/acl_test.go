package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/tenancy/acl"
	"github.com/queen-mq/queen/wire"
)

// aclNode is a node with broker JWT and ACLs on (the bindings in memory),
// User:root its super user, and tokens for root (admin) and alice.
type aclNode struct {
	*node
	root string
}

func startACLNode(t *testing.T, edit func(*Config)) *aclNode {
	t.Helper()
	a := acl.New(acl.Config{Enabled: true, SuperUsers: []string{"User:root"}, Store: acl.NewMemStore()})
	n := startJWTNode(t, func(c *Config) {
		c.ACL = a
		if edit != nil {
			edit(c)
		}
	})
	return &aclNode{node: n, root: token(t, jwt.MapClaims{"role": "admin", "sub": "root"})}
}

// grant creates bindings through the admin route, as root.
func (n *aclNode) grant(t *testing.T, acls ...string) {
	t.Helper()
	body := `{"acls":[` + strings.Join(acls, ",") + `]}`
	if code, resp := call(t, "POST", n.url+aclsPath, n.root, body); code != http.StatusCreated {
		t.Fatalf("create ACLs: %d %s", code, resp)
	}
}

func binding(res, name, pattern, principal, op, perm string) string {
	b, _ := json.Marshal(aclJSON{ResourceType: res, ResourceName: name, PatternType: pattern, Principal: principal,
		Operation: op, Permission: perm})
	return string(b)
}

// aclDenied sends a request and fails t unless it is answered 403
// acl_denied.
func aclDenied(t *testing.T, what, method, url, tok, reqBody string) {
	t.Helper()
	code, body := call(t, method, url, tok, reqBody)
	var e errorBody
	if code != http.StatusForbidden || json.Unmarshal([]byte(body), &e) != nil || e.Code != "acl_denied" || e.Error == "" {
		t.Fatalf("%s: %d %s, want 403 acl_denied", what, code, body)
	}
}

func push(queue string) string { return `{"items":[{"queue":"` + queue + `","payload":{"n":1}}]}` }

// TestACLHTTPMapping is the door's table on the routes that matter most:
// a prefixed ALLOW opens push, pop and ack on orders.*, no ACL on payments
// refuses it (and creates nothing), a DENY on orders.secret beats the
// ALLOW, and a read-only JWT holding a WRITE ACL still cannot push.
func TestACLHTTPMapping(t *testing.T) {
	n := startACLNode(t, nil)
	alice := token(t, jwt.MapClaims{"role": "read-write", "sub": "alice"})
	n.grant(t,
		binding("topic", "orders.", "prefixed", "User:alice", "write", "allow"),
		binding("topic", "orders.", "prefixed", "User:alice", "read", "allow"),
		binding("group", wire.QueueModeGroup, "literal", "User:alice", "read", "allow"),
		binding("topic", "orders.secret", "literal", "User:alice", "all", "deny"),
		binding("topic", "*", "literal", "User:reader", "write", "allow"),
	)

	// Allowed by the prefix: push, pop, ack.
	if code, body := call(t, "POST", n.url+"/api/v1/push", alice, push("orders.x")); code != http.StatusCreated {
		t.Fatalf("push orders.x: %d %s", code, body)
	}
	code, body := call(t, "GET", n.url+"/api/v1/pop/queue/orders.x?batch=1", alice, "")
	var popped popAnswer
	if code != http.StatusOK || json.Unmarshal([]byte(body), &popped) != nil || len(popped.Messages) != 1 {
		t.Fatalf("pop orders.x: %d %s", code, body)
	}
	m := popped.Messages[0]
	ack := `{"transactionId":"` + m.TransactionID + `","partitionId":"` + m.PartitionID + `","leaseId":"` + *m.LeaseID + `","status":"completed"}`
	// Another group, not granted, may not ack it.
	aclDenied(t, "ack for an ungranted group", "POST", n.url+"/api/v1/ack", alice,
		strings.Replace(ack, `{`, `{"consumerGroup":"other",`, 1))
	if code, body := call(t, "POST", n.url+"/api/v1/ack", alice, ack); code != http.StatusOK || !strings.Contains(body, `"success":true`) {
		t.Fatalf("ack: %d %s", code, body)
	}

	// Denied by prefix: nothing on payments; the push creates no queue.
	aclDenied(t, "push payments.x", "POST", n.url+"/api/v1/push", alice, push("payments.x"))
	aclDenied(t, "pop payments.x", "GET", n.url+"/api/v1/pop/queue/payments.x", alice, "")
	if code, body := call(t, "GET", n.url+"/api/v1/resources/queues/payments.x", n.root, ""); code != http.StatusNotFound {
		t.Fatalf("a refused push created payments.x: %d %s", code, body)
	}
	// One refused queue refuses the whole push.
	aclDenied(t, "push orders.y and payments.x", "POST", n.url+"/api/v1/push", alice,
		`{"items":[{"queue":"orders.y","payload":1},{"queue":"payments.x","payload":1}]}`)
	if code, _ := call(t, "GET", n.url+"/api/v1/resources/queues/orders.y", n.root, ""); code != http.StatusNotFound {
		t.Fatalf("half a refused push was written: orders.y %d", code)
	}

	// DENY beats the prefixed ALLOW.
	aclDenied(t, "push orders.secret", "POST", n.url+"/api/v1/push", alice, push("orders.secret"))

	// Ceiling: the JWT level runs first; a WRITE ACL never lifts read-only.
	reader := token(t, jwt.MapClaims{"role": "read-only", "sub": "reader"})
	code, body = call(t, "POST", n.url+"/api/v1/push", reader, push("orders.x"))
	if code != http.StatusForbidden || !strings.Contains(body, `"code":"forbidden"`) {
		t.Fatalf("read-only with a WRITE ACL pushed: %d %s", code, body)
	}
}

// TestACLListingsShowOnlyWhatMayBeDescribed: the queue and consumer-group
// listings leave out what the principal may not DESCRIBE (READ implies
// DESCRIBE), and a queue's own view of one it may not is refused.
func TestACLListingsShowOnlyWhatMayBeDescribed(t *testing.T) {
	n := startACLNode(t, nil)
	for _, q := range []string{"orders.a", "payments.b"} {
		if code, body := call(t, "POST", n.url+"/api/v1/push", n.root, push(q)); code != http.StatusCreated {
			t.Fatalf("push %s: %d %s", q, code, body)
		}
	}
	alice := token(t, jwt.MapClaims{"role": "read-only", "sub": "alice"})
	n.grant(t, binding("topic", "orders.", "prefixed", "User:alice", "read", "allow"))
	code, body := call(t, "GET", n.url+"/api/v1/resources/queues", alice, "")
	if code != http.StatusOK || !strings.Contains(body, "orders.a") || strings.Contains(body, "payments.b") {
		t.Fatalf("alice's queue list: %d %s", code, body)
	}
	code, body = call(t, "GET", n.url+"/api/v1/resources/queues", n.root, "")
	if code != http.StatusOK || !strings.Contains(body, "payments.b") {
		t.Fatalf("root's queue list: %d %s", code, body)
	}
	aclDenied(t, "describe payments.b", "GET", n.url+"/api/v1/resources/queues/payments.b", alice, "")
	if code, body := call(t, "GET", n.url+"/api/v1/resources/queues/orders.a", alice, ""); code != http.StatusOK {
		t.Fatalf("describe orders.a: %d %s", code, body)
	}
	// Aggregates over every queue are the cluster's.
	aclDenied(t, "overview", "GET", n.url+"/api/v1/resources/overview", alice, "")
}

// TestACLAdminRoutes: create (validated as Kafka does), list by filter,
// delete by filter (a bare DELETE is refused), admin level only, and a
// 400 security_disabled on a node with ACLs off.
func TestACLAdminRoutes(t *testing.T) {
	n := startACLNode(t, nil)
	n.grant(t,
		binding("topic", "orders.", "prefixed", "User:alice", "write", "allow"),
		binding("group", "g1", "literal", "User:alice", "read", "allow"),
		binding("topic", "payments", "", "User:bob", "read", "deny"),
	)
	list := func(query string) []aclJSON {
		t.Helper()
		code, body := call(t, "GET", n.url+aclsPath+query, n.root, "")
		var out struct{ ACLs []aclJSON }
		if code != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil {
			t.Fatalf("list %s: %d %s", query, code, body)
		}
		return out.ACLs
	}
	if got := list(""); len(got) != 3 {
		t.Fatalf("all: %+v", got)
	}
	got := list("?principal=" + url.QueryEscape("User:bob"))
	if len(got) != 1 || got[0] != (aclJSON{"TOPIC", "payments", "LITERAL", "User:bob", "*", "READ", "DENY"}) {
		t.Fatalf("bob's: %+v", got)
	}
	if got := list("?resourceType=topic&resourceName=orders.x&patternType=match"); len(got) != 1 || got[0].ResourceName != "orders." {
		t.Fatalf("matching orders.x: %+v", got)
	}
	for _, bad := range []string{
		binding("topic", "", "literal", "User:a", "read", "allow"),         // no name
		binding("topic", "x", "match", "User:a", "read", "allow"),          // a filter's pattern
		binding("cluster", "other", "literal", "User:a", "alter", "allow"), // the cluster is kafka-cluster
		binding("topic", "x", "literal", "alice", "read", "allow"),         // not Type:name
		binding("topic", "x", "literal", "User:a", "fly", "allow"),         // no such operation
	} {
		if code, body := call(t, "POST", n.url+aclsPath, n.root, `{"acls":[`+bad+`]}`); code != http.StatusBadRequest {
			t.Errorf("create %s: %d %s, want 400", bad, code, body)
		}
	}
	if code, body := call(t, "DELETE", n.url+aclsPath, n.root, ""); code != http.StatusBadRequest {
		t.Fatalf("bare DELETE: %d %s", code, body)
	}
	code, body := call(t, "DELETE", n.url+aclsPath+"?principal="+url.QueryEscape("User:alice"), n.root, "")
	if code != http.StatusOK || strings.Count(body, "User:alice") != 2 {
		t.Fatalf("delete alice's: %d %s", code, body)
	}
	if got := list(""); len(got) != 1 {
		t.Fatalf("after delete: %+v", got)
	}
	// Admin level: a read-write token is refused by the level; an admin
	// that is no super user and holds no ALTER on the cluster by ACL.
	rw := token(t, jwt.MapClaims{"role": "read-write", "sub": "root"})
	if code, _ := call(t, "GET", n.url+aclsPath, rw, ""); code != http.StatusForbidden {
		t.Fatalf("read-write listing ACLs: %d", code)
	}
	otherAdmin := token(t, jwt.MapClaims{"role": "admin", "sub": "carol"})
	aclDenied(t, "carol creating ACLs", "POST", n.url+aclsPath, otherAdmin,
		`{"acls":[`+binding("topic", "*", "literal", "User:carol", "all", "allow")+`]}`)

	off := startJWTNode(t, nil)
	admin := token(t, jwt.MapClaims{"role": "admin"})
	for _, m := range []string{"GET", "POST", "DELETE"} {
		code, body := call(t, m, off.url+aclsPath+"?all=true", admin, `{"acls":[`+binding("topic", "x", "", "User:a", "read", "allow")+`]}`)
		if code != http.StatusBadRequest || !strings.Contains(body, `"code":"security_disabled"`) {
			t.Fatalf("%s with ACLs off: %d %s", m, code, body)
		}
	}
}

// TestACLTableCoversEveryRoute: every route has a line in the operation
// table (a route without one would be refused to everyone but super
// users), and the table names no route that does not exist.
func TestACLTableCoversEveryRoute(t *testing.T) {
	levels := map[string]authn.Level{}
	for _, rt := range (&Server{}).routes() {
		key := rt.method + " " + rt.path
		levels[key] = rt.level
		r, ok := aclRules[key]
		if !ok {
			t.Errorf("%s has no ACL rule", key)
			continue
		}
		if r.public != (rt.level == authn.LevelPublic) && key != "POST /api/v1/lease/{leaseId}/extend" {
			t.Errorf("%s: public in the ACL table %v, level %v", key, r.public, rt.level)
		}
	}
	for key := range aclRules {
		if _, ok := levels[key]; !ok {
			t.Errorf("the ACL table names %s, which is no route", key)
		}
	}
}

// TestACLOffChangesNothing: with ACLs off (a nil or disabled authorizer)
// the server holds none, and anonymous pushes go through as before.
func TestACLOffChangesNothing(t *testing.T) {
	n := startNodeConfig(t, nil, func(c *Config) { c.ACL = acl.New(acl.Config{Enabled: false}) })
	if n.srv.acl != nil {
		t.Fatal("a disabled authorizer is kept")
	}
	if code, body := call(t, "POST", n.url+"/api/v1/push", "", push("orders.x")); code != http.StatusCreated {
		t.Fatalf("push: %d %s", code, body)
	}
}
