package authn

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestNewRefusesUnusableConfig(t *testing.T) {
	testKeys(t)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	privDER, _ := x509.MarshalPKCS8PrivateKey(rsaA)
	privPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}))
	for _, tc := range []struct {
		name    string
		cfg     Config
		mention []string
	}{
		{"no key material", enabled(func(c *Config) {}), []string{"JWT_SECRET", "JWT_PUBLIC_KEY", "JWT_JWKS_URL"}},
		{"HS256 with only a public key", enabled(func(c *Config) { c.PublicKeyPEM = pemOf(t, &rsaA.PublicKey) }), []string{"JWT_SECRET"}},
		{"RS256 with only a secret", enabled(func(c *Config) { c.Algorithm = AlgRS256; c.Secret = testSecret }), []string{"JWT_PUBLIC_KEY", "JWT_JWKS_URL"}},
		{"EdDSA with an RSA key", enabled(func(c *Config) { c.Algorithm = AlgEdDSA; c.PublicKeyPEM = pemOf(t, &rsaA.PublicKey) }), []string{"Ed25519"}},
		{"unknown algorithm", enabled(func(c *Config) { c.Algorithm = "ES256"; c.Secret = testSecret }), []string{"JWT_ALGORITHM"}},
		{"not PEM", enabled(func(c *Config) { c.Algorithm = AlgRS256; c.PublicKeyPEM = "hello" }), []string{"JWT_PUBLIC_KEY"}},
		{"private key PEM", enabled(func(c *Config) { c.Algorithm = AlgRS256; c.PublicKeyPEM = privPEM }), []string{"private key"}},
		{"short RSA key", enabled(func(c *Config) { c.Algorithm = AlgRS256; c.PublicKeyPEM = pemOf(t, &small.PublicKey) }), []string{"2048"}},
		{"two RSA keys", enabled(func(c *Config) {
			c.Algorithm = AlgRS256
			c.PublicKeyPEM = pemOf(t, &rsaA.PublicKey) + pemOf(t, &rsaB.PublicKey)
		}), []string{"more than one"}},
		{"bad JWKS URL", enabled(func(c *Config) { c.Algorithm = AlgRS256; c.JWKSURL = "file:///etc/keys" }), []string{"JWT_JWKS_URL"}},
		{"negative skew", enabled(func(c *Config) { c.Secret = testSecret; c.ClockSkew = -time.Second }), []string{"JWT_CLOCK_SKEW"}},
		{"duplicate role names", enabled(func(c *Config) { c.Secret = testSecret; c.RoleReadOnly = "admin" }), []string{"JWT_ROLE_ADMIN", "JWT_ROLE_READ_ONLY"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := New(context.Background(), tc.cfg, nil, nil)
			if err == nil {
				_ = v.Close()
				t.Fatal("New accepted the configuration")
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("err = %v; want ErrConfig", err)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("err %q does not mention %q", err, m)
				}
			}
		})
	}
}

func TestDisabled(t *testing.T) {
	v, err := New(context.Background(), DefaultConfig(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.Enabled() || v.Describe() != "jwt=disabled" {
		t.Fatalf("Enabled=%v Describe=%q", v.Enabled(), v.Describe())
	}
	if _, err := v.Verify("a.b.c"); !errors.Is(err, ErrDisabled) || !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("Verify on a disabled verifier: %v", err)
	}
	if !v.SkipPath("/health") {
		t.Error("skip paths should be known even when disabled")
	}
}

func TestDescribeMasksSecrets(t *testing.T) {
	testKeys(t)
	v := newTestVerifier(t, enabled(func(c *Config) {
		c.Algorithm = AlgAuto
		c.Secret = testSecret
		c.PublicKeyPEM = pemOf(t, &rsaA.PublicKey)
		c.JWKSURL = "https://user:pass@127.0.0.1:1/keys?token=s3cr3t"
		c.JWKSTimeout = 50 * time.Millisecond
		c.Issuer = "https://issuer.example"
	}), newFakeClock(), nil)
	d := v.Describe()
	for _, leak := range []string{testSecret, testSecret[2:10], "pass", "s3cr3t", "BEGIN"} {
		if strings.Contains(d, leak) {
			t.Errorf("Describe leaks %q: %s", leak, d)
		}
	}
	for _, want := range []string{
		"jwt=enabled", "algorithm=auto", "secret=<set>", "public_key=RSA-2048",
		"jwks_url=https://***@127.0.0.1:1/keys?***", "issuer=https://issuer.example", "audience=-",
		"clock_skew=30s", "roles_claim=role", "skip_paths=/health,/metrics/prometheus,/metrics,/",
		"accepts=HS256,HS384,HS512,RS256,RS384,RS512,EdDSA",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe lacks %q: %s", want, d)
		}
	}
	if strings.Contains(d, "\n") {
		t.Errorf("Describe is not one line: %q", d)
	}
}

