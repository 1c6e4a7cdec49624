package authn

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func jwksConfig(url string, mut func(*Config)) Config {
	return enabled(func(c *Config) {
		c.Algorithm = AlgAuto
		c.JWKSURL = url
		if mut != nil {
			mut(c)
		}
	})
}

func withKid(kid string) map[string]any { return map[string]any{"kid": kid} }

func TestParseJWKSSkipsUnusableKeys(t *testing.T) {
	testKeys(t)
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	enc := jwkOf("enc", &rsaA.PublicKey)
	enc["use"] = "enc"
	wrongAlg := jwkOf("ps", &rsaA.PublicKey)
	wrongAlg["alg"] = "ES256"
	shortX := jwkOf("short-x", edAPub)
	shortX["x"] = "AAAA"
	badN := jwkOf("bad-n", &rsaA.PublicKey)
	badN["n"] = "***"
	doc := map[string]any{"keys": []any{
		jwkOf("r1", &rsaA.PublicKey),
		jwkOf("e1", edAPub),
		jwkOf("small", &small.PublicKey),
		map[string]any{"kty": "EC", "crv": "P-256", "kid": "ec", "x": "AA", "y": "AA"},
		map[string]any{"kty": "OKP", "crv": "Ed448", "kid": "ed448", "x": "AA"},
		enc, wrongAlg, shortX, badN, "not an object",
	}}
	body := mustJSON(t, doc)
	keys, skipped, err := parseJWKS(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].kid != "r1" || keys[1].kid != "e1" {
		t.Fatalf("keys = %+v", keys)
	}
	if len(skipped) != 8 {
		t.Fatalf("skipped = %q", skipped)
	}
	for _, bad := range []string{``, `[]`, `{"keys":5}`, `{}`} {
		if _, _, err := parseJWKS([]byte(bad)); err == nil {
			t.Errorf("parseJWKS(%q) accepted", bad)
		}
	}
}

func TestJWKSBootFetchByKidAndWithoutKid(t *testing.T) {
	testKeys(t)
	clock := newFakeClock()
	restricted := jwkOf("r512", &rsaB.PublicKey)
	restricted["alg"] = AlgRS512
	srv := newJWKSServer(t, jwkOf("r1", &rsaA.PublicKey), jwkOf("e1", edAPub), restricted)
	v := newTestVerifier(t, jwksConfig(srv.URL, nil), clock, srv.Client())
	if n := srv.requests.Load(); n != 1 {
		t.Fatalf("boot fetches = %d, want 1", n)
	}
	c := claimsAt(clock.Now(), jwt.MapClaims{"role": "admin"})
	for name, tok := range map[string]string{
		"RS256 kid r1":      sign(t, jwt.SigningMethodRS256, rsaA, c, withKid("r1")),
		"RS384 kid r1":      sign(t, jwt.SigningMethodRS384, rsaA, c, withKid("r1")),
		"EdDSA kid e1":      sign(t, jwt.SigningMethodEdDSA, edA, c, withKid("e1")),
		"RS512 kid r512":    sign(t, jwt.SigningMethodRS512, rsaB, c, withKid("r512")),
		"RS256 without kid": sign(t, jwt.SigningMethodRS256, rsaA, c, nil),
		"EdDSA without kid": sign(t, jwt.SigningMethodEdDSA, edA, c, nil),
	} {
		if p, err := v.Verify(tok); err != nil || !p.Allows(LevelAdmin) {
			t.Errorf("%s: %+v, %v", name, p, err)
		}
	}
	for name, tc := range map[string]struct {
		tok  string
		want error
	}{
		"EdDSA naming an RSA kid":     {sign(t, jwt.SigningMethodEdDSA, edA, c, withKid("r1")), ErrAlgorithm},
		"RS256 on an RS512-only key":  {sign(t, jwt.SigningMethodRS256, rsaB, c, withKid("r512")), ErrAlgorithm},
		"right kid, wrong signer":     {sign(t, jwt.SigningMethodRS256, rsaC, c, withKid("r1")), ErrSignature},
		"no kid, unknown signer":      {sign(t, jwt.SigningMethodRS256, rsaC, c, nil), ErrSignature},
		"HS256 without a secret":      {sign(t, jwt.SigningMethodHS256, []byte(testSecret), c, withKid("r1")), ErrAlgorithm},
		"unknown kid (rate-limited)":  {sign(t, jwt.SigningMethodRS256, rsaA, c, withKid("nope")), ErrUnknownKey},
		"kid of an Ed key, RS signed": {sign(t, jwt.SigningMethodRS256, rsaA, c, withKid("e1")), ErrAlgorithm},
	} {
		if _, err := v.Verify(tc.tok); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
	// The unknown kid came within 5 s of the boot fetch: no extra request.
	if n := srv.requests.Load(); n != 1 {
		t.Fatalf("fetches = %d, want 1", n)
	}
}

// Key rotation: a token signed by a newly published kid is accepted without
// restarting the Verifier; refreshes caused by unknown kids happen at most
// once per 5 s and are shared by concurrent callers.
func TestJWKSRotationAndUnknownKidRateLimit(t *testing.T) {
	testKeys(t)
	clock := newFakeClock()
	srv := newJWKSServer(t, jwkOf("k1", &rsaA.PublicKey))
	v := newTestVerifier(t, jwksConfig(srv.URL, func(c *Config) { c.Algorithm = AlgRS256 }), clock, srv.Client())
	tok := func(key *rsa.PrivateKey, kid string) string {
		return sign(t, jwt.SigningMethodRS256, key, claimsAt(clock.Now(), jwt.MapClaims{"role": "read-only"}), withKid(kid))
	}
	if _, err := v.Verify(tok(rsaA, "k1")); err != nil {
		t.Fatal(err)
	}

	// The issuer rotates: k2 is published.
	srv.set(jwkOf("k1", &rsaA.PublicKey), jwkOf("k2", &rsaB.PublicKey))
	clock.Advance(4 * time.Second) // still inside the 5 s window after the boot fetch
	if _, err := v.Verify(tok(rsaB, "k2")); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("inside the window: err = %v, want ErrUnknownKey", err)
	}
	if n := srv.requests.Load(); n != 1 {
		t.Fatalf("refresh inside the 5 s window: fetches = %d, want 1", n)
	}
	clock.Advance(time.Second)
	if _, err := v.Verify(tok(rsaB, "k2")); err != nil {
		t.Fatalf("new kid after the window: %v", err)
	}
	if n := srv.requests.Load(); n != 2 {
		t.Fatalf("fetches = %d, want 2", n)
	}

	// k1 is withdrawn and a flood of tokens names a kid nobody publishes.
	srv.set(jwkOf("k2", &rsaB.PublicKey))
	clock.Advance(5 * time.Second)
	srv.block() // hold the next fetch so every caller overlaps with it
	const callers = 32
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			_, err := v.Verify(tok(rsaC, "k3"))
			errs <- err
		})
	}
	eventually(t, 5*time.Second, "the refresh request", func() bool { return srv.requests.Load() == 3 })
	srv.unblock()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("unknown kid: err = %v", err)
		}
	}
	if n := srv.requests.Load(); n != 3 {
		t.Fatalf("%d concurrent unknown-kid tokens caused %d fetches, want 1", callers, n-2)
	}
	// The withdrawn key no longer verifies; the current one does.
	if _, err := v.Verify(tok(rsaA, "k1")); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("withdrawn kid: err = %v, want ErrUnknownKey", err)
	}
	if _, err := v.Verify(tok(rsaB, "k2")); err != nil {
		t.Fatalf("current kid: %v", err)
	}
	clock.Advance(4 * time.Second)
	for range 10 {
		_, _ = v.Verify(tok(rsaC, "k3"))
	}
	if n := srv.requests.Load(); n != 3 {
		t.Fatalf("fetches inside the window = %d, want 3", n)
	}
}

