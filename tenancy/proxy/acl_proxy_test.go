package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/tenancy/acl"
)

// TestACLRoutesNeedWhatTheKafkaDoorNeeds: for every set of scopes a key
// may hold, the ACL routes let it through exactly when its Kafka login
// passes the level of the matching ACL key (kafka/broker/access.go:
// DescribeAcls needs describe, a read-only or a write-only level;
// Create/DeleteAcls admin), so the two doors never disagree.
func TestACLRoutesNeedWhatTheKafkaDoorNeeds(t *testing.T) {
	for mask := 1; mask < 1<<len(AllScopes); mask++ {
		var scopes []string
		for i, s := range AllScopes {
			if mask&(1<<i) != 0 {
				scopes = append(scopes, s)
			}
		}
		kafka := scopeLimits(scopes)
		describe := kafka.Allows(authn.LevelReadOnly) || kafka.Allows(authn.LevelWriteOnly)
		alter := kafka.Allows(authn.LevelAdmin)
		for _, c := range []struct {
			method string
			kafka  bool
		}{{"GET", describe}, {"POST", alter}, {"DELETE", alter}} {
			if got := Classify(c.method, "/api/v1/system/acls").allowedFor(scopes); got != c.kafka {
				t.Errorf("%v: HTTP %s acls %v, the Kafka door %v", scopes, c.method, got, c.kafka)
			}
		}
	}
}

// aclProxy is a proxy over a real broker with ACLs on (bindings in
// memory), two clusters (alpha, beta) with an admin key each, both super
// users, and alpha's producer key (produce scope only), which is no one
// special.
type aclProxy struct {
	p      *Proxy
	keys   map[string]string // alpha, beta, producer
	ids    map[string]string // the keys' ids
	alpha  *Cluster
	calls  *int
	authzr *acl.Authorizer
}

func newACLProxy(t *testing.T, superUsers func(ids map[string]string, alpha, beta *Cluster) []string) *aclProxy {
	t.Helper()
	p, _ := testProxy(t, Config{})
	ctx := context.Background()
	ap := &aclProxy{p: p, keys: map[string]string{}, ids: map[string]string{}, calls: new(int)}
	clusters := map[string]*Cluster{}
	for _, slug := range []string{"alpha", "beta"} {
		tn, _, _ := p.store.ensureTenant(ctx, slug, "")
		c, _, err := p.store.ensureCluster(ctx, tn, slug, "dev", nil)
		if err != nil {
			t.Fatal(err)
		}
		clusters[slug] = c
	}
	ap.alpha = clusters["alpha"]
	for name, k := range map[string]struct {
		cluster string
		scopes  []string
	}{"alpha": {"alpha", AllScopes}, "beta": {"beta", AllScopes}, "producer": {"alpha", []string{ScopeProduce}}} {
		key, _ := NewKey("test")
		stored, _, err := p.store.ensureKey(ctx, clusters[k.cluster].ID, name, HashKey(key), k.scopes)
		if err != nil {
			t.Fatal(err)
		}
		ap.keys[name], ap.ids[name] = key, stored.ID
	}
	ap.authzr = acl.New(acl.Config{Enabled: true, Store: acl.NewMemStore(),
		SuperUsers: superUsers(ap.ids, clusters["alpha"], clusters["beta"])})
	broker := api.New(api.Config{ACL: ap.authzr}, p.engine, raftgroupstest.Quiet).Handler()
	p.broker = func(ctx *fasthttp.RequestCtx) { *ap.calls++; broker(ctx) }
	return ap
}

func (a *aclProxy) call(method, path, key, body string) (int, string) {
	host := "alpha.example.com"
	if key == a.keys["beta"] {
		host = "beta.example.com"
	}
	code, _, out := webCall(a.p, method, path, body, map[string]string{"Authorization": "Bearer " + key, "Host": host})
	return code, out
}

