package main

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/crypto/nodetls/nodetlstest"
	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/storage"
)

func lookup(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func TestDefaultGroupsSpreadEvenlyOverTheCluster(t *testing.T) {
	for cpus := 1; cpus <= 64; cpus++ {
		for nodes := 1; nodes <= 7; nodes++ {
			g := raftgroups.DefaultGroups(nodes, cpus)
			if g < 2 || g > 16 || g%nodes != 0 || g < min(cpus, 16/nodes*nodes) {
				t.Fatalf("%d cpus, %d nodes: %d groups", cpus, nodes, g)
			}
		}
	}
	if g := raftgroups.DefaultGroups(3, 2); g != 3 {
		t.Fatalf("3 nodes of 2 cores: %d groups, want one leader each", g)
	}
}

func TestDefaultsStartOneNode(t *testing.T) {
	c, err := loadConfig(lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.Addr != "0.0.0.0:6632" || c.Raft.Dir != "./queen-data" || c.Raft.ListenAddr != "0.0.0.0:7400" || c.Raft.Groups != defaultGroups(1) || c.Raft.Groups < 2 {
		t.Fatalf("defaults: %+v %+v", c.HTTP, c.Raft)
	}
	if len(c.Raft.Peers) != 1 || c.Raft.Peers[0].RaftAddr != "127.0.0.1:7400" || c.Raft.Peers[0].ID != 1 {
		t.Fatalf("single node peers: %+v", c.Raft.Peers)
	}
	if c.Raft.MaxClockSkew != 500*time.Millisecond || c.Raft.ClockTestOffset != 0 {
		t.Fatalf("clock: max skew %v, test offset %v", c.Raft.MaxClockSkew, c.Raft.ClockTestOffset)
	}
	if c.Raft.DiskHighPct != 85 || c.Raft.DiskLowPct != 80 {
		t.Fatalf("storage_full watermarks %v/%v", c.Raft.DiskHighPct, c.Raft.DiskLowPct)
	}
	if c.Raft.ElectionRTT*c.Raft.RTTMillisecond != 150 || c.Raft.HeartbeatRTT*c.Raft.RTTMillisecond != 50 {
		t.Fatalf("single node timings: %d/%d ticks of %d ms", c.Raft.ElectionRTT, c.Raft.HeartbeatRTT, c.Raft.RTTMillisecond)
	}
}

func TestClusterConfig(t *testing.T) {
	c, err := loadConfig(lookup(map[string]string{
		"QUEEN_RAFT_NODE_ID":          "2",
		"QUEEN_RAFT_PEERS":            "1=h1:7400/h1:6632, 2=h2:7400/h2:6632,3=h3:7400/h3:6632",
		"QUEEN_RAFT_GROUPS":           "4",
		"QUEEN_KAFKA_ADVERTISED_ADDR": "h2:9092",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Raft.Peers) != 3 || c.Raft.Peers[1].HTTPAddr != "h2:6632" || c.Placement.Groups() != 4 {
		t.Fatalf("%+v", c.Raft.Peers)
	}
	if c.Raft.ElectionRTT*c.Raft.RTTMillisecond != 1000 || c.Raft.HeartbeatRTT*c.Raft.RTTMillisecond != 100 {
		t.Fatalf("cluster timings: %d/%d ticks of %d ms", c.Raft.ElectionRTT, c.Raft.HeartbeatRTT, c.Raft.RTTMillisecond)
	}
}

func TestClockSettings(t *testing.T) {
	c, err := loadConfig(lookup(map[string]string{"QUEEN_RAFT_MAX_CLOCK_SKEW_MS": "250", "QUEEN_TEST_CLOCK_OFFSET_MS": "-3600000"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Raft.MaxClockSkew != 250*time.Millisecond || c.Raft.ClockTestOffset != -time.Hour {
		t.Fatalf("max skew %v, test offset %v", c.Raft.MaxClockSkew, c.Raft.ClockTestOffset)
	}
}

func TestBadConfigNamesTheVariable(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"PORT":                             {"PORT": "http"},
		"QUEEN_RAFT_GROUPS":                {"QUEEN_RAFT_GROUPS": "65"},
		"QUEEN_RAFT_TOKEN_ACCEPT":          {"QUEEN_RAFT_TOKEN_ACCEPT": "old"},
		"QUEEN_RAFT_PEERS":                 {"QUEEN_RAFT_PEERS": "1=h1:7400/h1:6632", "QUEEN_RAFT_NODE_ID": "2"},
		"QUEEN_LOG_JSON":                   {"QUEEN_LOG_JSON": "maybe"},
		"QUEEN_RAFT_LISTEN":                {"QUEEN_RAFT_LISTEN": "7400"},
		"LOG_LEVEL":                        {"LOG_LEVEL": "loud"},
		"LOG_FORMAT":                       {"LOG_FORMAT": "logfmt"},
		"QUEEN_METRICS_LAG_PARTITIONS_MAX": {"QUEEN_METRICS_LAG_PARTITIONS_MAX": "0"},
		"QUEEN_TENANT_GROUPS":              {"QUEEN_TENANT_GROUPS": "x=1"},
		"QUEEN_KAFKA_ADVERTISED_ADDR":      {"QUEEN_RAFT_PEERS": "1=h1:7400/h1:6632,2=h2:7400/h2:6632"},
		"QUEEN_KAFKA_TLS_CERT":             {"QUEEN_KAFKA_TLS_CERT": "/nonexistent.pem"},
		"QUEEN_KAFKA_SASL":                 {"QUEEN_KAFKA_SASL": "scram"},
		"QUEEN_KAFKA_SASL_USERS":           {"QUEEN_KAFKA_SASL": "plain,scram-sha-512"},
		"QUEEN_TENANCY_HEADER":             {"QUEEN_TENANCY_HEADER": "true"},
		"JWT_ENABLED":                      {"JWT_ENABLED": "sometimes"},
		"QUEEN_RAFT_DISK_HIGH_PCT":         {"QUEEN_RAFT_DISK_HIGH_PCT": "101"},
		"QUEEN_RAFT_DISK_LOW_PCT":          {"QUEEN_RAFT_DISK_HIGH_PCT": "70", "QUEEN_RAFT_DISK_LOW_PCT": "75"},
		// dragonboat refuses proposals over 256 MiB
		"QUEEN_RAFT_ENTRY_MAX_BYTES":                  {"QUEEN_RAFT_ENTRY_MAX_BYTES": "536870912"},
		"QUEEN_RAFT_MAX_CLOCK_SKEW_MS":                {"QUEEN_RAFT_MAX_CLOCK_SKEW_MS": "0"},
		"PARTITION_CLEANUP_DAYS":                      {"PARTITION_CLEANUP_DAYS": "0"},
		"QUEEN_PARTITION_CLEANUP_ENABLED":             {"QUEEN_PARTITION_CLEANUP_ENABLED": "later"},
		"QUEEN_TEST_CLOCK_OFFSET_MS":                  {"QUEEN_TEST_CLOCK_OFFSET_MS": "an hour"},
		"QUEEN_KAFKA_MAX_CONNECTIONS_PER_IP":          {"QUEEN_KAFKA_MAX_CONNECTIONS_PER_IP": "0"},
		"QUEEN_KAFKA_MAX_UNAUTHENTICATED_CONNECTIONS": {"QUEEN_KAFKA_MAX_UNAUTHENTICATED_CONNECTIONS": "-1"},
		"QUEEN_KAFKA_LOGIN_TIMEOUT_MS":                {"QUEEN_KAFKA_LOGIN_TIMEOUT_MS": "10"},
		"QUEEN_HTTP_MAX_BUFFERED_BYTES":               {"QUEEN_MAX_BODY_BYTES": "67108864", "QUEEN_HTTP_MAX_BUFFERED_BYTES": "1048576"},
		"QUEEN_HTTP_MAX_CONNS_PER_IP":                 {"QUEEN_HTTP_MAX_CONNS_PER_IP": "-1"},
		"QUEEN_TENANT_MAX_INFLIGHT_PUSH_ITEMS":        {"QUEEN_MAX_PUSH_ITEMS": "500", "QUEEN_TENANT_MAX_INFLIGHT_PUSH_ITEMS": "100"},
		"QUEEN_KAFKA_MAX_PARTITIONS_PER_REQUEST":      {"QUEEN_KAFKA_MAX_PARTITIONS_PER_REQUEST": "0"},
		"QUEEN_KAFKA_TENANT_MAX_INFLIGHT_BYTES":       {"QUEEN_KAFKA_TENANT_MAX_INFLIGHT_BYTES": "1"},
		"QUEEN_MEMORY_LIMIT_MB":                       {"QUEEN_MEMORY_LIMIT_MB": "-1"},
	} {
		_, err := loadConfig(lookup(env))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v does not name the variable", name, err)
		}
	}
}

// TestKafkaConnectionLimits: the limits on connections before and around
// a login come from the environment, with defaults that hold without it.
func TestKafkaConnectionLimits(t *testing.T) {
	c, err := loadConfig(lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	l := c.Kafka.Broker.Listener
	if l.MaxConnectionsPerIP != kafka.DefaultMaxConnectionsPerIP || l.MaxUnauthenticatedConnections != kafka.DefaultMaxUnauthenticatedConnections ||
		l.LoginTimeout != kafka.DefaultLoginTimeout {
		t.Fatalf("defaults: %+v", l)
	}
	c, err = loadConfig(lookup(map[string]string{"QUEEN_KAFKA_MAX_CONNECTIONS_PER_IP": "8",
		"QUEEN_KAFKA_MAX_UNAUTHENTICATED_CONNECTIONS": "16", "QUEEN_KAFKA_LOGIN_TIMEOUT_MS": "2500"}))
	if err != nil {
		t.Fatal(err)
	}
	l = c.Kafka.Broker.Listener
	if l.MaxConnectionsPerIP != 8 || l.MaxUnauthenticatedConnections != 16 || l.LoginTimeout != 2500*time.Millisecond {
		t.Fatalf("set: %+v", l)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:7400": true, "localhost:7400": true, "[::1]:7400": true,
		"0.0.0.0:7400": false, "10.0.0.1:7400": false, ":7400": false} {
		if got := loopbackOnly(addr); got != want {
			t.Errorf("%s: %v", addr, got)
		}
	}
}

func TestNodeTLSConfig(t *testing.T) {
	dir := t.TempDir()
	ca, err := nodetlstest.NewCA(dir, "cluster")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.Issue(dir, nodetlstest.Leaf{Name: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := loadConfig(lookup(nil))
	if err != nil || c.Raft.TLS != nil {
		t.Fatalf("unset: %v %v", c.Raft.TLS.Mode(), err)
	}
	c, err = loadConfig(lookup(map[string]string{"QUEEN_RAFT_TLS_CERT": cert, "QUEEN_RAFT_TLS_KEY": key, "QUEEN_RAFT_TLS_CA": ca.CertPEM}))
	if err != nil || c.Raft.TLS.Mode() != "mutual" {
		t.Fatalf("mutual: %v %v", c.Raft.TLS.Mode(), err)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"QUEEN_RAFT_TLS_CERT": cert}, "QUEEN_RAFT_TLS_CERT: is set without QUEEN_RAFT_TLS_KEY"},
		{map[string]string{"QUEEN_RAFT_TLS_CERT": cert, "QUEEN_RAFT_TLS_KEY": dir + "/nope.pem"}, "QUEEN_RAFT_TLS_CERT: cannot load"},
		{map[string]string{"QUEEN_RAFT_TLS_CERT": cert, "QUEEN_RAFT_TLS_KEY": key, "QUEEN_RAFT_TLS_CA": dir + "/nope.pem"}, "QUEEN_RAFT_TLS_CA:"},
	} {
		if _, err := loadConfig(lookup(tc.env)); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Fatalf("%v: error %v, want %q", tc.env, err, tc.want)
		}
	}
}

// TestJWTWithoutKafkaSASLNeedsAnOptIn: broker JWT protects HTTP only; a
// node that turns it on but leaves the Kafka port without SASL would serve
// fetch and DeleteTopics to anyone, so it refuses to boot unless the
// operator says the open Kafka port is intended, and then warns.
func TestJWTWithoutKafkaSASLNeedsAnOptIn(t *testing.T) {
	jwtOn := map[string]string{"JWT_ENABLED": "true", "JWT_SECRET": "a-secret-long-enough-for-hs256-tokens", "QUEEN_RAFT_TOKEN": "s3cret"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range jwtOn {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	if _, err := loadConfig(lookup(jwtOn)); err == nil || !strings.Contains(err.Error(), "QUEEN_KAFKA_SASL") {
		t.Fatalf("JWT on, Kafka open: %v, want an error naming QUEEN_KAFKA_SASL", err)
	}
	if _, err := loadConfig(lookup(with(map[string]string{"QUEEN_KAFKA_SASL": "plain"}))); err != nil {
		t.Fatalf("JWT and SASL: %v", err)
	}
	optInWarns(t, with(map[string]string{"QUEEN_KAFKA_ALLOW_ANONYMOUS": "true"}), "QUEEN_KAFKA_ALLOW_ANONYMOUS")
	// Without JWT everything is open by default (spec §5.1): no opt-in.
	if _, err := loadConfig(lookup(nil)); err != nil {
		t.Fatal(err)
	}
}

// optInWarns: env, which sets the opt-in variable, boots, and the boot
// log warns naming it.
func optInWarns(t *testing.T, env map[string]string, variable string) {
	t.Helper()
	c, err := loadConfig(lookup(env))
	if err != nil {
		t.Fatalf("JWT on with %s: %v", variable, err)
	}
	var logs bytes.Buffer
	logConfig(slog.New(slog.NewTextHandler(&logs, nil)), &c)
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), variable) {
		t.Errorf("no boot warning naming %s:\n%s", variable, logs.String())
	}
}

// TestJWTWithoutRaftTokenNeedsLoopbackOrAnOptIn: without QUEEN_RAFT_TOKEN
// the raft port (0.0.0.0:7400 by default) takes votes, appends and
// snapshots from anyone, and serves /node/v1/ — membership, and ephemeral
// relays that pop any tenant's queue by header — with no credential. A
// node whose HTTP API needs a broker JWT refuses to boot so, naming
// QUEEN_RAFT_TOKEN, unless the raft listener is loopback only or
// QUEEN_RAFT_ALLOW_ANONYMOUS=true says it is intended (then it warns).
func TestJWTWithoutRaftTokenNeedsLoopbackOrAnOptIn(t *testing.T) {
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{"JWT_ENABLED": "true", "JWT_SECRET": "a-secret-long-enough-for-hs256-tokens",
			"QUEEN_KAFKA_SASL": "plain"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, listen := range []string{"", "0.0.0.0:7400", ":7400", "10.0.0.5:7400", "[::]:7400"} {
		_, err := loadConfig(lookup(with(map[string]string{"QUEEN_RAFT_LISTEN": listen})))
		if err == nil || !strings.HasPrefix(err.Error(), "QUEEN_RAFT_TOKEN") || !strings.Contains(err.Error(), "QUEEN_RAFT_ALLOW_ANONYMOUS") {
			t.Errorf("JWT on, no raft token, raft on %q: %v, want a refusal naming QUEEN_RAFT_TOKEN and the opt-in", listen, err)
		}
	}
	for _, listen := range []string{"127.0.0.1:7400", "localhost:7400", "[::1]:7400"} {
		if _, err := loadConfig(lookup(with(map[string]string{"QUEEN_RAFT_LISTEN": listen}))); err != nil {
			t.Errorf("JWT on, no raft token, raft on loopback %s: %v", listen, err)
		}
	}
	if _, err := loadConfig(lookup(with(map[string]string{"QUEEN_RAFT_TOKEN": "s3cret"}))); err != nil {
		t.Errorf("JWT on with a raft token: %v", err)
	}
	optInWarns(t, with(map[string]string{"QUEEN_RAFT_ALLOW_ANONYMOUS": "true"}), "QUEEN_RAFT_ALLOW_ANONYMOUS")
	if _, err := loadConfig(lookup(map[string]string{"QUEEN_RAFT_ALLOW_ANONYMOUS": "maybe"})); err == nil ||
		!strings.Contains(err.Error(), "QUEEN_RAFT_ALLOW_ANONYMOUS") {
		t.Errorf("a malformed opt-in: %v", err)
	}
	// Without JWT everything is open by default (spec §5.1): no opt-in.
	if _, err := loadConfig(lookup(nil)); err != nil {
		t.Fatal(err)
	}
}

// TestPprofStaysLocalOrNeedsAToken: the profiler serves heap and goroutine
// dumps (payloads, tokens in flight) and CPU profiles on demand. It may
// listen on loopback without more; anywhere else only with
// QUEEN_PPROF_TOKEN, which every request must then carry.
func TestPprofStaysLocalOrNeedsAToken(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "10.0.0.5:6060"} {
		_, err := loadConfig(lookup(map[string]string{"QUEEN_PPROF_ADDR": addr}))
		if err == nil || !strings.Contains(err.Error(), "QUEEN_PPROF_TOKEN") {
			t.Errorf("pprof on %s without a token: %v, want an error naming QUEEN_PPROF_TOKEN", addr, err)
		}
	}
	for _, env := range []map[string]string{
		{"QUEEN_PPROF_ADDR": "127.0.0.1:6060"},
		{"QUEEN_PPROF_ADDR": "localhost:6060"},
		{"QUEEN_PPROF_ADDR": "0.0.0.0:6060", "QUEEN_PPROF_TOKEN": "a-long-random-profiling-token"},
	} {
		if _, err := loadConfig(lookup(env)); err != nil {
			t.Errorf("%v: %v", env, err)
		}
	}
}

func TestPprofTokenIsRequired(t *testing.T) {
	h := pprofHandler("a-long-random-profiling-token")
	for tok, want := range map[string]int{"": 401, "wrong": 401, "a-long-random-profiling-token": 200} {
		req := httptest.NewRequest("GET", "/debug/pprof/", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("token %q: %d, want %d", tok, rec.Code, want)
		}
	}
	rec := httptest.NewRecorder()
	pprofHandler("").ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/", nil))
	if rec.Code != 200 {
		t.Fatalf("loopback profiler without a token: %d", rec.Code)
	}
}

// The ephemeral variables have the spec's §8.3 defaults, take the raft
// peers, and stop the boot when out of range.
func TestEphemeralConfig(t *testing.T) {
	c, err := loadConfig(lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	e := c.HTTP.Ephemeral
	if e.Store.MaxBytes != 268435456 || e.Store.Defaults.MaxBytes != 16777216 || e.Store.Defaults.MaxLength != 10000 ||
		e.Store.Defaults.Lease != 30*time.Second || e.Store.Defaults.RetryLimit != 5 || e.Store.ImplicitIdle != 300*time.Second ||
		e.MemberTTL != 4*time.Second || e.Store.Defaults.Policy != "reject" {
		t.Fatalf("defaults %+v", e)
	}
	c, err = loadConfig(lookup(map[string]string{"QUEEN_RAFT_NODE_ID": "2", "QUEEN_RAFT_TOKEN": "tk",
		"QUEEN_RAFT_PEERS":          "1=127.0.0.1:7400/127.0.0.1:6632,2=127.0.0.1:7500/127.0.0.1:6633",
		"QUEEN_EPHEMERAL_MAX_BYTES": "1048576", "QUEEN_EPHEMERAL_MEMBER_TTL_MS": "1000",
		"QUEEN_KAFKA_ADVERTISED_ADDR": "127.0.0.1:9092"}))
	if err != nil {
		t.Fatal(err)
	}
	e = c.HTTP.Ephemeral
	if e.NodeID != 2 || len(e.Peers) != 2 || e.Peers[1] != 2 ||
		e.Store.MaxBytes != 1<<20 || e.MemberTTL != time.Second {
		t.Fatalf("set %+v", e)
	}
	if e.RequireGrant {
		t.Fatal("a grant is required without the tenancy header")
	}
	// QUEEN_EPHEMERAL_REQUIRE_GRANT follows QUEEN_TENANCY_HEADER unless set.
	tenancy := map[string]string{"QUEEN_TENANCY_HEADER": "true", "QUEEN_KV_TRUSTED_PROXY": "1"}
	if c, err = loadConfig(lookup(tenancy)); err != nil || !c.HTTP.Ephemeral.RequireGrant {
		t.Fatalf("tenancy header without a grant requirement: %v", err)
	}
	tenancy["QUEEN_EPHEMERAL_REQUIRE_GRANT"] = "false"
	if c, err = loadConfig(lookup(tenancy)); err != nil || c.HTTP.Ephemeral.RequireGrant {
		t.Fatalf("QUEEN_EPHEMERAL_REQUIRE_GRANT=false not taken: %v", err)
	}
	if _, err := loadConfig(lookup(map[string]string{"QUEEN_EPHEMERAL_REQUIRE_GRANT": "maybe"})); err == nil ||
		!strings.Contains(err.Error(), "QUEEN_EPHEMERAL_REQUIRE_GRANT") {
		t.Fatalf("a bad QUEEN_EPHEMERAL_REQUIRE_GRANT: %v", err)
	}
	for _, bad := range []string{"QUEEN_EPHEMERAL_MAX_BYTES", "QUEEN_EPHEMERAL_LEASE_S", "QUEEN_EPHEMERAL_MEMBER_TTL_MS"} {
		if _, err := loadConfig(lookup(map[string]string{bad: "0"})); err == nil || !strings.Contains(err.Error(), bad) {
			t.Fatalf("%s=0: %v", bad, err)
		}
	}
}

func TestMembershipSettings(t *testing.T) {
	c, err := loadConfig(lookup(map[string]string{"QUEEN_RAFT_NODE_ID": "4", "QUEEN_RAFT_JOIN": "true",
		"QUEEN_RAFT_PEERS": "4=h4:7400/h4:6632", "QUEEN_RAFT_PROMOTE_MAX_LAG": "50", "QUEEN_KAFKA_ADVERTISED_ADDR": "h4:9092"}))
	if err != nil {
		t.Fatal(err)
	}
	// A joiner lists only itself but is a cluster member: cluster timings.
	if !c.Raft.Join || c.HTTP.PromoteMaxLag != 50 || c.Raft.HeartbeatRTT*c.Raft.RTTMillisecond != 100 {
		t.Fatalf("%+v %+v", c.Raft, c.HTTP)
	}
	_, err = loadConfig(lookup(map[string]string{"QUEEN_RAFT_JOIN": "true", "QUEEN_RAFT_FORCE_RECOVER": "true"}))
	if err == nil || !strings.Contains(err.Error(), "QUEEN_RAFT_FORCE_RECOVER") {
		t.Fatalf("join with force recover: %v", err)
	}
}

// TestKafkaSASLMechanisms: QUEEN_KAFKA_SASL lists mechanisms; OAUTHBEARER
// tokens are broker JWTs, so it needs JWT_ENABLED.
func TestKafkaSASLMechanisms(t *testing.T) {
	cfg, err := loadConfig(lookup(map[string]string{"QUEEN_KAFKA_SASL": "plain, scram-sha-256", "QUEEN_KAFKA_SASL_USERS": "u:p"}))
	if err != nil || !cfg.Kafka.SASLPlain || !cfg.Kafka.SASLScram || cfg.Kafka.SASLBearer || cfg.Kafka.SASL != "plain,scram-sha-256" {
		t.Fatalf("%v %+v", err, cfg.Kafka)
	}
	if _, err := loadConfig(lookup(map[string]string{"QUEEN_KAFKA_SASL": "oauthbearer"})); err == nil || !strings.Contains(err.Error(), "JWT_ENABLED") {
		t.Fatalf("OAUTHBEARER without broker JWT: %v", err)
	}
}

// TestLogSettings: LOG_FORMAT picks the handler, QUEEN_LOG_JSON stays its
// alias, and dragonboat's own lines stay at WARN unless the node logs at
// debug.
func TestLogSettings(t *testing.T) {
	for _, c := range []struct {
		env        map[string]string
		json       bool
		level      slog.Level
		dragonboat slog.Level
	}{
		{nil, false, slog.LevelInfo, slog.LevelWarn},
		{map[string]string{"LOG_FORMAT": "json"}, true, slog.LevelInfo, slog.LevelWarn},
		{map[string]string{"LOG_FORMAT": "TEXT"}, false, slog.LevelInfo, slog.LevelWarn},
		{map[string]string{"QUEEN_LOG_JSON": "true"}, true, slog.LevelInfo, slog.LevelWarn},
		{map[string]string{"QUEEN_LOG_JSON": "true", "LOG_FORMAT": "json"}, true, slog.LevelInfo, slog.LevelWarn},
		{map[string]string{"LOG_LEVEL": "debug"}, false, slog.LevelDebug, slog.LevelDebug},
		{map[string]string{"LOG_LEVEL": "error"}, false, slog.LevelError, slog.LevelError},
		{map[string]string{"RUST_LOG": "warn"}, false, slog.LevelWarn, slog.LevelWarn},
	} {
		cfg, err := loadConfig(lookup(c.env))
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if cfg.LogJSON != c.json || cfg.LogLevel != c.level || cfg.Raft.DragonboatLogLevel != c.dragonboat {
			t.Errorf("%v: json %v level %v dragonboat %v, want %v %v %v", c.env, cfg.LogJSON, cfg.LogLevel,
				cfg.Raft.DragonboatLogLevel, c.json, c.level, c.dragonboat)
		}
	}
	// LOG_FORMAT and its older spelling disagree: neither wins silently.
	if _, err := loadConfig(lookup(map[string]string{"LOG_FORMAT": "text", "QUEEN_LOG_JSON": "true"})); err == nil ||
		!strings.Contains(err.Error(), "LOG_FORMAT") || !strings.Contains(err.Error(), "QUEEN_LOG_JSON") {
		t.Errorf("contradicting log formats: %v", err)
	}
	cfg, err := loadConfig(lookup(nil))
	if err != nil || cfg.HTTP.LagPartitionsMax != 32 {
		t.Fatalf("lag partitions default %d, %v", cfg.HTTP.LagPartitionsMax, err)
	}
}

// TestOneMetricsSetForTheNode: the HTTP API writes the set the raft groups
// and the Kafka facade add their series to.
func TestOneMetricsSetForTheNode(t *testing.T) {
	cfg, err := loadConfig(lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	setupMetrics(&cfg)
	if cfg.HTTP.Metrics == nil || cfg.Raft.Metrics != cfg.HTTP.Metrics || cfg.Kafka.Broker.Metrics != cfg.HTTP.Metrics {
		t.Fatal("the packages do not share one metrics set")
	}
}

// TestMemoryBudget: a node has a 1 GiB budget unless told otherwise, which
// sizes its stores and the runtime's limit; 0 turns it off.
func TestMemoryBudget(t *testing.T) {
	c, err := loadConfig(lookup(nil))
	if err != nil || c.MemoryLimit != 1<<30 || c.Raft.MemoryBudget != 1<<30 || c.MemoryLimitFromGo {
		t.Fatalf("default: %v, limit %d, stores %d", err, c.MemoryLimit, c.Raft.MemoryBudget)
	}
	c, err = loadConfig(lookup(map[string]string{"QUEEN_MEMORY_LIMIT_MB": "0"}))
	if err != nil || c.MemoryLimit != 0 || c.Raft.MemoryBudget != 0 {
		t.Fatalf("off: %v, limit %d, stores %d", err, c.MemoryLimit, c.Raft.MemoryBudget)
	}
}

// Spec §1.1: idle empty partitions go after 30 days by default; the age
// takes a fraction of a day, and the switch turns it off.
func TestPartitionCleanupSettings(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want time.Duration
	}{
		{nil, 30 * 24 * time.Hour},
		{map[string]string{"PARTITION_CLEANUP_DAYS": "0.5"}, 12 * time.Hour},
		{map[string]string{"PARTITION_CLEANUP_DAYS": "7", "QUEEN_PARTITION_CLEANUP_ENABLED": "false"}, 0},
	} {
		cfg, err := loadConfig(lookup(c.env))
		if err != nil || cfg.Raft.PartitionCleanup != c.want {
			t.Fatalf("%v: %v, cleanup %v, want %v", c.env, err, cfg.Raft.PartitionCleanup, c.want)
		}
	}
}

// QUEEN_PARTITION_CACHE bounds the partitions each group keeps in memory;
// 0 keeps them all, a negative count is refused.
func TestPartitionCacheSetting(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want int
	}{
		{nil, storage.DefaultPartitionCache},
		{map[string]string{"QUEEN_PARTITION_CACHE": "1000"}, 1000},
		{map[string]string{"QUEEN_PARTITION_CACHE": "0"}, 0},
	} {
		cfg, err := loadConfig(lookup(c.env))
		if err != nil || cfg.Raft.PartitionCache != c.want {
			t.Fatalf("%v: %v, cache %d, want %d", c.env, err, cfg.Raft.PartitionCache, c.want)
		}
	}
	if _, err := loadConfig(lookup(map[string]string{"QUEEN_PARTITION_CACHE": "-1"})); err == nil || !strings.Contains(err.Error(), "QUEEN_PARTITION_CACHE") {
		t.Fatalf("a negative cache: %v", err)
	}
}
