package authn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

type signer struct {
	name   string
	method jwt.SigningMethod
	key    any
	cfg    func(*Config)
}

func signers(t *testing.T) []signer {
	testKeys(t)
	return []signer{
		{"HS256", jwt.SigningMethodHS256, []byte(testSecret), func(c *Config) { c.Secret = testSecret }},
		{"RS256", jwt.SigningMethodRS256, rsaA, func(c *Config) {
			c.Algorithm = AlgRS256
			c.PublicKeyPEM = pemOf(t, &rsaA.PublicKey)
		}},
		{"EdDSA", jwt.SigningMethodEdDSA, edA, func(c *Config) {
			c.Algorithm = AlgEdDSA
			c.PublicKeyPEM = pemOf(t, edAPub)
		}},
	}
}

// Every level × every role, for each algorithm family, through both role
// claims, with the §2.2 table in level_test.go as the expectation.
func TestVerifyEveryLevelEveryRole(t *testing.T) {
	clock := newFakeClock()
	roleNames := map[Role]string{
		RoleAdmin: "admin", RoleReadWrite: "read-write", RoleReadOnly: "read-only", RoleWriteOnly: "write-only",
	}
	for _, s := range signers(t) {
		t.Run(s.name, func(t *testing.T) {
			v := newTestVerifier(t, enabled(s.cfg), clock, nil)
			for role, name := range roleNames {
				for claim, value := range map[string]any{"role": name, "roles": []any{"unrelated", name}} {
					tok := sign(t, s.method, s.key, claimsAt(clock.Now(), jwt.MapClaims{claim: value}), nil)
					p, err := v.Verify(tok)
					if err != nil {
						t.Fatalf("%s via %q: %v", name, claim, err)
					}
					if p.Subject != "user-1" || p.Roles != Roles(role) {
						t.Fatalf("%s via %q: principal %+v", name, claim, p)
					}
					for _, l := range allLevels {
						if got, want := p.Allows(l), wantAllows[role][l]; got != want {
							t.Errorf("%s via %q at %v: Allows = %v, want %v", name, claim, l, got, want)
						}
					}
				}
			}
			// No role, or only unknown role names: authenticated, public only.
			for _, extra := range []jwt.MapClaims{{}, {"role": "superuser", "roles": []any{"root", 7}}} {
				p, err := v.Verify(sign(t, s.method, s.key, claimsAt(clock.Now(), extra), nil))
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range allLevels {
					if p.Allows(l) != (l == LevelPublic) {
						t.Errorf("roleless principal at %v: Allows = %v", l, p.Allows(l))
					}
				}
			}
			// Several roles from both claims combine as a set.
			p, err := v.Verify(sign(t, s.method, s.key, claimsAt(clock.Now(),
				jwt.MapClaims{"role": "read-only", "roles": []any{"write-only"}}), nil))
			if err != nil {
				t.Fatal(err)
			}
			if p.Roles != Roles(RoleReadOnly, RoleWriteOnly) || p.Allows(LevelReadWrite) || !p.Allows(LevelWriteOnly) {
				t.Errorf("combined roles: %v", p.Roles)
			}
		})
	}
}

func TestCustomRoleNamesAndClaims(t *testing.T) {
	clock := newFakeClock()
	v := newTestVerifier(t, enabled(func(c *Config) {
		c.Secret = testSecret
		c.RolesClaim = "queen_role"
		c.RolesArrayClaim = "https://example.com/queen/roles"
		c.RoleAdmin, c.RoleReadWrite, c.RoleReadOnly, c.RoleWriteOnly = "ops", "app", "viewer", "ingest"
	}), clock, nil)
	for _, tc := range []struct {
		claims jwt.MapClaims
		want   RoleSet
	}{
		{jwt.MapClaims{"queen_role": "ops"}, Roles(RoleAdmin)},
		{jwt.MapClaims{"https://example.com/queen/roles": []any{"viewer", "ingest"}}, Roles(RoleReadOnly, RoleWriteOnly)},
		{jwt.MapClaims{"queen_role": "app"}, Roles(RoleReadWrite)},
		{jwt.MapClaims{"role": "admin", "roles": []any{"admin"}}, 0}, // default names and claims no longer count
	} {
		p, err := v.Verify(sign(t, jwt.SigningMethodHS256, []byte(testSecret), claimsAt(clock.Now(), tc.claims), nil))
		if err != nil {
			t.Fatal(err)
		}
		if p.Roles != tc.want {
			t.Errorf("claims %v: roles %v, want %v", tc.claims, p.Roles, tc.want)
		}
	}
}