func TestJWKSPeriodicRefreshAndClose(t *testing.T) {
	testKeys(t)
	clock := newFakeClock() // never advanced: unknown-kid refreshes stay rate-limited
	srv := newJWKSServer(t, jwkOf("k1", edAPub))
	v := newTestVerifier(t, jwksConfig(srv.URL, func(c *Config) {
		c.Algorithm = AlgEdDSA
		c.JWKSRefreshInterval = 20 * time.Millisecond
	}), clock, srv.Client())
	newTok := sign(t, jwt.SigningMethodEdDSA, edB, claimsAt(clock.Now(), nil), withKid("k2"))
	if _, err := v.Verify(newTok); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("before publication: %v", err)
	}
	srv.set(jwkOf("k1", edAPub), jwkOf("k2", edBPub))
	eventually(t, 5*time.Second, "the periodic refresh to pick up k2", func() bool {
		_, err := v.Verify(newTok)
		return err == nil
	})

	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	_ = v.Close() // idempotent
	n := srv.requests.Load()
	clock.Advance(time.Minute)
	if _, err := v.Verify(sign(t, jwt.SigningMethodEdDSA, edA, claimsAt(clock.Now(), nil), withKid("k9"))); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("after Close, unknown kid: %v", err)
	}
	if _, err := v.Verify(sign(t, jwt.SigningMethodEdDSA, edA, claimsAt(clock.Now(), nil), withKid("k1"))); err != nil {
		t.Fatalf("after Close, cached keys should still verify: %v", err)
	}
	if got := srv.requests.Load(); got != n {
		t.Fatalf("fetches after Close: %d -> %d", n, got)
	}
}

func TestJWKSUnavailableAtBootThenRecovers(t *testing.T) {
	testKeys(t)
	clock := newFakeClock()
	srv := newJWKSServer(t, jwkOf("k1", &rsaA.PublicKey))
	srv.status.Store(http.StatusServiceUnavailable)
	v := newTestVerifier(t, jwksConfig(srv.URL, nil), clock, srv.Client())
	tok := sign(t, jwt.SigningMethodRS256, rsaA, claimsAt(clock.Now(), nil), withKid("k1"))
	if _, err := v.Verify(tok); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("no keys yet: %v", err)
	}
	srv.status.Store(http.StatusOK)
	clock.Advance(5 * time.Second)
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("after recovery: %v", err)
	}

	// A later failed refresh keeps the cached keys.
	srv.status.Store(http.StatusInternalServerError)
	clock.Advance(5 * time.Second)
	before := srv.requests.Load()
	_, _ = v.Verify(sign(t, jwt.SigningMethodRS256, rsaA, claimsAt(clock.Now(), nil), withKid("other")))
	if srv.requests.Load() != before+1 {
		t.Fatal("unknown kid did not trigger a refresh")
	}
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("cached key lost after a failed refresh: %v", err)
	}
}

