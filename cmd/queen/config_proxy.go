package main

import (
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/queen-mq/queen/tenancy/proxy"
)

// ProxyConfig is the embedded proxy's part of Config (spec §6, §8.5).
type ProxyConfig struct {
	// Embedded is QUEEN_PROXY_EMBEDDED: run the proxy in this process.
	Embedded bool
	// BadDefaultRole is a QUEEN_PROXY_DEFAULT_ROLE that names no role,
	// replaced by viewer (logged at boot).
	BadDefaultRole string
	// OwnPort says QUEEN_PROXY_PORT is set: the proxy listens there and
	// PORT stays the raw broker port. Unset, the proxy fronts PORT.
	OwnPort bool
	Proxy   proxy.Config
}

// proxyConfig reads QUEEN_PROXY_* and QUEEN_TLS_*. brokerAddr is PORT's
// listen address; cluster says the node is one of several, which needs a
// broker port the proxy is not in front of.
func (e *env) proxyConfig(bind, brokerAddr string, cluster bool, maxBody int, nodeID uint64) ProxyConfig {
	c := ProxyConfig{Embedded: e.bool("QUEEN_PROXY_EMBEDDED", false)}
	port := e.str("QUEEN_PROXY_PORT", "")
	p := proxy.Config{
		TLSCert:        e.str("QUEEN_TLS_CERT", ""),
		TLSKey:         e.str("QUEEN_TLS_KEY", ""),
		JWTSecret:      e.lookup("QUEEN_PROXY_JWT_SECRET"),
		CPToken:        e.lookup("QUEEN_PROXY_CP_TOKEN"),
		SpoolDir:       e.str("QUEEN_PROXY_SPOOL_DIR", "proxy-spool"),
		DefaultCluster: strings.ToLower(e.str("QUEEN_PROXY_DEFAULT_CLUSTER", "")),
		TenantHeader:   e.bool("QUEEN_PROXY_TENANT_HEADER", true),
		InvalPoll:      e.millis("QUEEN_PROXY_INVAL_POLL_MS", time.Second, 50*time.Millisecond, time.Hour),
		StaleGrace:     e.millis("QUEEN_PROXY_STALE_GRACE_MS", 10*time.Minute, 0, 24*time.Hour),
		Enforce:        e.bool("QUEEN_PROXY_ENFORCE", false),
		MeterFlush:     e.millis("QUEEN_PROXY_METER_FLUSH_MS", 15*time.Second, 100*time.Millisecond, time.Hour),
		UsageKeep:      time.Duration(e.int("QUEEN_PROXY_USAGE_KEEP_DAYS", 90, 1, 3650)) * 24 * time.Hour,
		Bootstrap: proxy.Bootstrap{
			Tenant:   strings.ToLower(e.str("QUEEN_PROXY_BOOTSTRAP_TENANT", "")),
			APIKey:   e.lookup("QUEEN_PROXY_BOOTSTRAP_API_KEY"),
			Plan:     e.str("QUEEN_PROXY_BOOTSTRAP_PLAN", "dev"),
			Email:    e.str("QUEEN_PROXY_BOOTSTRAP_EMAIL", "admin@localhost"),
			Password: e.lookup("QUEEN_PROXY_BOOTSTRAP_PASSWORD"),
		},
		OperatorEnabled: e.bool("QUEEN_PROXY_OPERATOR_ENABLED", false),
		MaxBodyBytes:    maxBody,
		NodeID:          nodeID,
	}
	p.OAuth = proxy.OAuthConfig{
		Google: proxy.OAuthProvider{ClientID: e.str("GOOGLE_CLIENT_ID", ""), ClientSecret: e.lookup("GOOGLE_CLIENT_SECRET"),
			AllowedDomains: csv(e.str("GOOGLE_ALLOWED_DOMAINS", ""))},
		GitHub:          proxy.OAuthProvider{ClientID: e.str("GITHUB_CLIENT_ID", ""), ClientSecret: e.lookup("GITHUB_CLIENT_SECRET")},
		PublicURL:       e.str("QUEEN_PROXY_PUBLIC_URL", ""),
		Autoprovision:   e.bool("QUEEN_PROXY_AUTOPROVISION", false),
		AutoprovisionTo: strings.ToLower(e.str("QUEEN_PROXY_AUTOPROVISION_TENANT", "")),
		DefaultRole:     e.str("QUEEN_PROXY_DEFAULT_ROLE", proxy.RoleViewer),
	}
	if !proxy.ValidRole(p.OAuth.DefaultRole) {
		c.BadDefaultRole, p.OAuth.DefaultRole = p.OAuth.DefaultRole, proxy.RoleViewer
	}
	if (p.OAuth.Google.ClientID != "" || p.OAuth.GitHub.ClientID != "") && p.OAuth.PublicURL == "" {
		e.fail("QUEEN_PROXY_PUBLIC_URL", "is required with GOOGLE_CLIENT_ID or GITHUB_CLIENT_ID: the sign-in callbacks need an address")
	}
	if p.OAuth.Autoprovision && p.OAuth.AutoprovisionTo == "" {
		e.fail("QUEEN_PROXY_AUTOPROVISION_TENANT", "is required with QUEEN_PROXY_AUTOPROVISION=true: the tenant new accounts join")
	}
	p.SharedHosts = csv(e.str("QUEEN_PROXY_SHARED_HOSTS", ""))
	if ops := e.lookup("QUEEN_PROXY_OPERATORS"); ops != "" || envSet(e, "QUEEN_PROXY_OPERATORS") {
		p.OperatorsSet = true
		for _, o := range strings.Split(ops, ",") {
			if o = strings.TrimSpace(o); o != "" {
				p.Operators = append(p.Operators, strings.ToLower(o))
			}
		}
	}
	if (p.TLSCert == "") != (p.TLSKey == "") {
		e.fail("QUEEN_TLS_CERT", "and QUEEN_TLS_KEY must be set together")
	}
	if k := p.Bootstrap.APIKey; k != "" && !proxy.ValidKey(k) {
		e.fail("QUEEN_PROXY_BOOTSTRAP_API_KEY", "must be qk_<env>_ followed by 43 base64url characters")
	}
	if p.Bootstrap.APIKey != "" && p.Bootstrap.Tenant == "" {
		e.fail("QUEEN_PROXY_BOOTSTRAP_API_KEY", "needs QUEEN_PROXY_BOOTSTRAP_TENANT: the key belongs to its cluster")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			e.fail("QUEEN_PROXY_PORT", "must be a port number, got %q", port)
		}
		c.OwnPort = true
		p.Addr = net.JoinHostPort(bind, port)
		if p.Addr == brokerAddr {
			e.fail("QUEEN_PROXY_PORT", "is PORT itself; leave it unset for the proxy to front PORT")
		}
	} else {
		p.Addr = brokerAddr
		if c.Embedded && cluster {
			e.fail("QUEEN_PROXY_PORT", "is required in a cluster: nodes talk to each other over PORT, "+
				"which the proxy would otherwise front (and it blocks /api/v1/system/*)")
		}
	}
	c.Proxy = p
	return c
}