func TestRefusedTokens(t *testing.T) {
	testKeys(t)
	clock := newFakeClock()
	now := clock.Now()
	v := newTestVerifier(t, enabled(func(c *Config) {
		c.Algorithm = AlgRS256
		c.PublicKeyPEM = pemOf(t, &rsaA.PublicKey)
		c.Issuer = "https://issuer.example"
		c.Audience = "queen"
	}), clock, nil)
	good := jwt.MapClaims{"iss": "https://issuer.example", "aud": "queen", "role": "admin"}
	with := func(extra jwt.MapClaims) jwt.MapClaims {
		c := claimsAt(now, good)
		for k, val := range extra {
			if val == nil {
				delete(c, k)
			} else {
				c[k] = val
			}
		}
		return c
	}
	rs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodRS256, rsaA, c, nil) }
	valid := rs(with(nil))
	if _, err := v.Verify(valid); err != nil {
		t.Fatalf("baseline token refused: %v", err)
	}
	parts := strings.Split(valid, ".")
	otherPayload := strings.Split(rs(with(jwt.MapClaims{"sub": "someone-else"})), ".")[1]

	rsaPEM := pemOf(t, &rsaA.PublicKey)
	for _, tc := range []struct {
		name  string
		token string
		want  error
	}{
		{"expired beyond skew", rs(with(jwt.MapClaims{"exp": now.Add(-31 * time.Second).Unix()})), ErrExpired},
		{"not yet valid beyond skew", rs(with(jwt.MapClaims{"nbf": now.Add(31 * time.Second).Unix()})), ErrNotYetValid},
		{"issued in the future beyond skew", rs(with(jwt.MapClaims{"iat": now.Add(31 * time.Second).Unix()})), ErrNotYetValid},
		{"wrong issuer", rs(with(jwt.MapClaims{"iss": "https://evil.example"})), ErrIssuer},
		{"missing issuer", rs(with(jwt.MapClaims{"iss": nil})), ErrIssuer},
		{"wrong audience", rs(with(jwt.MapClaims{"aud": []any{"other", "x"}})), ErrAudience},
		{"missing audience", rs(with(jwt.MapClaims{"aud": nil})), ErrAudience},
		{"exp not a number", rs(with(jwt.MapClaims{"exp": "tomorrow"})), ErrClaims},
		{"signed by another key", sign(t, jwt.SigningMethodRS256, rsaB, with(nil), nil), ErrSignature},
		{"payload swapped", parts[0] + "." + otherPayload + "." + parts[2], ErrSignature},
		{"signature stripped", parts[0] + "." + parts[1] + ".", ErrSignature},
		{"alg none", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, with(nil), nil), ErrAlgorithm},
		{"alg NONE", noneToken("NONE", with(nil)), ErrAlgorithm},
		{"HS256 keyed with the RSA public key", sign(t, jwt.SigningMethodHS256, []byte(rsaPEM), with(nil), nil), ErrAlgorithm},
		{"RS512 when RS256 configured", sign(t, jwt.SigningMethodRS512, rsaA, with(nil), nil), ErrAlgorithm},
		{"PS256", sign(t, jwt.SigningMethodPS256, rsaA, with(nil), nil), ErrAlgorithm},
		{"EdDSA", sign(t, jwt.SigningMethodEdDSA, edA, with(nil), nil), ErrAlgorithm},
		{"unknown alg", noneToken("XX999", with(nil)), ErrAlgorithm},
		{"empty", "", ErrMalformed},
		{"garbage", "not-a-jwt", ErrMalformed},
		{"bad base64", "a.b.c", ErrMalformed},
		{"oversized", strings.Repeat("a", maxTokenLen+1), ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := v.Verify(tc.token)
			if err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if !errors.Is(err, ErrUnauthenticated) || !errors.Is(err, tc.want) {
				t.Fatalf("err = %v; want ErrUnauthenticated and %v", err, tc.want)
			}
			if p != (Principal{}) {
				t.Fatalf("refusal returned a principal: %+v", p)
			}
		})
	}
}

// noneToken builds an unsigned token with an arbitrary alg header.
func noneToken(alg string, c jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodNone, c)
	tok.Header["alg"] = alg
	s, _ := tok.SigningString()
	return s + "."
}

