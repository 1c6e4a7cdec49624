package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

// TestSignOutRevokesTheSession: after /auth/logout the session token
// answers 401 everywhere it was accepted — as a bearer token on the
// console and the data plane, as the cookie — on this node at once and on
// another node of the cluster (another proxy over the same replicated
// KV) once it reads the invalidation feed. The user's other sessions
// keep working.
func TestSignOutRevokesTheSession(t *testing.T) {
	p, session := consoleProxy(t, Config{})
	other := New(p.cfg, p.engine, nil, raftgroupstest.Quiet) // a second node
	other.broker = api.New(api.Config{}, p.engine, raftgroupstest.Quiet).Handler()
	code, _, out := webCall(p, "POST", "/auth/login", `{"email":"admin@localhost","password":"pw"}`, nil)
	var second struct{ Token string }
	if code != http.StatusOK || json.Unmarshal([]byte(out), &second) != nil || second.Token == "" {
		t.Fatalf("a second login: %d %s", code, out)
	}
	cookie := map[string]string{"Cookie": sessionCookie + "=" + session}
	uses := func(node *Proxy, token string) map[string]int {
		got := map[string]int{}
		got["me"], _, _ = webCall(node, "GET", "/api/console/me", "", bearerHeader(token))
		got["data plane"], _, _ = webCall(node, "GET", "/api/v1/resources/queues", "", bearerHeader(token))
		got["cookie"], _, _ = webCall(node, "GET", "/api/console/me", "", map[string]string{"Cookie": sessionCookie + "=" + token})
		return got
	}
	for _, node := range []*Proxy{p, other} {
		for use, code := range uses(node, session) {
			if code != http.StatusOK {
				t.Fatalf("before the sign-out, %s: %d", use, code)
			}
		}
	}

	cookie[webHeader] = "1"
	if code, _, out := webCall(p, "POST", "/auth/logout", "", cookie); code != http.StatusOK {
		t.Fatalf("sign-out: %d %s", code, out)
	}
	other.cache.refresh(context.Background()) // its next poll of the feed
	for name, node := range map[string]*Proxy{"this node": p, "another node": other} {
		for use, code := range uses(node, session) {
			if code != http.StatusUnauthorized {
				t.Errorf("after the sign-out, on %s, %s: %d, want 401", name, use, code)
			}
		}
		for use, code := range uses(node, second.Token) {
			if code != http.StatusOK {
				t.Errorf("the user's other session on %s, %s: %d", name, use, code)
			}
		}
	}
	// Signing out again with the revoked token changes nothing and says so.
	if code, _, out := webCall(p, "POST", "/auth/logout", "", cookie); code != http.StatusOK {
		t.Errorf("a second sign-out: %d %s", code, out)
	}
}
