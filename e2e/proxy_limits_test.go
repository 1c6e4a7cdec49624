package e2e

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProxyEnforceAnswers429AndSizeCaps: with QUEEN_PROXY_ENFORCE=true
// the burst the shadow test lets through gets 429 with Retry-After, an
// oversized payload is 413 as in shadow mode, and without a
// control-plane token the whole /api/cp surface is 404.
func TestProxyEnforceAnswers429AndSizeCaps(t *testing.T) {
	key, _ := newAPIKey(t)
	c, base := proxyNode(t, key, "", map[string]string{"QUEEN_PROXY_ENFORCE": "true"})
	ctx := deadline(t, 30*time.Second)

	big := `"` + strings.Repeat("x", 600<<10) + `"`
	code, _, body := proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", body: pushBody("orders", big), bearer: key})
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "payload_too_large") {
		t.Fatalf("an oversized payload when enforcing: %d %s", code, body)
	}
	limited := -1
	for i := range 80 { // dev: 10 requests/s, burst 50
		code, hdr, body := proxyDo(t, ctx, base, proxyReq{method: "GET", path: "/api/v1/resources/queues", bearer: key})
		if code == http.StatusTooManyRequests {
			if s, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || s < 1 || !strings.Contains(body, "rate_limited") {
				t.Fatalf("429 without a usable Retry-After: %q %s", hdr.Get("Retry-After"), body)
			}
			limited = i
			break
		}
		if code != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, code, body)
		}
	}
	if limited < 40 {
		t.Fatalf("the burst was refused at request %d, want after about 50", limited)
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