func TestClockSkewAndNoExp(t *testing.T) {
	clock := newFakeClock()
	now := clock.Now()
	v := newTestVerifier(t, enabled(func(c *Config) { c.Secret = testSecret }), clock, nil)
	hs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, []byte(testSecret), c, nil) }
	for name, c := range map[string]jwt.MapClaims{
		"no exp":                  {"sub": "svc", "role": "read-only"},
		"no claims at all":        {},
		"expired within skew":     {"exp": now.Add(-29 * time.Second).Unix()},
		"nbf within skew":         {"nbf": now.Add(29 * time.Second).Unix()},
		"iat in future, in skew":  {"iat": now.Add(29 * time.Second).Unix()},
		"exp far in the future":   {"exp": now.Add(10 * 365 * 24 * time.Hour).Unix()},
		"fractional numeric date": {"exp": float64(now.Unix()) + 0.5},
	} {
		if _, err := v.Verify(hs(c)); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
	// The same token flips to expired when the clock passes exp + skew.
	tok := hs(jwt.MapClaims{"exp": now.Add(time.Minute).Unix()})
	clock.Advance(time.Minute + 29*time.Second)
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("inside skew: %v", err)
	}
	clock.Advance(2 * time.Second)
	if _, err := v.Verify(tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("past skew: err = %v, want ErrExpired", err)
	}

	// ClockSkew zero means no leeway.
	strict := newTestVerifier(t, enabled(func(c *Config) { c.Secret = testSecret; c.ClockSkew = 0 }), clock, nil)
	if _, err := strict.Verify(hs(jwt.MapClaims{"exp": clock.Now().Add(-time.Second).Unix()})); !errors.Is(err, ErrExpired) {
		t.Fatalf("zero skew: err = %v, want ErrExpired", err)
	}
}

// TestExpiresIsWhenTheTokenStopsVerifying: a principal's Expires is its
// token's exp plus the clock skew, the last moment Verify accepts it (a
// Kafka session lasts until then); zero without exp.
func TestExpiresIsWhenTheTokenStopsVerifying(t *testing.T) {
	clock := newFakeClock()
	v := newTestVerifier(t, enabled(func(c *Config) { c.Secret = testSecret }), clock, nil)
	hs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, []byte(testSecret), c, nil) }
	exp := clock.Now().Add(time.Minute).Truncate(time.Second)
	tok := hs(jwt.MapClaims{"exp": exp.Unix()})
	p, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if want := exp.Add(DefaultClockSkew); !p.Expires.Equal(want) {
		t.Fatalf("Expires %s, want %s", p.Expires, want)
	}
	clock.Advance(p.Expires.Sub(clock.Now()) - time.Millisecond)
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("just before Expires: %v", err)
	}
	clock.Advance(2 * time.Millisecond)
	if _, err := v.Verify(tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("just after Expires: %v", err)
	}
	if p, err := v.Verify(hs(jwt.MapClaims{"sub": "svc"})); err != nil || !p.Expires.IsZero() {
		t.Fatalf("no exp: Expires %s, err %v", p.Expires, err)
	}
}

func TestHMACVariantsAndWrongSecret(t *testing.T) {
	clock := newFakeClock()
	for _, m := range []*jwt.SigningMethodHMAC{jwt.SigningMethodHS384, jwt.SigningMethodHS512} {
		v := newTestVerifier(t, enabled(func(c *Config) { c.Secret = testSecret; c.Algorithm = strings.ToLower(m.Alg()) }), clock, nil)
		if _, err := v.Verify(sign(t, m, []byte(testSecret), claimsAt(clock.Now(), nil), nil)); err != nil {
			t.Errorf("%s: %v", m.Alg(), err)
		}
		if _, err := v.Verify(sign(t, m, []byte(testSecret+"x"), claimsAt(clock.Now(), nil), nil)); !errors.Is(err, ErrSignature) {
			t.Errorf("%s wrong secret: err = %v", m.Alg(), err)
		}
		if _, err := v.Verify(sign(t, jwt.SigningMethodHS256, []byte(testSecret), claimsAt(clock.Now(), nil), nil)); !errors.Is(err, ErrAlgorithm) {
			t.Errorf("HS256 token on %s verifier: err = %v", m.Alg(), err)
		}
	}
}

