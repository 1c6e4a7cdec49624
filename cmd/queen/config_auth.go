package main

import (
	"strings"
	"time"

	"github.com/queen-mq/queen/crypto/authn"
)

// authConfig reads spec §8.4's JWT variables.
func (e *env) authConfig() authn.Config {
	c := authn.DefaultConfig()
	c.Enabled = e.bool("JWT_ENABLED", false)
	c.Algorithm = e.str("JWT_ALGORITHM", c.Algorithm)
	c.Secret = e.lookup("JWT_SECRET")
	// PEM text in an env var often arrives with literal \n.
	c.PublicKeyPEM = strings.ReplaceAll(e.lookup("JWT_PUBLIC_KEY"), `\n`, "\n")
	c.JWKSURL = e.str("JWT_JWKS_URL", "")
	c.JWKSRefreshInterval = time.Duration(e.int("JWT_JWKS_REFRESH_INTERVAL", int(c.JWKSRefreshInterval/time.Second), 1, 1<<31-1)) * time.Second
	c.JWKSTimeout = e.millis("JWT_JWKS_TIMEOUT_MS", c.JWKSTimeout, time.Millisecond, time.Minute)
	c.Issuer = e.str("JWT_ISSUER", "")
	c.Audience = e.str("JWT_AUDIENCE", "")
	c.ClockSkew = time.Duration(e.int("JWT_CLOCK_SKEW", int(c.ClockSkew/time.Second), 0, 1<<20)) * time.Second
	c.RolesClaim = e.str("JWT_ROLES_CLAIM", c.RolesClaim)
	c.RolesArrayClaim = e.str("JWT_ROLES_ARRAY_CLAIM", c.RolesArrayClaim)
	c.TenantClaim = e.str("JWT_TENANT_CLAIM", c.TenantClaim)
	c.RoleAdmin = e.str("JWT_ROLE_ADMIN", c.RoleAdmin)
	c.RoleReadWrite = e.str("JWT_ROLE_READ_WRITE", c.RoleReadWrite)
	c.RoleReadOnly = e.str("JWT_ROLE_READ_ONLY", c.RoleReadOnly)
	c.RoleWriteOnly = e.str("JWT_ROLE_WRITE_ONLY", c.RoleWriteOnly)
	defaultSkip := strings.Join(c.SkipPaths, ",")
	if v := e.str("JWT_SKIP_PATHS", defaultSkip); v != defaultSkip {
		c.SkipPaths = nil
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				c.SkipPaths = append(c.SkipPaths, p)
			}
		}
	}
	return c
}

// tenancyConfig reads QUEEN_TENANCY_HEADER, which the node refuses to run
// unless the operator asserts (QUEEN_KV_TRUSTED_PROXY=1) that a proxy in
// front sets the header and strips clients' copies (spec §5.4).
func (e *env) tenancyConfig() bool {
	on := e.bool("QUEEN_TENANCY_HEADER", false)
	proxy := e.str("QUEEN_KV_TRUSTED_PROXY", "")
	if on && proxy != "1" {
		e.fail("QUEEN_TENANCY_HEADER", "scopes requests by the x-queen-tenant header, which any client can set: "+
			"run it only behind a proxy that sets the header, and say so with QUEEN_KV_TRUSTED_PROXY=1")
	}
	return on
}
