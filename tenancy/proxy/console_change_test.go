package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

// webCall runs one request through the proxy with the given headers and
// answers status, Location and body.
func webCall(p *Proxy, method, path, body string, headers map[string]string) (int, string, string) {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if body != "" {
		req.Header.SetContentType("application/json")
		req.SetBodyString(body)
	}
	var rc fasthttp.RequestCtx
	rc.Init(&req, nil, nil)
	p.serve(&rc)
	return rc.Response.StatusCode(), string(rc.Response.Header.Peek("Location")), string(rc.Response.Body())
}

func bearerHeader(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// consoleProxy is a seeded proxy over a real broker handler with the
// bootstrap cluster acme as the default, and an admin session.
func consoleProxy(t *testing.T, cfg Config) (*Proxy, string) {
	t.Helper()
	key, _ := NewKey("live")
	cfg.JWTSecret = "s"
	cfg.DefaultCluster = "acme"
	cfg.Bootstrap = Bootstrap{Tenant: "acme", APIKey: key, Password: "pw"}
	p, _ := testProxy(t, cfg)
	p.broker = api.New(api.Config{}, p.engine, raftgroupstest.Quiet).Handler()
	if err := p.seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, _, out := webCall(p, "POST", "/auth/login", `{"email":"admin@localhost","password":"pw"}`, nil)
	var login struct{ Token string }
	if code != http.StatusOK || json.Unmarshal([]byte(out), &login) != nil || login.Token == "" {
		t.Fatalf("login: %d %s", code, out)
	}
	return p, login.Token
}

func TestConsoleMintsAndRevokesKeys(t *testing.T) {
	p, session := consoleProxy(t, Config{})
	push := `{"items":[{"queue":"orders","payload":{"n":1}}]}`

	code, _, out := webCall(p, "POST", "/api/console/clusters/acme/keys", `{"name":"orders-service","scopes":["produce","read","produce"]}`, bearerHeader(session))
	var k mintedKey
	if code != http.StatusCreated || json.Unmarshal([]byte(out), &k) != nil || !ValidKey(k.APIKey) ||
		strings.Join(k.Scopes, ",") != "produce,read" || k.Name != "orders-service" {
		t.Fatalf("mint: %d %s", code, out)
	}
	if code, _, out = webCall(p, "POST", "/api/v1/push", push, bearerHeader(k.APIKey)); code != http.StatusCreated {
		t.Fatalf("push with the minted key: %d %s", code, out)
	}
	// The list shows it, never its plaintext or hash.
	_, _, out = webCall(p, "GET", "/api/console/clusters/acme/keys", "", bearerHeader(session))
	if !strings.Contains(out, `"name":"orders-service"`) || strings.Contains(out, k.APIKey) || strings.Contains(out, HashKey(k.APIKey)) {
		t.Fatalf("keys: %s", out)
	}

	// Bad input changes nothing.
	for _, body := range []string{`{"name":"","scopes":["read"]}`, `{"name":"x","scopes":[]}`, `{"name":"x","scopes":["root"]}`,
		`{"name":"` + strings.Repeat("n", maxKeyName+1) + `","scopes":["read"]}`, `not json`} {
		if code, _, out = webCall(p, "POST", "/api/console/clusters/acme/keys", body, bearerHeader(session)); code != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", body, code, out)
		}
	}

	// The cookie alone does not carry a change; with the pages' own
	// header it does.
	cookie := map[string]string{"Cookie": sessionCookie + "=" + session}
	if code, _, out = webCall(p, "DELETE", "/api/console/clusters/acme/keys/"+k.ID, "", cookie); !webHeaderRefusal(code, out) {
		t.Fatalf("a revoke with the cookie alone: %d %s", code, out)
	}
	if code, _, out = webCall(p, "POST", "/api/v1/push", push, cookie); !webHeaderRefusal(code, out) {
		t.Fatalf("a push with the cookie alone: %d %s", code, out)
	}
	cookie[webHeader] = "1"
	if code, _, out = webCall(p, "POST", "/api/v1/push", push, cookie); code != http.StatusCreated {
		t.Fatalf("a push from the pages: %d %s", code, out)
	}
	if code, _, out = webCall(p, "DELETE", "/api/console/clusters/acme/keys/"+k.ID, "", cookie); code != http.StatusOK {
		t.Fatalf("revoke: %d %s", code, out)
	}
	if code, _, _ = webCall(p, "POST", "/api/v1/push", push, bearerHeader(k.APIKey)); code != http.StatusUnauthorized {
		t.Fatalf("push with the revoked key: %d", code)
	}
	if code, _, _ = webCall(p, "DELETE", "/api/console/clusters/acme/keys/no-such-id", "", bearerHeader(session)); code != http.StatusNotFound {
		t.Fatalf("revoke an unknown key: %d", code)
	}
	if code, _, _ = webCall(p, "PUT", "/api/console/clusters/acme/keys", "{}", bearerHeader(session)); code != http.StatusNotFound {
		t.Fatalf("PUT keys: %d", code)
	}

	// A key of another cluster is unknown here; a viewer changes nothing.
	ctx := context.Background()
	other, _, _ := p.store.ensureTenant(ctx, "globex", "")
	oc, _, _ := p.store.ensureCluster(ctx, other, "globex", "dev", nil)
	ok, _, _ := p.store.ensureKey(ctx, oc.ID, "theirs", HashKey("theirs"), []string{ScopeRead})
	if code, _, _ = webCall(p, "DELETE", "/api/console/clusters/acme/keys/"+ok.ID, "", bearerHeader(session)); code != http.StatusNotFound {
		t.Fatalf("revoke another cluster's key: %d", code)
	}
	tn, _, _ := p.store.ensureTenant(ctx, "acme", "")
	c, _, _ := p.store.ensureCluster(ctx, tn, "acme", "dev", nil)
	viewer, _, _ := p.store.ensureUser(ctx, "", "viewer@acme.example", tn, c.ID, RoleViewer, "")
	vt, _ := p.issueSession(viewer, time.Now())
	if code, _, _ = webCall(p, "POST", "/api/console/clusters/acme/keys", `{"name":"x","scopes":["read"]}`, bearerHeader(vt)); code != http.StatusForbidden {
		t.Fatalf("a viewer mints: %d", code)
	}
}

