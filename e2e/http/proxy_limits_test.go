package http

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// TestProxyEnforceAnswers429AndSizeCaps: with QUEEN_PROXY_ENFORCE=true
// the burst the shadow test lets through gets 429 with Retry-After, an
// oversized payload is 413 as in shadow mode, and without a
// control-plane token the whole /api/cp surface is 404.
func TestProxyEnforceAnswers429AndSizeCaps(t *testing.T) {
	key, _ := newAPIKey(t)
	c, base := proxyNode(t, key, "", map[string]string{"QUEEN_PROXY_ENFORCE": "true", "QUEEN_PROXY_BOOTSTRAP_PLAN": "free"})
	ctx := e2etest.Deadline(t, 30*time.Second)

	big := `"` + strings.Repeat("x", 300<<10) + `"` // free: 256 KiB
	code, _, body := proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", body: pushBody("orders", big), bearer: key})
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "payload_too_large") {
		t.Fatalf("an oversized payload when enforcing: %d %s", code, body)
	}
	// The free plan: 5 requests/s, burst 25. However slow the machine, a
	// few hundred requests in a row pass the burst.
	limited := -1
	for i := 0; i < 400 && limited < 0; i++ {
		code, hdr, body := proxyDo(t, ctx, base, proxyReq{method: "GET", path: "/api/v1/resources/queues", bearer: key})
		switch code {
		case http.StatusTooManyRequests:
			if s, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || s < 1 || !strings.Contains(body, "rate_limited") {
				t.Fatalf("429 without a usable Retry-After: %q %s", hdr.Get("Retry-After"), body)
			}
			limited = i
		case http.StatusOK:
		default:
			t.Fatalf("request %d: %d %s", i, code, body)
		}
	}
	if limited < 20 {
		t.Fatalf("the burst was refused at request %d, want after about 25", limited)
	}
	if !c.Nodes[0].Grep("would_block=true") {
		t.Fatal("the refused request was not logged with would_block=true")
	}
	for _, path := range []string{"/api/cp/provision", "/api/cp/clusters", "/api/cp/keys/x"} {
		code, _, _ := proxyDo(t, ctx, base, proxyReq{method: "POST", path: path, body: `{}`, headers: map[string]string{"x-queen-cp-token": ""}})
		if code != http.StatusNotFound {
			t.Fatalf("%s without QUEEN_PROXY_CP_TOKEN: %d, want 404", path, code)
		}
	}
}

// TestProxyFrontsPortOnASingleNode: without QUEEN_PROXY_PORT the proxy
// serves PORT itself, so the raw broker is not reachable at all.
func TestProxyFrontsPortOnASingleNode(t *testing.T) {
	key, _ := newAPIKey(t)
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{"QUEEN_PROXY_EMBEDDED": "true",
		"QUEEN_PROXY_BOOTSTRAP_TENANT": "acme", "QUEEN_PROXY_BOOTSTRAP_API_KEY": key, "QUEEN_PROXY_DEFAULT_CLUSTER": "acme"}})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 20*time.Second)
	if !n.Grep("boot: single binary: proxy in-process in front of PORT") {
		t.Fatalf("no boot line:\n%s", n.Tail(2000))
	}
	code, _, body := proxyDo(t, ctx, n.URL(), proxyReq{method: "GET", path: "/api/v1/resources/queues"})
	if code != http.StatusUnauthorized || body != missingCredentialBody {
		t.Fatalf("PORT without a key: %d %s", code, body)
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		code, _, _ := proxyDo(t, ctx, n.URL(), proxyReq{method: "POST", path: "/api/v1/push", body: pushBody("q", `1`), bearer: key})
		return code == http.StatusCreated, nil
	}); err != nil {
		t.Fatal("the bootstrap key never pushed through PORT")
	}
}