// csv splits a comma-separated list, dropping blanks; lowercased, as
// hosts and domains are.
func csv(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.ToLower(strings.TrimSpace(s)); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// envSet reports whether a variable is set, even to "" (an empty
// QUEEN_PROXY_OPERATORS revokes every operator).
func envSet(e *env, name string) bool { return e.isSet != nil && e.isSet(name) }

// logProxy states where the proxy and the broker serve, with the boot
// line of the seed.
func logProxy(log *slog.Logger, c *ProxyConfig, brokerAddr string) {
	if !c.Embedded {
		log.Info("config: proxy", "embedded", false)
		return
	}
	p := &c.Proxy
	log.Info("config: proxy", "embedded", true, "addr", p.Addr, "own_port", c.OwnPort, "tls", p.TLSCert != "",
		"control_plane", p.CPToken != "", "sessions", p.JWTSecret != "", "enforce", p.Enforce,
		"default_cluster", orNone(p.DefaultCluster), "shared_hosts", len(p.SharedHosts), "tenant_header", p.TenantHeader,
		"inval_poll_ms", p.InvalPoll.Milliseconds(), "stale_grace_ms", p.StaleGrace.Milliseconds(),
		"meter_flush_ms", p.MeterFlush.Milliseconds(), "spool_dir", p.SpoolDir, "bootstrap_tenant", orNone(p.Bootstrap.Tenant),
		"operators_enabled", p.OperatorEnabled)
	if c.OwnPort {
		log.Info("boot: single binary: proxy in-process on its own port; the broker router serves PORT (internal)",
			"proxy", p.Addr, "broker", brokerAddr)
	} else {
		log.Info("boot: single binary: proxy in-process in front of PORT; the broker router is reached only through it",
			"proxy", p.Addr)
	}
	if c.BadDefaultRole != "" {
		log.Warn("config: QUEEN_PROXY_DEFAULT_ROLE names no role (admin, producer, consumer, viewer); using viewer",
			"value", c.BadDefaultRole)
	}
	log.Info("config: proxy_sign_in", "password", p.JWTSecret != "", "google", p.OAuth.Google.ClientID != "",
		"github", p.OAuth.GitHub.ClientID != "", "public_url", orNone(p.OAuth.PublicURL),
		"autoprovision", p.OAuth.Autoprovision, "autoprovision_tenant", orNone(p.OAuth.AutoprovisionTo),
		"default_role", p.OAuth.DefaultRole)
	if !p.TenantHeader {
		log.Warn("config: QUEEN_PROXY_TENANT_HEADER=false: every cluster uses the broker's default tenant and they share every queue")
	}
}