func TestConsolePagesAndSignIn(t *testing.T) {
	// Without a session secret there is no console.
	off := &Proxy{cfg: Config{}}
	if code, _, _ := webCall(off, "GET", "/console", "", nil); code != http.StatusNotFound {
		t.Fatalf("/console without a secret: %d", code)
	}
	// The page offers a provider only when its client id is set.
	github := &Proxy{cfg: Config{JWTSecret: "s", OAuth: OAuthConfig{PublicURL: "https://q.example", GitHub: OAuthProvider{ClientID: "id"}}}}
	if code, _, out := webCall(github, "GET", "/auth/providers", "", nil); code != http.StatusOK || out != `{"github":true,"google":false,"password":true}` {
		t.Fatalf("providers with GitHub: %d %s", code, out)
	}
	p, session := consoleProxy(t, Config{OperatorEnabled: true})
	code, _, out := webCall(p, "GET", "/console", "", nil)
	if code != http.StatusOK || !strings.Contains(out, "Queen console") {
		t.Fatalf("the page: %d %.100s", code, out)
	}
	for _, path := range []string{"/console/assets/app.js", "/console/assets/style.css", "/console/assets/api.js"} {
		if code, _, _ = webCall(p, "GET", path, "", nil); code != http.StatusOK {
			t.Fatalf("%s: %d", path, code)
		}
	}
	for _, path := range []string{"/console/assets/pages/queues.js", "/console/assets/../ui.go", "/console/other", "/console/assets/"} {
		if code, _, _ = webCall(p, "GET", path, "", nil); code != http.StatusNotFound {
			t.Fatalf("%s: %d", path, code)
		}
	}
	if code, _, _ = webCall(p, "POST", "/console", "{}", nil); code != http.StatusNotFound {
		t.Fatalf("POST /console: %d", code)
	}
	if code, _, out = webCall(p, "GET", "/auth/providers", "", nil); code != http.StatusOK || out != `{"github":false,"google":false,"password":true}` {
		t.Fatalf("providers: %d %s", code, out)
	}
	// The dashboard's page sends a browser without a session to sign in;
	// with one, it is served.
	if code, loc, _ := webCall(p, "GET", "/", "", nil); code != http.StatusSeeOther || loc != "/console" {
		t.Fatalf("/ signed out: %d %q", code, loc)
	}
	if code, loc, _ := webCall(p, "GET", "/", "", map[string]string{"Cookie": sessionCookie + "=expired"}); code != http.StatusSeeOther || loc != "/console" {
		t.Fatalf("/ with a bad session: %d %q", code, loc)
	}
	if code, _, out = webCall(p, "GET", "/", "", map[string]string{"Cookie": sessionCookie + "=" + session}); code != http.StatusOK || !strings.Contains(out, "Queen dashboard") {
		t.Fatalf("/ signed in: %d %.100s", code, out)
	}
	if code, _, _ = webCall(p, "GET", "/api/v1/resources/queues", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("an API call signed out: %d", code)
	}

	// Operators list every cluster; others are told nothing is there.
	code, _, out = webCall(p, "GET", "/api/console/operator/clusters", "", bearerHeader(session))
	if code != http.StatusNotFound {
		t.Fatalf("a non-operator: %d %s", code, out)
	}
	ctx := context.Background()
	var u User
	var r ref
	if _, err := p.store.get(ctx, userEmailKey("admin@localhost"), &r); err != nil {
		t.Fatal(err)
	}
	if _, err := p.store.get(ctx, userKey(r.ID), &u); err != nil {
		t.Fatal(err)
	}
	u.Operator = true
	if _, err := p.store.apply(ctx, putOp(userKey(u.ID), u, false)); err != nil {
		t.Fatal(err)
	}
	code, _, out = webCall(p, "GET", "/api/console/operator/clusters", "", bearerHeader(session))
	if code != http.StatusOK || !strings.Contains(out, `"slug":"acme"`) || !strings.Contains(out, `"tenant_status":"active"`) ||
		!strings.Contains(out, `"last_traffic":`) {
		t.Fatalf("an operator: %d %s", code, out)
	}
}

