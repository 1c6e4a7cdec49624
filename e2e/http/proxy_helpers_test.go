package http

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/queen-mq/queen/e2e/harness"
)

// proxyReq is one request to a proxy port.
type proxyReq struct {
	method, path, body string
	host               string // Host header; "" keeps the address
	bearer             string
	headers            map[string]string
}

// proxyDo sends r to base and returns status, headers and body.
func proxyDo(t *testing.T, ctx context.Context, base string, r proxyReq) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, r.method, base+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.host != "" {
		req.Host = r.host
	}
	if r.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+r.bearer)
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// cp calls the control plane with token and decodes a 2xx answer into out.
func cp(t *testing.T, ctx context.Context, base, token, method, path, body string, out any) int {
	t.Helper()
	code, _, b := proxyDo(t, ctx, base, proxyReq{method: method, path: path, body: body, headers: map[string]string{"x-queen-cp-token": token}})
	if out != nil && code < 300 {
		if err := json.Unmarshal([]byte(b), out); err != nil {
			t.Fatalf("%s %s: %v (%s)", method, path, err, b)
		}
	}
	return code
}

// newAPIKey mints a key the way the seed does and returns it with its
// sha256.
func newAPIKey(t *testing.T) (key, hash string) {
	t.Helper()
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	key = "qk_live_" + base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(key))
	return key, hex.EncodeToString(sum[:])
}

// proxyPort allocates a free port for QUEEN_PROXY_PORT.
func proxyPort(t *testing.T) int {
	t.Helper()
	p, err := harness.FreePortRange(1)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func pushBody(queue string, payloads ...string) string {
	items := make([]string, len(payloads))
	for i, p := range payloads {
		items[i] = fmt.Sprintf(`{"queue":%q,"partition":"p","payload":%s}`, queue, p)
	}
	return `{"items":[` + strings.Join(items, ",") + `]}`
}

// provisionBody is a provision call for slug with a key hash and scopes.
func provisionBody(slug, userID, hash, plan string, scopes ...string) string {
	sc, _ := json.Marshal(scopes)
	return fmt.Sprintf(`{"tenant_slug":%q,"cluster_slug":%q,"plan":%q,"user_id":%q,"email":"ops@%s.example",`+
		`"role":"admin","key_name":"default","key_hash":%q,"scopes":%s}`, slug, slug, plan, userID, slug, hash, sc)
}
