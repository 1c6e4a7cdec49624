package authn

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Algorithm names accepted in Config.Algorithm (JWT_ALGORITHM), matched
// case-insensitively.
const (
	AlgHS256 = "HS256"
	AlgHS384 = "HS384"
	AlgHS512 = "HS512"
	AlgRS256 = "RS256"
	AlgRS384 = "RS384"
	AlgRS512 = "RS512"
	AlgEdDSA = "EdDSA"
	AlgAuto  = "auto"
)

// Defaults from spec §8.4.
const (
	DefaultAlgorithm           = AlgHS256
	DefaultJWKSRefreshInterval = 3600 * time.Second
	DefaultJWKSTimeout         = 5000 * time.Millisecond
	DefaultClockSkew           = 30 * time.Second
	DefaultRolesClaim          = "role"
	DefaultRolesArrayClaim     = "roles"
	DefaultTenantClaim         = "tenant"
	DefaultRoleAdmin           = "admin"
	DefaultRoleReadWrite       = "read-write"
	DefaultRoleReadOnly        = "read-only"
	DefaultRoleWriteOnly       = "write-only"
)

// DefaultSkipPaths is JWT_SKIP_PATHS' default.
var DefaultSkipPaths = []string{"/health", "/metrics/prometheus", "/metrics", "/"}

// Config is the broker JWT configuration (JWT_* in spec §8.4). Start from
// DefaultConfig and override what the environment sets. New fills empty
// strings, zero durations and a nil SkipPaths with the defaults, except
// ClockSkew, where zero means no leeway.
type Config struct {
	Enabled bool // JWT_ENABLED

	// Algorithm is JWT_ALGORITHM: HS256, HS384, HS512, RS256, RS384, RS512,
	// EdDSA, or auto (accept whatever the token's header names for which a key
	// of the matching type is configured).
	Algorithm string

	Secret       string // JWT_SECRET, for HS*
	PublicKeyPEM string // JWT_PUBLIC_KEY: PEM text, RSA and/or Ed25519
	JWKSURL      string // JWT_JWKS_URL

	JWKSRefreshInterval time.Duration // JWT_JWKS_REFRESH_INTERVAL (seconds in env)
	JWKSTimeout         time.Duration // JWT_JWKS_TIMEOUT_MS

	Issuer    string        // JWT_ISSUER; checked when set
	Audience  string        // JWT_AUDIENCE; checked when set
	ClockSkew time.Duration // JWT_CLOCK_SKEW (seconds in env); leeway on exp, nbf, iat

	RolesClaim      string // JWT_ROLES_CLAIM: claim holding one role name (a string)
	RolesArrayClaim string // JWT_ROLES_ARRAY_CLAIM: claim holding an array of role names

	// TenantClaim is JWT_TENANT_CLAIM: the claim naming the tenant (a UUID
	// string) a token acts for. In tenancy mode a Kafka login must carry
	// it, because the SASL user name is the client's own choice.
	TenantClaim string

	RoleAdmin     string // JWT_ROLE_ADMIN
	RoleReadWrite string // JWT_ROLE_READ_WRITE
	RoleReadOnly  string // JWT_ROLE_READ_ONLY
	RoleWriteOnly string // JWT_ROLE_WRITE_ONLY

	// SkipPaths is JWT_SKIP_PATHS: request paths that need no token, matched
	// exactly (no prefixes: the default list holds "/").
	SkipPaths []string
}

// DefaultConfig returns the spec defaults, with JWT disabled.
func DefaultConfig() Config {
	return Config{
		Algorithm:           DefaultAlgorithm,
		JWKSRefreshInterval: DefaultJWKSRefreshInterval,
		JWKSTimeout:         DefaultJWKSTimeout,
		ClockSkew:           DefaultClockSkew,
		RolesClaim:          DefaultRolesClaim,
		RolesArrayClaim:     DefaultRolesArrayClaim,
		TenantClaim:         DefaultTenantClaim,
		RoleAdmin:           DefaultRoleAdmin,
		RoleReadWrite:       DefaultRoleReadWrite,
		RoleReadOnly:        DefaultRoleReadOnly,
		RoleWriteOnly:       DefaultRoleWriteOnly,
		SkipPaths:           append([]string(nil), DefaultSkipPaths...),
	}
}