func TestAutoModePicksKeyByAlgorithm(t *testing.T) {
	testKeys(t)
	clock := newFakeClock()
	c := claimsAt(clock.Now(), jwt.MapClaims{"role": "read-write"})
	v := newTestVerifier(t, enabled(func(c *Config) {
		c.Algorithm = "AUTO"
		c.Secret = testSecret
		c.PublicKeyPEM = pemOf(t, &rsaA.PublicKey) + pemOf(t, edAPub)
	}), clock, nil)
	for _, s := range []struct {
		m   jwt.SigningMethod
		key any
	}{
		{jwt.SigningMethodHS256, []byte(testSecret)}, {jwt.SigningMethodHS512, []byte(testSecret)},
		{jwt.SigningMethodRS256, rsaA}, {jwt.SigningMethodRS384, rsaA}, {jwt.SigningMethodRS512, rsaA},
		{jwt.SigningMethodEdDSA, edA},
	} {
		p, err := v.Verify(sign(t, s.m, s.key, c, nil))
		if err != nil || !p.Allows(LevelReadWrite) {
			t.Errorf("auto %s: %+v, %v", s.m.Alg(), p, err)
		}
	}
	for name, tok := range map[string]string{
		"RS256 by another key":       sign(t, jwt.SigningMethodRS256, rsaB, c, nil),
		"EdDSA by another key":       sign(t, jwt.SigningMethodEdDSA, edB, c, nil),
		"HS256 keyed with RSA PEM":   sign(t, jwt.SigningMethodHS256, []byte(pemOf(t, &rsaA.PublicKey)), c, nil),
		"HS256 keyed with Ed25519":   sign(t, jwt.SigningMethodHS256, []byte(edAPub), c, nil),
		"alg none":                   sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, c, nil),
		"ES256-looking, unsupported": noneToken("ES256", c),
	} {
		if _, err := v.Verify(tok); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("auto accepted %s: %v", name, err)
		}
	}

	// auto with only a secret refuses asymmetric tokens as an algorithm error.
	hsOnly := newTestVerifier(t, enabled(func(c *Config) { c.Algorithm = AlgAuto; c.Secret = testSecret }), clock, nil)
	if _, err := hsOnly.Verify(sign(t, jwt.SigningMethodRS256, rsaA, c, nil)); !errors.Is(err, ErrAlgorithm) {
		t.Errorf("auto/secret-only with RS256: err = %v, want ErrAlgorithm", err)
	}
	// auto with only an RSA key refuses EdDSA and HS256.
	rsaOnly := newTestVerifier(t, enabled(func(c *Config) { c.Algorithm = AlgAuto; c.PublicKeyPEM = pemOf(t, &rsaA.PublicKey) }), clock, nil)
	for _, tok := range []string{
		sign(t, jwt.SigningMethodEdDSA, edA, c, nil),
		sign(t, jwt.SigningMethodHS256, []byte(testSecret), c, nil),
	} {
		if _, err := rsaOnly.Verify(tok); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("auto/RSA-only accepted a non-RSA token: %v", err)
		}
	}
}

func TestVerifyContextCancelled(t *testing.T) {
	clock := newFakeClock()
	v := newTestVerifier(t, enabled(func(c *Config) { c.Secret = testSecret }), clock, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Without a JWKS nothing waits, so a cancelled context does not matter.
	if _, err := v.VerifyContext(ctx, sign(t, jwt.SigningMethodHS256, []byte(testSecret), claimsAt(clock.Now(), nil), nil)); err != nil {
		t.Fatal(err)
	}
}

func TestBearerToken(t *testing.T) {
	for in, want := range map[string]string{
		"Bearer abc.def.ghi": "abc.def.ghi",
		"bearer abc":         "abc",
		"BEARER  abc ":       "abc",
		"Basic dXNlcjpwdw==": "",
		"Bearer ":            "",
		"Bearer":             "",
		"":                   "",
		"Bearerabc":          "",
	} {
		got, ok := BearerToken(in)
		if got != want || ok != (want != "") {
			t.Errorf("BearerToken(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestTenantClaim(t *testing.T) {
	clock := newFakeClock()
	for _, tc := range []struct {
		claim  string
		claims jwt.MapClaims
		want   string
	}{
		{"", jwt.MapClaims{"tenant": "t-1"}, "t-1"}, // default claim name
		{"", jwt.MapClaims{}, ""},
		{"org", jwt.MapClaims{"org": "t-2", "tenant": "t-1"}, "t-2"},
	} {
		v := newTestVerifier(t, enabled(func(c *Config) { c.Secret, c.TenantClaim = testSecret, tc.claim }), clock, nil)
		p, err := v.Verify(sign(t, jwt.SigningMethodHS256, []byte(testSecret), claimsAt(clock.Now(), tc.claims), nil))
		if err != nil {
			t.Fatal(err)
		}
		if p.Tenant != tc.want {
			t.Errorf("claim %q, claims %v: tenant %q, want %q", tc.claim, tc.claims, p.Tenant, tc.want)
		}
	}
}

// A tenant claim that is present but not a tenant name must not read as
// "no tenant": a token without one is the operator's (issue 33).
func TestTenantClaimThatIsNotANameIsRefused(t *testing.T) {
	clock := newFakeClock()
	v := newTestVerifier(t, enabled(func(c *Config) { c.Secret = testSecret }), clock, nil)
	for _, bad := range []any{7, "", true, []any{"t-1"}, map[string]any{"id": "t-1"}} {
		_, err := v.Verify(sign(t, jwt.SigningMethodHS256, []byte(testSecret), claimsAt(clock.Now(), jwt.MapClaims{"role": "admin", "tenant": bad}), nil))
		if !errors.Is(err, ErrUnauthenticated) || !errors.Is(err, ErrMalformed) {
			t.Errorf("tenant claim %#v: err %v, want a refusal as malformed", bad, err)
		}
	}
}
