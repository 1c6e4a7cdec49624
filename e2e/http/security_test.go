package http

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

func authedStatus(t *testing.T, ctx context.Context, method, url, token, body string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e2etest.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestBrokerJWTLevelsOverHTTP(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{"JWT_ENABLED": "true", "JWT_SECRET": e2etest.JWTSecret,
		"QUEEN_KAFKA_ALLOW_ANONYMOUS": "true"}})
	base := c.Nodes[0].URL()
	ctx := e2etest.Deadline(t, time.Minute)
	exp := time.Now().Add(time.Hour).Unix()
	tokens := map[string]string{}
	for _, role := range []string{"admin", "read-write", "read-only", "write-only"} {
		tokens[role] = e2etest.HS256Token(t, jwt.MapClaims{"sub": "svc-" + role, "role": role, "exp": exp})
	}
	push := `{"items":[{"queue":"sec","payload":1}]}`
	fetch := `{"entries":[{"queue":"sec","partition":"Default","offset":0}]}`
	cases := []struct {
		method, path, body string
		allowed            map[string]bool
	}{
		{"POST", "/api/v1/push", push, map[string]bool{"admin": true, "read-write": true, "write-only": true}},
		{"POST", "/api/v1/fetch", fetch, map[string]bool{"admin": true, "read-write": true, "read-only": true}},
		{"GET", "/api/v1/pop/queue/sec", "", map[string]bool{"admin": true, "read-write": true}},
	}
	for _, tc := range cases {
		for role, tok := range tokens {
			status := authedStatus(t, ctx, tc.method, base+tc.path, tok, tc.body)
			if tc.allowed[role] != (status != http.StatusForbidden) || status == http.StatusUnauthorized {
				t.Errorf("%s %s as %s: %d", tc.method, tc.path, role, status)
			}
		}
		if s := authedStatus(t, ctx, tc.method, base+tc.path, "", tc.body); s != http.StatusUnauthorized {
			t.Errorf("%s %s without a token: %d", tc.method, tc.path, s)
		}
	}
	// Expired and wrongly signed tokens are refused; /health stays public.
	expired := e2etest.HS256Token(t, jwt.MapClaims{"role": "admin", "exp": time.Now().Add(-time.Hour).Unix()})
	if s := authedStatus(t, ctx, "POST", base+"/api/v1/push", expired, push); s != http.StatusUnauthorized {
		t.Errorf("expired token: %d", s)
	}
	forged, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"role": "admin"}).SignedString([]byte("another-secret-another-secret-xx"))
	if s := authedStatus(t, ctx, "POST", base+"/api/v1/push", forged, push); s != http.StatusUnauthorized {
		t.Errorf("forged token: %d", s)
	}
	if s := authedStatus(t, ctx, "GET", base+"/health", "", ""); s != http.StatusOK {
		t.Errorf("health: %d", s)
	}
	// The producer's subject is recorded on its messages.
	if s := authedStatus(t, ctx, "POST", base+"/api/v1/push", tokens["write-only"], `{"items":[{"queue":"subq","payload":1}]}`); s != 201 {
		t.Fatalf("push as write-only: %d", s)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/pop/queue/subq?batch=10", nil)
	req.Header.Set("Authorization", "Bearer "+tokens["read-write"])
	resp, err := e2etest.HTTPClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("pop: %v %v", resp, err)
	}
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(body.String(), `"producerSub":"svc-write-only"`) {
		t.Fatalf("producerSub missing: %s", body.String())
	}
}

// encryptedQueueRun pushes a recognisable plaintext to a queue configured
// with encryptionEnabled, makes everything durable, and returns the files
// of the data dir that contain it.
func encryptedQueueRun(t *testing.T, env map[string]string) []string {
	t.Helper()
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: env})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, time.Minute)
	var cfgOut map[string]any
	if code, err := e2etest.Call(ctx, "POST", n.URL()+"/api/v1/configure",
		map[string]any{"queue": "secrets", "options": map[string]any{"encryptionEnabled": true}}, &cfgOut); err != nil || code != 200 {
		t.Fatalf("configure: %d %v %v", code, err, cfgOut)
	}
	marker := "PLAINTEXT-MARKER-" + hex.EncodeToString(randBytes(8))
	if _, code, err := e2etest.Push(ctx, n.URL(), []e2etest.PushItem{{Queue: "secrets", Payload: map[string]any{"card": marker}}}); err != nil || code != 201 {
		t.Fatalf("push: %d %v", code, err)
	}
	// A consumer still gets the plaintext.
	pa, code, err := e2etest.Pop(ctx, n.URL(), "/api/v1/pop/queue/secrets")
	if err != nil || code != 200 || !strings.Contains(string(pa.Messages[0].Data), marker) {
		t.Fatalf("pop of an encrypted message: %d %v %+v", code, err, pa.Messages)
	}
	// Stop cleanly so the store is flushed, then scan raft logs and store.
	n.Stop()
	return raftgroupstest.FilesContaining(t, n.Dir, []byte(marker))
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func TestEncryptedQueueLeavesNoPlaintextOnDisk(t *testing.T) {
	key := hex.EncodeToString(randBytes(32))
	if hits := encryptedQueueRun(t, map[string]string{"QUEEN_ENCRYPTION_KEY": key}); len(hits) != 0 {
		t.Fatalf("plaintext found on disk with encryption on: %v", hits)
	}
	// The same run without a key stores the payload in clear: the scan can
	// find it, so the check above means something.
	if hits := encryptedQueueRun(t, nil); len(hits) == 0 {
		t.Fatal("without a key the plaintext should be on disk, but the scan found nothing")
	}
}