func TestDefaultsFilledAndSkipPaths(t *testing.T) {
	clock := newFakeClock()
	// A bare Config gets the spec defaults, except ClockSkew (zero = none).
	v := newTestVerifier(t, Config{Enabled: true, Secret: testSecret}, clock, nil)
	for path, want := range map[string]bool{
		"/health": true, "/metrics": true, "/metrics/prometheus": true, "/": true,
		"/api/v1/push": false, "/health/": false, "/healthz": false,
	} {
		if v.SkipPath(path) != want {
			t.Errorf("SkipPath(%q) = %v", path, !want)
		}
	}
	p, err := v.Verify(sign(t, jwt.SigningMethodHS256, []byte(testSecret),
		claimsAt(clock.Now(), jwt.MapClaims{"role": "write-only"}), nil))
	if err != nil || p.Roles != Roles(RoleWriteOnly) {
		t.Fatalf("default role claim: %+v, %v", p, err)
	}
	custom := newTestVerifier(t, enabled(func(c *Config) {
		c.Secret = testSecret
		c.SkipPaths = []string{" /ready ", ""}
	}), clock, nil)
	if !custom.SkipPath("/ready") || custom.SkipPath("/health") || custom.SkipPath("") {
		t.Error("custom skip paths not applied exactly")
	}
}

func TestPublicKeyPEMForms(t *testing.T) {
	testKeys(t)
	clock := newFakeClock()
	tok := sign(t, jwt.SigningMethodRS256, rsaA, claimsAt(clock.Now(), nil), nil)
	pkcs1 := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&rsaA.PublicKey)}))
	escaped := strings.ReplaceAll(pemOf(t, &rsaA.PublicKey), "\n", `\n`)
	for name, text := range map[string]string{"PKIX": pemOf(t, &rsaA.PublicKey), "PKCS1": pkcs1, `literal \n`: escaped} {
		v := newTestVerifier(t, enabled(func(c *Config) { c.Algorithm = AlgRS256; c.PublicKeyPEM = text }), clock, nil)
		if _, err := v.Verify(tok); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestJWKSErrorsDoNotLogTheURLsSecrets: a failed fetch's error names the
// URL; its credentials and query (often a token) stay out of the log.
func TestJWKSErrorsDoNotLogTheURLsSecrets(t *testing.T) {
	var logs bytes.Buffer
	cfg := enabled(func(c *Config) {
		c.Algorithm = AlgRS256
		c.JWKSURL = "https://user:pass@127.0.0.1:1/keys?token=s3cr3t"
		c.JWKSTimeout = 50 * time.Millisecond
	})
	v, err := newVerifier(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)), nil, newFakeClock().Now)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if !strings.Contains(logs.String(), "JWKS fetch") {
		t.Fatalf("no fetch failure logged: %s", logs.String())
	}
	for _, leak := range []string{"pass", "s3cr3t"} {
		if strings.Contains(logs.String(), leak) {
			t.Errorf("the log leaks %q: %s", leak, logs.String())
		}
	}
}