// The month to date adds the day rows of the days before yesterday to the
// minutes of yesterday and today, each message once, last month's none.
func TestMonthToDateFromDaysAndMinutes(t *testing.T) {
	p, _ := testProxy(t, Config{})
	ctx := context.Background()
	tn, _, _ := p.store.ensureTenant(ctx, "acme", "")
	c, _, _ := p.store.ensureCluster(ctx, tn, "acme", "dev", nil)
	now := time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC)
	at := func(day, n int) {
		m := newMeter(p.store, uint64(day), "", time.Hour, raftgroupstest.Quiet)
		m.now = func() time.Time { return time.Date(2026, 12, day, 10, 0, 0, 0, time.UTC) }
		m.record(c.ID, "push", 201, 10, []byte(`[`+strings.TrimSuffix(strings.Repeat(`{"status":"queued"},`, n), ",")+`]`))
		if err := m.flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	at(0, 5)  // November 30th: last month
	at(3, 1)  // rolled into its day on the 4th
	at(14, 2) // yesterday, rolled today too
	at(15, 3) // today
	for _, day := range []int{4, 15} {
		if err := p.rollup(ctx, time.Date(2026, 12, day, 11, 0, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := p.monthToDate(ctx, c.ID, now)
	if err != nil || len(got) != 1 || got["push"] == nil || got["push"].Msgs != 6 || got["push"].Reqs != 3 {
		t.Fatalf("month to date: %+v %v", got, err)
	}
	// On the 1st, only the month's own minutes count.
	first, err := p.monthToDate(ctx, c.ID, time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	if err != nil || len(first) != 0 {
		t.Fatalf("on the 1st: %+v %v", first, err)
	}
}

func TestConsoleManagesMembers(t *testing.T) {
	p, session := consoleProxy(t, Config{})
	admin := bearerHeader(session)
	code, _, out := webCall(p, "POST", "/api/console/clusters/acme/members", `{"email":"Dev@Acme.example","role":"viewer"}`, admin)
	var m member
	if code != http.StatusOK || json.Unmarshal([]byte(out), &m) != nil || m.Email != "dev@acme.example" || m.Role != "viewer" {
		t.Fatalf("add: %d %s", code, out)
	}
	// Adding again keeps the role.
	if code, _, out = webCall(p, "POST", "/api/console/clusters/acme/members", `{"email":"dev@acme.example","role":"admin"}`, admin); code != http.StatusOK || !strings.Contains(out, `"role":"viewer"`) {
		t.Fatalf("add again: %d %s", code, out)
	}
	for _, body := range []string{`{"email":"nobody","role":"viewer"}`, `{"email":"a@b.example","role":"owner"}`, `{"email":"a@b.example"}`} {
		if code, _, out = webCall(p, "POST", "/api/console/clusters/acme/members", body, admin); code != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", body, code, out)
		}
	}
	if code, _, _ = webCall(p, "PUT", "/api/console/clusters/acme/members/"+m.UserID, `{"role":"root"}`, admin); code != http.StatusBadRequest {
		t.Fatalf("a bad role: %d", code)
	}
	if code, _, out = webCall(p, "PUT", "/api/console/clusters/acme/members/"+m.UserID, `{"role":"consumer"}`, admin); code != http.StatusOK {
		t.Fatalf("change: %d %s", code, out)
	}
	_, _, out = webCall(p, "GET", "/api/console/clusters/acme/members", "", admin)
	if !strings.Contains(out, `{"user_id":"`+m.UserID+`","email":"dev@acme.example","role":"consumer"}`) {
		t.Fatalf("members: %s", out)
	}

	// The consumer now consumes on the data plane and cannot see members.
	ctx := context.Background()
	var u User
	if _, err := p.store.get(ctx, userKey(m.UserID), &u); err != nil {
		t.Fatal(err)
	}
	dev, _ := p.issueSession(&u, time.Now())
	if code, _, _ = webCall(p, "GET", "/api/console/clusters/acme/members", "", bearerHeader(dev)); code != http.StatusForbidden {
		t.Fatalf("a consumer's members: %d", code)
	}
	if code, _, _ = webCall(p, "DELETE", "/api/console/clusters/acme/members/"+m.UserID, "", bearerHeader(dev)); code != http.StatusForbidden {
		t.Fatalf("a consumer removes: %d", code)
	}

	// The last admin stays; with a second admin, the first may go.
	var r ref
	if _, err := p.store.get(ctx, userEmailKey("admin@localhost"), &r); err != nil {
		t.Fatal(err)
	}
	if code, _, out = webCall(p, "PUT", "/api/console/clusters/acme/members/"+r.ID, `{"role":"viewer"}`, admin); code != http.StatusConflict || !strings.Contains(out, "last_admin") {
		t.Fatalf("demote the last admin: %d %s", code, out)
	}
	if code, _, _ = webCall(p, "PUT", "/api/console/clusters/acme/members/"+m.UserID, `{"role":"admin"}`, admin); code != http.StatusOK {
		t.Fatalf("promote: %d", code)
	}
	if code, _, out = webCall(p, "DELETE", "/api/console/clusters/acme/members/"+r.ID, "", bearerHeader(dev)); code != http.StatusOK {
		t.Fatalf("remove the first admin: %d %s", code, out)
	}
	if code, _, _ = webCall(p, "GET", "/api/console/clusters/acme", "", admin); code != http.StatusForbidden {
		t.Fatalf("the removed admin still sees the cluster: %d", code)
	}
	if code, _, _ = webCall(p, "DELETE", "/api/console/clusters/acme/members/"+r.ID, "", bearerHeader(dev)); code != http.StatusNotFound {
		t.Fatalf("remove again: %d", code)
	}

	// Someone of another tenant is not added here.
	other, _, _ := p.store.ensureTenant(ctx, "globex", "")
	if _, _, err := p.store.ensureUser(ctx, "", "ops@globex.example", other, "", "", ""); err != nil {
		t.Fatal(err)
	}
	if code, _, _ = webCall(p, "POST", "/api/console/clusters/acme/members", `{"email":"ops@globex.example","role":"viewer"}`, bearerHeader(dev)); code != http.StatusConflict {
		t.Fatalf("a person of another tenant: %d", code)
	}
}

// A sign-out clears the session cookie only when the console's own pages
// ask for it: a form on another site could post to /auth/logout (a
// top-level navigation takes the answer's cookie) and sign the user out.
func TestSignOutNeedsThePagesHeader(t *testing.T) {
	p, session := consoleProxy(t, Config{})
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/auth/logout")
	req.Header.Set("Cookie", sessionCookie+"="+session)
	var rc fasthttp.RequestCtx
	rc.Init(&req, nil, nil)
	p.serve(&rc)
	if code := rc.Response.StatusCode(); code != http.StatusForbidden || len(rc.Response.Header.Peek("Set-Cookie")) != 0 {
		t.Fatalf("a sign-out without the pages' header: %d, Set-Cookie %q", code, rc.Response.Header.Peek("Set-Cookie"))
	}
	req.Header.Set(webHeader, "1")
	rc.Init(&req, nil, nil)
	p.serve(&rc)
	if code, cookie := rc.Response.StatusCode(), string(rc.Response.Header.Peek("Set-Cookie")); code != http.StatusOK ||
		!strings.Contains(cookie, sessionCookie+"=;") || !strings.Contains(cookie, "Max-Age=0") {
		t.Fatalf("a sign-out from the pages: %d, Set-Cookie %q", code, cookie)
	}
}
