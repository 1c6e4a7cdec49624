package authn

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const testSecret = "0123456789abcdef0123456789abcdef-test-secret"

// Test keys, generated once per test binary (RSA generation is slow).
var (
	keysOnce          sync.Once
	rsaA, rsaB, rsaC  *rsa.PrivateKey
	edA, edB          ed25519.PrivateKey
	edAPub, edBPub    ed25519.PublicKey
	testKeysGenerated bool
)

func testKeys(t testing.TB) {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		for _, k := range []**rsa.PrivateKey{&rsaA, &rsaB, &rsaC} {
			if *k, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
				panic(err)
			}
		}
		if edAPub, edA, err = ed25519.GenerateKey(rand.Reader); err != nil {
			panic(err)
		}
		if edBPub, edB, err = ed25519.GenerateKey(rand.Reader); err != nil {
			panic(err)
		}
		testKeysGenerated = true
	})
	if !testKeysGenerated {
		t.Fatal("test key generation failed")
	}
}

func pemOf(t testing.TB, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// fakeClock is a settable clock for the Verifier; tokens are made relative
// to it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_900_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// sign makes a token; header entries (such as "kid") are added to the header.
func sign(t testing.TB, m jwt.SigningMethod, key any, claims jwt.MapClaims, header map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	for k, v := range header {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign %s: %v", m.Alg(), err)
	}
	return s
}

// claimsAt returns claims valid at now for an hour, with the given extras.
func claimsAt(now time.Time, extra jwt.MapClaims) jwt.MapClaims {
	c := jwt.MapClaims{"sub": "user-1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

// newTestVerifier builds a Verifier with an injected clock and closes it when
// the test ends.
func newTestVerifier(t testing.TB, cfg Config, clock *fakeClock, client *http.Client) *Verifier {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := newVerifier(ctx, cfg, testLogger(t), client, clock.Now)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

func enabled(mut func(*Config)) Config {
	c := DefaultConfig()
	c.Enabled = true
	mut(&c)
	return c
}

// jwkOf renders a public key as a JWK.
func jwkOf(kid string, pub any) map[string]any {
	b64 := base64.RawURLEncoding.EncodeToString
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "n": b64(k.N.Bytes()),
			"e": b64(big.NewInt(int64(k.E)).Bytes())}
	case ed25519.PublicKey:
		return map[string]any{"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64(k)}
	}
	panic("unsupported key")
}

// jwksServer serves a JWKS document that the test can replace, and counts
// requests. While blocked, requests wait until unblocked (or the request is
// cancelled).
type jwksServer struct {
	*httptest.Server
	doc      atomic.Value // []byte
	requests atomic.Int64
	status   atomic.Int32
	gate     chan struct{}
	gateMu   sync.Mutex
}

func newJWKSServer(t testing.TB, keys ...map[string]any) *jwksServer {
	s := &jwksServer{}
	s.status.Store(http.StatusOK)
	s.set(keys...)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.gateMu.Lock()
		gate := s.gate
		s.gateMu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		if st := int(s.status.Load()); st != http.StatusOK {
			w.WriteHeader(st)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.doc.Load().([]byte))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(keys ...map[string]any) {
	if keys == nil {
		keys = []map[string]any{}
	}
	b, _ := json.Marshal(map[string]any{"keys": keys})
	s.doc.Store(b)
}

func (s *jwksServer) block() {
	s.gateMu.Lock()
	s.gate = make(chan struct{})
	s.gateMu.Unlock()
}

func (s *jwksServer) unblock() {
	s.gateMu.Lock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
	s.gateMu.Unlock()
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