func TestTenantsAreIsolatedOverHTTP(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Groups: 2, Env: map[string]string{"QUEEN_TENANCY_HEADER": "true", "QUEEN_KV_TRUSTED_PROXY": "1"}})
	base := c.Nodes[0].URL()
	ctx := e2etest.Deadline(t, time.Minute)
	tenants := []string{"7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c", "0b9e2c41-5d3a-4f7e-8a6b-1c2d3e4f5a6b"}
	send := func(method, path, tenant, body string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if tenant != "" {
			req.Header.Set("x-queen-tenant", tenant)
		}
		resp, err := e2etest.HTTPClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	for _, tn := range tenants {
		if s, b := send("POST", "/api/v1/push", tn, `{"items":[{"queue":"orders","payload":"`+tn+`"}]}`); s != 201 {
			t.Fatalf("push as %s: %d %s", tn, s, b)
		}
	}
	for i, tn := range tenants {
		s, b := send("GET", "/api/v1/pop/queue/orders?batch=10", tn, "")
		if s != 200 || !strings.Contains(b, tenants[i]) || strings.Contains(b, tenants[1-i]) {
			t.Fatalf("tenant %s sees: %d %s", tn, s, b)
		}
	}
	// The default tenant has no such queue; a malformed or reserved tenant
	// is refused.
	if s, _ := send("GET", "/api/v1/pop/queue/orders", "", ""); s != 204 {
		t.Fatalf("default tenant pop: %d", s)
	}
	if s, b := send("GET", "/api/v1/pop/queue/orders", "acme", ""); s != 400 || !strings.Contains(b, "bad_request") {
		t.Fatalf("malformed tenant: %d %s", s, b)
	}
	if s, b := send("GET", "/api/v1/pop/queue/orders", "00000000-0000-0000-0000-000000000000", ""); s != 403 || !strings.Contains(b, "reserved_tenant") {
		t.Fatalf("reserved tenant: %d %s", s, b)
	}
}

func TestTenancyHeaderWithoutTrustedProxyRefusesToBoot(t *testing.T) {
	c, err := harness.NewCluster(e2etest.QueenBinary(t), harness.Options{Nodes: 1, BaseDir: t.TempDir(), Env: map[string]string{"QUEEN_TENANCY_HEADER": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.StopAll)
	n := c.Nodes[0]
	if err := c.Start(n); err != nil {
		t.Fatal(err)
	}
	ctx := e2etest.Deadline(t, 30*time.Second)
	if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) { return !n.Running(), nil }); err != nil {
		t.Fatal("the node kept running")
	}
	if n.ExitCode() == 0 || !n.Grep("QUEEN_KV_TRUSTED_PROXY=1") {
		t.Fatalf("exit %d, log:\n%s", n.ExitCode(), n.Log())
	}
}

// TestChangedKeyServesTheEnvelope: a payload the node's key no longer
// opens is served as the stored envelope, and the right key brings the
// plaintext back (spec §5.3).
func TestChangedKeyServesTheEnvelope(t *testing.T) {
	keyA, keyB := hex.EncodeToString(randBytes(32)), hex.EncodeToString(randBytes(32))
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{"QUEEN_ENCRYPTION_KEY": keyA}})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 2*time.Minute)
	if code, err := e2etest.Call(ctx, "POST", n.URL()+"/api/v1/configure",
		map[string]any{"queue": "vault", "options": map[string]any{"encryptionEnabled": true}}, nil); err != nil || code != 200 {
		t.Fatalf("configure: %d %v", code, err)
	}
	if _, code, err := e2etest.Push(ctx, n.URL(), []e2etest.PushItem{{Queue: "vault", Payload: map[string]any{"pin": "1234"}}}); err != nil || code != 201 {
		t.Fatalf("push: %d %v", code, err)
	}
	read := func(key string) string {
		t.Helper()
		n.Stop()
		n.Env["QUEEN_ENCRYPTION_KEY"] = key
		if err := c.Start(n); err != nil {
			t.Fatal(err)
		}
		if err := n.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
		recs, _, err := e2etest.FetchAll(ctx, n.URL(), "vault", "Default")
		if err != nil || len(recs) != 1 {
			t.Fatalf("fetch: %v %d", err, len(recs))
		}
		return string(recs[0].Payload)
	}
	if got := read(keyB); !strings.Contains(got, `"encrypted"`) || !strings.Contains(got, `"authTag"`) || strings.Contains(got, "1234") {
		t.Fatalf("with the wrong key: %s", got)
	}
	if got := read(keyA); got != `{"pin":"1234"}` {
		t.Fatalf("with the right key again: %s", got)
	}
}
