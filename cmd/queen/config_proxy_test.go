package main

import (
	"strings"
	"testing"
)

func TestProxyConfig(t *testing.T) {
	key := "qk_live_" + strings.Repeat("Ab_-", 10) + "xyz"
	c, err := loadConfig(lookup(map[string]string{"QUEEN_PROXY_EMBEDDED": "true", "QUEEN_PROXY_PORT": "6711",
		"QUEEN_PROXY_BOOTSTRAP_TENANT": "Acme", "QUEEN_PROXY_BOOTSTRAP_API_KEY": key, "QUEEN_PROXY_SHARED_HOSTS": "api.example.com, b.example.com"}))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Proxy.Proxy
	if !c.Proxy.Embedded || !c.Proxy.OwnPort || p.Addr != "0.0.0.0:6711" || c.HTTP.Addr != "0.0.0.0:6632" ||
		p.Bootstrap.Tenant != "acme" || p.Bootstrap.Plan != "dev" || p.Bootstrap.Email != "admin@localhost" ||
		!p.TenantHeader || p.Enforce || p.InvalPoll.Milliseconds() != 1000 || p.StaleGrace.Milliseconds() != 600000 ||
		p.MeterFlush.Milliseconds() != 15000 || len(p.SharedHosts) != 2 || p.OperatorsSet {
		t.Fatalf("proxy config %+v", c.Proxy)
	}
	if c.Proxy.Proxy.OAuth.DefaultRole != "viewer" {
		t.Fatalf("default role %q", c.Proxy.Proxy.OAuth.DefaultRole)
	}
	c, err = loadConfig(lookup(map[string]string{"QUEEN_PROXY_DEFAULT_ROLE": "overlord"}))
	if err != nil || c.Proxy.Proxy.OAuth.DefaultRole != "viewer" || c.Proxy.BadDefaultRole != "overlord" {
		t.Fatalf("an invalid default role: %+v %v", c.Proxy, err)
	}
	// Without QUEEN_PROXY_PORT the proxy fronts PORT.
	c, err = loadConfig(lookup(map[string]string{"QUEEN_PROXY_EMBEDDED": "true"}))
	if err != nil || c.Proxy.OwnPort || c.Proxy.Proxy.Addr != c.HTTP.Addr {
		t.Fatalf("fronting PORT: %+v %v", c.Proxy, err)
	}
	// An empty operator list is the whole truth too: it revokes everyone.
	e := &env{get: lookup(map[string]string{"QUEEN_PROXY_OPERATORS": ""}), isSet: func(n string) bool { return n == "QUEEN_PROXY_OPERATORS" }}
	if c, err := readConfig(e); err != nil || !c.Proxy.Proxy.OperatorsSet || len(c.Proxy.Proxy.Operators) != 0 {
		t.Fatalf("empty operator list: %+v %v", c.Proxy.Proxy, err)
	}
}

func TestProxyConfigRefusals(t *testing.T) {
	cluster := "1=127.0.0.1:7400/127.0.0.1:6632,2=127.0.0.2:7400/127.0.0.2:6632"
	for name, env := range map[string]map[string]string{
		"QUEEN_PROXY_PORT": {"QUEEN_PROXY_EMBEDDED": "true", "QUEEN_RAFT_PEERS": cluster, "QUEEN_KAFKA_ADVERTISED_ADDR": "h:9092"},
		"QUEEN_TLS_CERT":   {"QUEEN_PROXY_EMBEDDED": "true", "QUEEN_TLS_CERT": "/x.pem"},
		"QUEEN_PROXY_BOOTSTRAP_API_KEY": {"QUEEN_PROXY_EMBEDDED": "true", "QUEEN_PROXY_BOOTSTRAP_TENANT": "acme",
			"QUEEN_PROXY_BOOTSTRAP_API_KEY": "not-a-key"},
		"QUEEN_PROXY_PUBLIC_URL":           {"QUEEN_PROXY_EMBEDDED": "true", "GOOGLE_CLIENT_ID": "g"},
		"QUEEN_PROXY_AUTOPROVISION_TENANT": {"QUEEN_PROXY_EMBEDDED": "true", "QUEEN_PROXY_AUTOPROVISION": "true"},
	} {
		if _, err := loadConfig(lookup(env)); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: %v, want an error naming %s", env, err, name)
		}
	}
}