// ErrConfig is wrapped by every configuration error New returns; such an
// error should stop the boot.
var ErrConfig = errors.New("authn: invalid JWT configuration")

// normalize fills defaults and checks what can be checked without key
// material.
func (c Config) normalize() (Config, error) {
	def := DefaultConfig()
	fill := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	fill(&c.Algorithm, def.Algorithm)
	fill(&c.RolesClaim, def.RolesClaim)
	fill(&c.RolesArrayClaim, def.RolesArrayClaim)
	fill(&c.TenantClaim, def.TenantClaim)
	fill(&c.RoleAdmin, def.RoleAdmin)
	fill(&c.RoleReadWrite, def.RoleReadWrite)
	fill(&c.RoleReadOnly, def.RoleReadOnly)
	fill(&c.RoleWriteOnly, def.RoleWriteOnly)
	if c.JWKSRefreshInterval == 0 {
		c.JWKSRefreshInterval = def.JWKSRefreshInterval
	}
	if c.JWKSTimeout == 0 {
		c.JWKSTimeout = def.JWKSTimeout
	}
	if c.SkipPaths == nil {
		c.SkipPaths = def.SkipPaths
	}

	alg, ok := canonicalAlg(c.Algorithm)
	if !ok {
		return c, fmt.Errorf("%w: JWT_ALGORITHM=%q is not one of HS256, HS384, HS512, RS256, RS384, RS512, EdDSA, auto",
			ErrConfig, c.Algorithm)
	}
	c.Algorithm = alg
	for name, d := range map[string]time.Duration{
		"JWT_JWKS_REFRESH_INTERVAL": c.JWKSRefreshInterval,
		"JWT_JWKS_TIMEOUT_MS":       c.JWKSTimeout,
		"JWT_CLOCK_SKEW":            c.ClockSkew,
	} {
		if d < 0 {
			return c, fmt.Errorf("%w: %s is negative", ErrConfig, name)
		}
	}
	seen := map[string]string{}
	for _, r := range []struct{ env, name string }{
		{"JWT_ROLE_ADMIN", c.RoleAdmin}, {"JWT_ROLE_READ_WRITE", c.RoleReadWrite},
		{"JWT_ROLE_READ_ONLY", c.RoleReadOnly}, {"JWT_ROLE_WRITE_ONLY", c.RoleWriteOnly},
	} {
		if other, dup := seen[r.name]; dup {
			return c, fmt.Errorf("%w: %s and %s both name the role %q", ErrConfig, other, r.env, r.name)
		}
		seen[r.name] = r.env
	}
	if c.JWKSURL != "" {
		u, err := url.Parse(c.JWKSURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return c, fmt.Errorf("%w: JWT_JWKS_URL must be an http(s) URL", ErrConfig)
		}
	}
	return c, nil
}

func canonicalAlg(s string) (string, bool) {
	for _, a := range []string{AlgHS256, AlgHS384, AlgHS512, AlgRS256, AlgRS384, AlgRS512, AlgEdDSA, AlgAuto} {
		if strings.EqualFold(s, a) {
			return a, true
		}
	}
	return "", false
}

// RedactURL drops the parts of a URL that may carry credentials (user info,
// query, fragment) for log lines and `queen config`.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<invalid>"
	}
	out := u.Scheme + "://" + u.Host + u.EscapedPath()
	if u.User != nil {
		out = u.Scheme + "://***@" + u.Host + u.EscapedPath()
	}
	if u.RawQuery != "" {
		out += "?***"
	}
	return out
}