func TestJWKSOversizedOrInvalidDocumentKeepsKeys(t *testing.T) {
	testKeys(t)
	clock := newFakeClock()
	srv := newJWKSServer(t, jwkOf("k1", &rsaA.PublicKey))
	v := newTestVerifier(t, jwksConfig(srv.URL, nil), clock, srv.Client())
	tok := sign(t, jwt.SigningMethodRS256, rsaA, claimsAt(clock.Now(), nil), withKid("k1"))
	for _, doc := range [][]byte{
		[]byte(`{"keys":[` + strings.Repeat(`{"kty":"x"},`, maxJWKSBytes/10) + `{}]}`),
		[]byte(`<html>login</html>`),
	} {
		srv.doc.Store(doc)
		clock.Advance(5 * time.Second)
		before := srv.requests.Load()
		_, _ = v.Verify(sign(t, jwt.SigningMethodRS256, rsaA, claimsAt(clock.Now(), nil), withKid("zzz")))
		if srv.requests.Load() != before+1 {
			t.Fatal("no refresh attempted")
		}
		if _, err := v.Verify(tok); err != nil {
			t.Fatalf("cached key lost: %v", err)
		}
	}
}

func TestJWKSTimeoutBoundsBootAndCallers(t *testing.T) {
	testKeys(t)
	clock := newFakeClock()
	srv := newJWKSServer(t, jwkOf("k1", &rsaA.PublicKey))
	srv.block()
	t.Cleanup(srv.unblock) // before srv.Close, which waits for handlers

	start := time.Now()
	v := newTestVerifier(t, jwksConfig(srv.URL, func(c *Config) { c.JWKSTimeout = 100 * time.Millisecond }), clock, srv.Client())
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("New took %v with a 100ms JWKS timeout", took)
	}
	tok := sign(t, jwt.SigningMethodRS256, rsaA, claimsAt(clock.Now(), nil), withKid("k1"))

	// A caller whose context ends stops waiting for a slow refresh.
	clock.Advance(5 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := v.VerifyContext(ctx, tok); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("cancelled caller: %v", err)
	}

	// Once the server answers again, the keys arrive.
	srv.unblock()
	clock.Advance(5 * time.Second)
	eventually(t, 5*time.Second, "keys after the server recovers", func() bool {
		_, err := v.Verify(tok)
		if err != nil {
			clock.Advance(5 * time.Second)
		}
		return err == nil
	})
}

func TestJWKSWithStaticKeyFallback(t *testing.T) {
	testKeys(t)
	clock := newFakeClock()
	srv := newJWKSServer(t, jwkOf("k1", &rsaA.PublicKey))
	v := newTestVerifier(t, jwksConfig(srv.URL, func(c *Config) {
		c.Algorithm = AlgRS256
		c.PublicKeyPEM = pemOf(t, &rsaB.PublicKey)
	}), clock, srv.Client())
	c := claimsAt(clock.Now(), nil)
	for name, tok := range map[string]string{
		"JWKS kid":              sign(t, jwt.SigningMethodRS256, rsaA, c, withKid("k1")),
		"static key, no kid":    sign(t, jwt.SigningMethodRS256, rsaB, c, nil),
		"static key, other kid": sign(t, jwt.SigningMethodRS256, rsaB, c, withKid("local")),
	} {
		if _, err := v.Verify(tok); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := v.Verify(sign(t, jwt.SigningMethodRS256, rsaC, c, withKid("local"))); !errors.Is(err, ErrSignature) {
		t.Errorf("unknown signer: %v", err)
	}
}

// Refreshes that are not rate-limited (boot, periodic) still share one fetch
// when they overlap.
func TestJWKSRefreshIsSingleFlight(t *testing.T) {
	testKeys(t)
	clock := newFakeClock()
	srv := newJWKSServer(t, jwkOf("k1", &rsaA.PublicKey))
	v := newTestVerifier(t, jwksConfig(srv.URL, nil), clock, srv.Client())
	srv.block()
	t.Cleanup(srv.unblock)
	const callers = 16
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() { errs <- v.jwks.refresh(context.Background(), false) })
	}
	eventually(t, 5*time.Second, "every caller to join the one fetch", func() bool {
		return srv.requests.Load() == 2 && v.jwks.joins.Load() == callers-1
	})
	srv.unblock()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("refresh: %v", err)
		}
	}
	if n := srv.requests.Load(); n != 2 {
		t.Fatalf("%d overlapping refreshes made %d fetches, want 1", callers, n-1)
	}
}
