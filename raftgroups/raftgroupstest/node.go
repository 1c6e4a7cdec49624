// Package raftgroupstest starts a single-node engine inside a test process,
// for the front doors' in-process tests: one raft group on a free
// 127.0.0.1 port, a temp data dir, fast ticks, stopped when the test ends.
package raftgroupstest

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/tenancy"
)

// Quiet is a logger that discards everything.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// FreeAddr returns a 127.0.0.1 address with a port free right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Start starts a single node and waits (up to 20 s) until it is ready. The
// host is closed when the test ends, after the cleanups registered later.
func Start(t testing.TB) (*raftgroups.Host, *raftgroups.Engine) {
	t.Helper()
	return StartWith(t, nil)
}

// StartWith is Start with a hook that adjusts the config first (test hooks
// such as DiskUsage).
func StartWith(t testing.TB, adjust func(*raftgroups.Config)) (*raftgroups.Host, *raftgroups.Engine) {
	t.Helper()
	addr := FreeAddr(t)
	cfg := raftgroups.Config{NodeID: 1, Peers: []raftgroups.Peer{{ID: 1, RaftAddr: addr}},
		ListenAddr: addr, Dir: t.TempDir(), RTTMillisecond: 10, ElectionRTT: 5, HeartbeatRTT: 1, Logger: Quiet}
	if adjust != nil {
		adjust(&cfg)
	}
	host, err := raftgroups.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(host.Close)
	place, _ := tenancy.NewPlacement(1, "")
	engine, err := raftgroups.NewEngine(host, place)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !host.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("node not ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return host, engine
}
