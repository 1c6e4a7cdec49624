package main

import (
	"strings"
	"testing"
	"time"

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
		"QUEEN_RAFT_ENTRY_MAX_BYTES":   {"QUEEN_RAFT_ENTRY_MAX_BYTES": "536870912"},
		"QUEEN_RAFT_MAX_CLOCK_SKEW_MS": {"QUEEN_RAFT_MAX_CLOCK_SKEW_MS": "0"},
		"QUEEN_TEST_CLOCK_OFFSET_MS":   {"QUEEN_TEST_CLOCK_OFFSET_MS": "an hour"},
	} {
		_, err := loadConfig(lookup(env))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v does not name the variable", name, err)
		}
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