func aclsOf(t *testing.T, body string) []map[string]string {
	t.Helper()
	var out struct {
		ACLs []map[string]string `json:"acls"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return out.ACLs
}

func errorCode(body string) string {
	var e struct{ Code, Error string }
	if json.Unmarshal([]byte(body), &e) != nil || e.Error == "" {
		return ""
	}
	return e.Code
}

// TestACLAdminThroughTheProxy: behind the proxy an admin key manages its
// own cluster's ACLs over HTTP, as its Kafka login does with
// Create/Describe/DeleteAcls; what it creates is enforced on another key
// of the cluster (User:apikey:<cluster>:<key>); a key without admin is
// refused 403 by the proxy and never reaches the broker; another
// cluster's key neither sees nor deletes the binding.
func TestACLAdminThroughTheProxy(t *testing.T) {
	a := newACLProxy(t, func(ids map[string]string, alpha, beta *Cluster) []string {
		return []string{acl.PrincipalForAPIKey(alpha.ID, ids["alpha"]), acl.PrincipalForAPIKey(beta.ID, ids["beta"])}
	})
	const path = "/api/v1/system/acls"
	producer := acl.PrincipalForAPIKey(a.alpha.ID, a.ids["producer"])
	grant := fmt.Sprintf(`{"acls":[{"resourceType":"TOPIC","resourceName":"orders","principal":%q,"operation":"WRITE","permission":"ALLOW"}]}`, producer)

	if code, out := a.call("POST", path, a.keys["alpha"], grant); code != http.StatusCreated {
		t.Fatalf("the admin key creates a binding: %d %s", code, out)
	}
	code, out := a.call("GET", path, a.keys["alpha"], "")
	if got := aclsOf(t, out); code != http.StatusOK || len(got) != 1 || got[0]["principal"] != producer || got[0]["resourceName"] != "orders" {
		t.Fatalf("the admin key lists: %d %s", code, out)
	}

	// Enforced on the producer's pushes.
	if code, out := a.call("POST", "/api/v1/push", a.keys["producer"], `{"items":[{"queue":"orders","payload":1}]}`); code != http.StatusCreated {
		t.Fatalf("a push the binding allows: %d %s", code, out)
	}
	if code, out := a.call("POST", "/api/v1/push", a.keys["producer"], `{"items":[{"queue":"payments","payload":1}]}`); code != http.StatusForbidden ||
		errorCode(out) != "acl_denied" || !strings.Contains(out, producer) {
		t.Fatalf("a push no binding allows: %d %s", code, out)
	}

	// Without admin: the proxy's 403, the broker never asked.
	before := *a.calls
	for _, m := range []struct{ method, path, body string }{{"POST", path, grant}, {"DELETE", path + "?all=true", ""}} {
		code, out := a.call(m.method, m.path, a.keys["producer"], m.body)
		if code != http.StatusForbidden || out != `{"code":"forbidden","error":"operation not permitted for this credential"}` {
			t.Fatalf("%s acls with a produce key: %d %s", m.method, code, out)
		}
	}
	if *a.calls != before {
		t.Fatal("a refused ACL change reached the broker")
	}
	// Describing needs no admin scope (as DescribeAcls on Kafka), but the
	// ACL DESCRIBE on the cluster, which the producer has not been given.
	if code, out := a.call("GET", path, a.keys["producer"], ""); code != http.StatusForbidden || errorCode(out) != "acl_denied" {
		t.Fatalf("listing with a produce key and no DESCRIBE: %d %s", code, out)
	}
	describe := fmt.Sprintf(`{"acls":[{"resourceType":"CLUSTER","resourceName":"kafka-cluster","principal":%q,"operation":"DESCRIBE","permission":"ALLOW"}]}`, producer)
	if code, out := a.call("POST", path, a.keys["alpha"], describe); code != http.StatusCreated {
		t.Fatalf("granting DESCRIBE: %d %s", code, out)
	}
	if code, out := a.call("GET", path+"?resourceType=TOPIC", a.keys["producer"], ""); code != http.StatusOK || len(aclsOf(t, out)) != 1 {
		t.Fatalf("listing with DESCRIBE: %d %s", code, out)
	}

	// Another cluster's key: its own tenant's bindings only.
	if code, out := a.call("GET", path, a.keys["beta"], ""); code != http.StatusOK || len(aclsOf(t, out)) != 0 {
		t.Fatalf("beta lists: %d %s", code, out)
	}
	if code, out := a.call("DELETE", path+"?all=true", a.keys["beta"], ""); code != http.StatusOK || strings.Contains(out, "orders") {
		t.Fatalf("beta deletes everything it has: %d %s", code, out)
	}
	if code, out := a.call("GET", path, a.keys["alpha"], ""); code != http.StatusOK || len(aclsOf(t, out)) != 2 {
		t.Fatalf("alpha's bindings after beta's delete: %d %s", code, out)
	}
	// Alpha's admin deletes its binding, and the push is refused again.
	if code, out := a.call("DELETE", path+"?resourceType=TOPIC&resourceName=orders", a.keys["alpha"], ""); code != http.StatusOK ||
		!strings.Contains(out, `"resourceName":"orders"`) {
		t.Fatalf("the admin key deletes: %d %s", code, out)
	}
	if code, out := a.call("POST", "/api/v1/push", a.keys["producer"], `{"items":[{"queue":"orders","payload":1}]}`); code != http.StatusForbidden {
		t.Fatalf("a push after the binding was deleted: %d %s", code, out)
	}
}

// TestACLRoutesAreRateLimitedAndMetered: the ACL routes take from the
// cluster's request bucket (429 past it, enforced) and are metered, as
// the Kafka door charges and meters its ACL keys.
func TestACLRoutesAreRateLimitedAndMetered(t *testing.T) {
	p, keys, clusters := dataProxy(t, Config{Enforce: true})
	c := *clusters["alpha"]
	c.Overrides = Limits{LimitRequestsPerSec: n(1), LimitRequestsBurst: n(1)}
	if _, err := p.store.apply(context.Background(), putOp(clusterKey(c.ID), c, false)); err != nil {
		t.Fatal(err)
	}
	if code, out := dataCall(p, "GET", "/api/v1/system/acls", "alpha.example.com", keys["alpha"]); code != http.StatusOK {
		t.Fatalf("the first listing: %d %s", code, out)
	}
	if code, out := dataCall(p, "POST", "/api/v1/system/acls", "alpha.example.com", keys["alpha"]); code != http.StatusTooManyRequests ||
		errorCode(out) != "rate_limited" {
		t.Fatalf("past the bucket: %d %s", code, out)
	}
	var reqs int64
	p.meter.cells.Range(func(k, v any) bool {
		if ck := k.(cellKey); ck.cluster == c.ID && ck.op == "read" {
			reqs += v.(*meterCell).reqs.Load()
		}
		return true
	})
	if reqs != 1 {
		t.Fatalf("metered %d ACL requests, want 1", reqs)
	}
}

// TestConsoleSessionIsItsOwnPrincipal: a console session acts as
// User:console:<user id> for ACL decisions, never as User:ANONYMOUS: a
// binding for anonymous gives it nothing, one for its principal does,
// and a super user listed by that principal may do everything. The
// console's own queue page asks as the same principal.
func TestConsoleSessionIsItsOwnPrincipal(t *testing.T) {
	p, session := consoleProxy(t, Config{})
	s, err := p.session(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	me := ConsolePrincipal(s.user.ID)
	if me != "User:console:"+s.user.ID || me == acl.Anonymous {
		t.Fatalf("the session's principal: %s", me)
	}
	authz := acl.New(acl.Config{Enabled: true, Store: acl.NewMemStore()})
	p.broker = api.New(api.Config{ACL: authz}, p.engine, raftgroupstest.Quiet).Handler()
	tenant, err := p.tenantOf(p.mustCluster(t, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	grant := func(principal, op string) {
		t.Helper()
		b := acl.Binding{Resource: acl.ResourceTopic, Name: "orders", Pattern: acl.PatternLiteral, Principal: principal,
			Host: acl.WildcardHost, Perm: acl.PermAllow}
		var ok bool
		if b.Op, ok = acl.ParseOperation(op); !ok {
			t.Fatal(op)
		}
		if err := authz.Create(context.Background(), tenant.String(), []acl.Binding{b}); err != nil {
			t.Fatal(err)
		}
	}
	push := func() (int, string) {
		code, _, out := webCall(p, "POST", "/api/v1/push", `{"items":[{"queue":"orders","payload":1}]}`, bearerHeader(session))
		return code, out
	}
	grant(acl.Anonymous, "ALL")
	if code, out := push(); code != http.StatusForbidden || errorCode(out) != "acl_denied" || !strings.Contains(out, me) {
		t.Fatalf("a session with only anonymous granted: %d %s", code, out)
	}
	grant(me, "WRITE")
	if code, out := push(); code != http.StatusCreated {
		t.Fatalf("a session granted WRITE: %d %s", code, out)
	}
	// The console's queue page lists what the session may DESCRIBE
	// (WRITE implies it), as the session.
	code, out := consoleGet(p, "/api/console/clusters/acme/queues", session)
	if code != http.StatusOK || !strings.Contains(out, `"orders"`) {
		t.Fatalf("the console's queue page: %d %s", code, out)
	}
	// Listed as a super user, the session may do anything.
	super := acl.New(acl.Config{Enabled: true, Store: acl.NewMemStore(), SuperUsers: []string{me}})
	p.broker = api.New(api.Config{ACL: super}, p.engine, raftgroupstest.Quiet).Handler()
	if code, _, out := webCall(p, "GET", "/api/v1/system/acls", "", bearerHeader(session)); code != http.StatusOK {
		t.Fatalf("a super user session lists ACLs: %d %s", code, out)
	}
}

// mustCluster is the cluster of slug.
func (p *Proxy) mustCluster(t *testing.T, slug string) *Cluster {
	t.Helper()
	c, found, err := p.clusterBySlug(context.Background(), slug)
	if err != nil || !found {
		t.Fatalf("cluster %s: %v %v", slug, found, err)
	}
	return c
}

// TestProxysOwnCallsSkipACLs: the proxy's own broker calls (its storage
// quota's reading of queue sizes; the control plane's calls, which the
// cell's operator makes) act for no tenant principal: with ACLs on and no
// binding at all they are served, as a peer's relay is, while a key of
// the same cluster is still refused.
func TestProxysOwnCallsSkipACLs(t *testing.T) {
	a := newACLProxy(t, func(map[string]string, *Cluster, *Cluster) []string { return nil })
	tenant, err := a.p.tenantOf(a.alpha)
	if err != nil {
		t.Fatal(err)
	}
	if code, out := a.call("POST", "/api/v1/push", a.keys["alpha"], `{"items":[{"queue":"q1","payload":"0123456789"}]}`); code != http.StatusForbidden ||
		errorCode(out) != "acl_denied" {
		t.Fatalf("a key without bindings pushes: %d %s", code, out)
	}
	if code, out := a.p.brokerCall("POST", "/api/v1/push", tenant, []byte(`{"items":[{"queue":"q1","payload":"0123456789"}]}`)); code != http.StatusCreated {
		t.Fatalf("the proxy's own push: %d %s", code, out)
	}
	total, err := a.p.retainedBytes(context.Background(), a.alpha)
	if err != nil || total < 10 {
		t.Fatalf("the storage quota's reading with ACLs on: %d %v", total, err)
	}
}
