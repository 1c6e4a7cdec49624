package main

import (
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/crypto/nodetls/nodetlstest"
	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/raftgroups"
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
		"PORT":                        {"PORT": "http"},
		"QUEEN_RAFT_GROUPS":           {"QUEEN_RAFT_GROUPS": "65"},
		"QUEEN_RAFT_PEERS":            {"QUEEN_RAFT_PEERS": "1=h1:7400/h1:6632", "QUEEN_RAFT_NODE_ID": "2"},
		"QUEEN_LOG_JSON":              {"QUEEN_LOG_JSON": "maybe"},
		"QUEEN_RAFT_LISTEN":           {"QUEEN_RAFT_LISTEN": "7400"},
		"LOG_LEVEL":                   {"LOG_LEVEL": "loud"},
		"QUEEN_TENANT_GROUPS":         {"QUEEN_TENANT_GROUPS": "x=1"},
		"QUEEN_KAFKA_ADVERTISED_ADDR": {"QUEEN_RAFT_PEERS": "1=h1:7400/h1:6632,2=h2:7400/h2:6632"},
		"QUEEN_KAFKA_TLS_CERT":        {"QUEEN_KAFKA_TLS_CERT": "/nonexistent.pem"},
		"QUEEN_KAFKA_SASL":            {"QUEEN_KAFKA_SASL": "scram"},
		"QUEEN_TENANCY_HEADER":        {"QUEEN_TENANCY_HEADER": "true"},
		"JWT_ENABLED":                 {"JWT_ENABLED": "sometimes"},
		"QUEEN_RAFT_DISK_HIGH_PCT":    {"QUEEN_RAFT_DISK_HIGH_PCT": "101"},
		"QUEEN_RAFT_DISK_LOW_PCT":     {"QUEEN_RAFT_DISK_HIGH_PCT": "70", "QUEEN_RAFT_DISK_LOW_PCT": "75"},
		// dragonboat refuses proposals over 256 MiB
		"QUEEN_RAFT_ENTRY_MAX_BYTES":                  {"QUEEN_RAFT_ENTRY_MAX_BYTES": "536870912"},
		"QUEEN_RAFT_MAX_CLOCK_SKEW_MS":                {"QUEEN_RAFT_MAX_CLOCK_SKEW_MS": "0"},
		"QUEEN_TEST_CLOCK_OFFSET_MS":                  {"QUEEN_TEST_CLOCK_OFFSET_MS": "an hour"},
		"QUEEN_KAFKA_MAX_CONNECTIONS_PER_IP":          {"QUEEN_KAFKA_MAX_CONNECTIONS_PER_IP": "0"},
		"QUEEN_KAFKA_MAX_UNAUTHENTICATED_CONNECTIONS": {"QUEEN_KAFKA_MAX_UNAUTHENTICATED_CONNECTIONS": "-1"},
		"QUEEN_KAFKA_LOGIN_TIMEOUT_MS":                {"QUEEN_KAFKA_LOGIN_TIMEOUT_MS": "10"},
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
