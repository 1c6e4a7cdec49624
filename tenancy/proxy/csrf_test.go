package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/queen-mq/queen/http/api"
)

// webHeaderRefusal reports whether an answer is the refusal of a change
// carried by the session cookie without the pages' header.
func webHeaderRefusal(code int, body string) bool {
	var e struct{ Code, Error string }
	return code == http.StatusForbidden && json.Unmarshal([]byte(body), &e) == nil &&
		e.Code == "web_header_required" && strings.Contains(e.Error, webHeader)
}

// A page of another site can make a signed-in browser send the session
// cookie (SameSite=Lax lets top-level GETs through), but cannot add a
// header of its own. So the cookie carries a change only with the pages'
// header, whatever the method: a GET pop with autoAck consumes, and is
// refused without it; nothing is consumed.
func TestSessionCookieCarriesAChangeOnlyWithThePagesHeader(t *testing.T) {
	p, session := consoleProxy(t, Config{})
	cookie := map[string]string{"Cookie": sessionCookie + "=" + session}
	pages := map[string]string{"Cookie": sessionCookie + "=" + session, webHeader: "1"}
	push := func(n string) {
		t.Helper()
		body := `{"items":[{"queue":"orders","payload":{"n":` + n + `}}]}`
		if code, _, out := webCall(p, "POST", "/api/v1/push", body, bearerHeader(session)); code != http.StatusCreated {
			t.Fatalf("push %s: %d %s", n, code, out)
		}
	}
	const pop = "/api/v1/pop/queue/orders?autoAck=true&batch=1"
	push("1")

	// The cookie alone: 403, and the message is still there.
	code, _, out := webCall(p, "GET", pop, "", cookie)
	if !webHeaderRefusal(code, out) {
		t.Fatalf("a GET pop with autoAck carried by the cookie alone: %d %s, want 403 web_header_required", code, out)
	}
	// With the pages' header it pops, and takes the message.
	code, _, out = webCall(p, "GET", pop, "", pages)
	if code != http.StatusOK || !strings.Contains(out, `"n":1`) {
		t.Fatalf("a pop from the pages: %d %s", code, out)
	}
	// A bearer credential needs no header.
	push("2")
	code, _, out = webCall(p, "GET", pop, "", bearerHeader(session))
	if code != http.StatusOK || !strings.Contains(out, `"n":2`) {
		t.Fatalf("a pop with the bearer session: %d %s", code, out)
	}

	// A POST is refused the same way, and pushes nothing.
	code, _, out = webCall(p, "POST", "/api/v1/push", `{"items":[{"queue":"orders","payload":{"n":3}}]}`, cookie)
	if !webHeaderRefusal(code, out) {
		t.Fatalf("a push carried by the cookie alone: %d %s", code, out)
	}
	if code, _, out = webCall(p, "GET", pop, "", bearerHeader(session)); code == http.StatusOK && strings.Contains(out, `"n":3`) {
		t.Fatalf("the refused push was queued: %s", out)
	}

	// The cookie alone still reads.
	if code, _, out = webCall(p, "GET", "/api/v1/resources/queues", "", cookie); code != http.StatusOK {
		t.Fatalf("a read with the cookie alone: %d %s", code, out)
	}
}

// cookieGetChanges are the broker's GET routes that change state: pops
// lease (or, with autoAck, consume) messages.
var cookieGetChanges = map[string]bool{
	"GET /api/v1/pop/queue/{queue}":                       true,
	"GET /api/v1/pop/queue/{queue}/partition/{partition}": true,
	"GET /api/v1/ephemeral/pop":                           true,
}

// Every broker route a session may reach through the proxy: a change
// (any method but GET and HEAD, and the GETs above) carried by the cookie
// alone is refused before it reaches the broker; a read is not.
func TestSessionCookieEveryChangeNeedsThePagesHeader(t *testing.T) {
	p, session := consoleProxy(t, Config{})
	cookie := map[string]string{"Cookie": sessionCookie + "=" + session}
	for _, rt := range api.Routes() {
		name := rt.Method + " " + rt.Path
		path := concrete(rt.Path)
		if c := Classify(rt.Method, path).Class; c == ClassBlocked || c == ClassOperator {
			continue
		}
		body := ""
		if rt.Method != "GET" {
			body = "{}"
		}
		code, _, out := webCall(p, rt.Method, path, body, cookie)
		change := rt.Method != "GET" || cookieGetChanges[name]
		if refused := webHeaderRefusal(code, out); refused != change {
			t.Errorf("%s with the cookie alone: %d %s (a change: %v)", name, code, out, change)
		}
	}
}
