package api

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/wire"
)

// inProcess runs one request through the server's handler, as the
// embedded proxy does, acting for tenant (nil: not proxied).
func inProcess(s *Server, method, uri string, tenant *wire.ID, body string) (int, string) {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	if body != "" {
		req.Header.SetContentType("application/json")
		req.SetBodyString(body)
	}
	var rc fasthttp.RequestCtx
	rc.Init(&req, nil, nil)
	if tenant != nil {
		Proxied(&rc, *tenant)
	}
	s.Handler()(&rc)
	return rc.Response.StatusCode(), string(rc.Response.Body())
}

// TestProxiedRequestsAreScopedToTheirTenant: a request the proxy hands in
// acts for its tenant even with QUEEN_TENANCY_HEADER off, and a client's
// x-queen-tenant header cannot do the same.
func TestProxiedRequestsAreScopedToTheirTenant(t *testing.T) {
	n := startNode(t)
	a, _ := wire.ParseID("7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c")
	b, _ := wire.ParseID("0b9e2c41-5d3a-4f7e-8a6b-1c2d3e4f5a6b")
	if code, body := inProcess(n.srv, "POST", "/api/v1/push", &a, `{"items":[{"queue":"only-a","payload":1}]}`); code != 201 {
		t.Fatalf("push as a: %d %s", code, body)
	}
	if _, body := inProcess(n.srv, "GET", "/api/v1/resources/queues", &a, ""); !strings.Contains(body, "only-a") {
		t.Fatalf("a does not see its queue: %s", body)
	}
	for name, tenant := range map[string]*wire.ID{"b": &b, "the default tenant": nil} {
		if _, body := inProcess(n.srv, "GET", "/api/v1/resources/queues", tenant, ""); strings.Contains(body, "only-a") {
			t.Fatalf("%s sees a's queue: %s", name, body)
		}
	}
	var req fasthttp.Request
	req.SetRequestURI("/api/v1/resources/queues")
	req.Header.Set("x-queen-tenant", a.String())
	var rc fasthttp.RequestCtx
	rc.Init(&req, nil, nil)
	n.srv.Handler()(&rc)
	if strings.Contains(string(rc.Response.Body()), "only-a") {
		t.Fatal("a client's x-queen-tenant header reached a's queues with tenancy off")
	}
}

// TestProxiedPushCheck: the proxy's check sees the items as read, with
// the default partition and payload sizes, and its refusal writes
// nothing.
func TestProxiedPushCheck(t *testing.T) {
	n := startNode(t)
	a, _ := wire.ParseID("7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c")
	var seen []PushItem
	run := func(refuse bool) (int, string) {
		var req fasthttp.Request
		req.Header.SetMethod("POST")
		req.SetRequestURI("/api/v1/push")
		req.SetBodyString(`{"items":[{"queue":"checked","payload":{"k":"12345"}},{"queue":"checked","partition":"p","payload":7}]}`)
		var rc fasthttp.RequestCtx
		rc.Init(&req, nil, nil)
		Proxied(&rc, a)
		ProxiedPush(&rc, func(items []PushItem) *PushRefusal {
			seen = items
			if refuse {
				return &PushRefusal{Status: 413, Code: "payload_too_large", Message: "too big"}
			}
			return nil
		})
		n.srv.Handler()(&rc)
		return rc.Response.StatusCode(), string(rc.Response.Body())
	}
	if code, body := run(true); code != 413 || !strings.Contains(body, `"code":"payload_too_large"`) {
		t.Fatalf("refused push: %d %s", code, body)
	}
	want := []PushItem{{"checked", "Default", len(`{"k":"12345"}`)}, {"checked", "p", 1}}
	if len(seen) != 2 || seen[0] != want[0] || seen[1] != want[1] {
		t.Fatalf("the check saw %+v, want %+v", seen, want)
	}
	if _, body := inProcess(n.srv, "GET", "/api/v1/resources/queues", &a, ""); strings.Contains(body, "checked") {
		t.Fatalf("a refused push wrote: %s", body)
	}
	if code, body := run(false); code != 201 {
		t.Fatalf("admitted push: %d %s", code, body)
	}
}
