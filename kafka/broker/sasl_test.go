package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

func testVerifier(t *testing.T) *authn.Verifier {
	t.Helper()
	cfg := authn.DefaultConfig()
	cfg.Enabled, cfg.Secret = true, testJWTSecret
	v, err := authn.New(context.Background(), cfg, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}

func signed(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	claims["exp"] = time.Now().Add(time.Hour).Unix()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(testJWTSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJWTLoginIsBoundToTheTokensTenant: in tenancy mode a broker JWT only
// logs in as the tenant its tenant claim names. The SASL user name is
// chosen by the client, so a token of tenant A (or a token naming no
// tenant) must not open tenant B's topics.
func TestJWTLoginIsBoundToTheTokensTenant(t *testing.T) {
	const a, b = "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c", "0b9e2c41-5d3a-4f7e-8a6b-1c2d3e4f5a6b"
	auth := BrokerJWTs(testVerifier(t), true)
	ctx := context.Background()
	ofA := signed(t, jwt.MapClaims{"sub": "svc", "role": "admin", "tenant": a})

	p, err := auth(ctx, a, ofA)
	if err != nil {
		t.Fatalf("tenant A with A's token: %v", err)
	}
	if want, _ := tenancy.Parse(a); p.Identity.(Identity).Tenant != want {
		t.Fatalf("logged in as %v, want %s", p.Identity.(Identity).Tenant, a)
	}
	for name, tc := range map[string]struct{ user, token string }{
		"A's token as tenant B":       {b, ofA},
		"a token naming no tenant":    {b, signed(t, jwt.MapClaims{"sub": "svc", "role": "admin"})},
		"a tenant claim not a UUID":   {b, signed(t, jwt.MapClaims{"sub": "svc", "role": "admin", "tenant": "acme"})},
		"a tenant claim not a string": {b, signed(t, jwt.MapClaims{"sub": "svc", "role": "admin", "tenant": 7})},
	} {
		if _, err := auth(ctx, tc.user, tc.token); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("%s: login %v, want ErrBadCredentials", name, err)
		}
	}
	// Without tenancy every login is the default tenant; the claim is not
	// needed.
	if _, err := BrokerJWTs(testVerifier(t), false)(ctx, "svc", signed(t, jwt.MapClaims{"role": "admin"})); err != nil {
		t.Fatalf("no tenancy: %v", err)
	}
}

// TestScramUsersKeepOnlySaltedHashes: SCRAM credentials are derived at
// boot with a random salt per user and mechanism, and in tenancy mode a
// user must be a tenant as for PLAIN.
func TestScramUsersKeepOnlySaltedHashes(t *testing.T) {
	const tenant = "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c"
	lookup, err := ScramUsers(map[string]string{tenant: "pw-one", "acme": "pw-two"}, true)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, p, err := lookup(ctx, kafka.MechanismScramSHA256, tenant)
	if err != nil || p.Identity.(Identity).Tenant != mustTenant(t, tenant) {
		t.Fatalf("%v %+v", err, p)
	}
	b, _, err := lookup(ctx, kafka.MechanismScramSHA512, tenant)
	if err != nil || string(a.Salt) == string(b.Salt) || a.Iterations != ScramIterations ||
		strings.Contains(string(a.StoredKey)+string(a.ServerKey)+string(a.Salt), "pw-one") {
		t.Fatalf("credentials: %v, salts equal %v, iterations %d", err, string(a.Salt) == string(b.Salt), a.Iterations)
	}
	if _, _, err := lookup(ctx, kafka.MechanismScramSHA256, "acme"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("a user that is not a tenant in tenancy mode: %v", err)
	}
	if _, _, err := lookup(ctx, kafka.MechanismScramSHA256, "nobody"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("unknown user: %v", err)
	}
}

// TestBearerJWTsTakeTheTenantFromTheToken: an OAUTHBEARER login has no
// user name; in tenancy mode the token's tenant claim is the tenant.
func TestBearerJWTsTakeTheTenantFromTheToken(t *testing.T) {
	const a = "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c"
	auth := BearerJWTs(testVerifier(t), true)
	ctx := context.Background()
	p, err := auth(ctx, signed(t, jwt.MapClaims{"sub": "svc", "role": "admin", "tenant": a}))
	if err != nil || p.User != "svc" || p.Identity.(Identity).Tenant != mustTenant(t, a) || p.Expires.IsZero() {
		t.Fatalf("%v %+v", err, p)
	}
	for name, tok := range map[string]string{
		"no tenant claim": signed(t, jwt.MapClaims{"sub": "svc", "role": "admin"}),
		"not a UUID":      signed(t, jwt.MapClaims{"sub": "svc", "role": "admin", "tenant": "acme"}),
		"not a JWT":       "forged",
	} {
		if _, err := auth(ctx, tok); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func mustTenant(t *testing.T, s string) wire.ID {
	t.Helper()
	id, err := tenancy.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
