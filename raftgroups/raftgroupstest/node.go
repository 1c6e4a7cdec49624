// Package raftgroupstest starts a single-node engine inside a test process,
// for the front doors' in-process tests: Groups raft groups on free
// consecutive 127.0.0.1 ports, a temp data dir, fast ticks, stopped when the
// test ends. Several groups, so every test crosses them as production does.
package raftgroupstest

import (
	"io"
	"log/slog"
	"net"
	"strconv"
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

// Groups is how many raft groups a test node runs.
const Groups = 3

// FreePorts returns a 127.0.0.1 address whose port and the n-1 after it are
// free right now.
func FreePorts(t testing.TB, n int) string {
	t.Helper()
	for attempt := 0; attempt < 100; attempt++ {
		base := FreeAddr(t)
		host, port, _ := net.SplitHostPort(base)
		p, _ := strconv.Atoi(port)
		ok := true
		for i := 1; i < n && ok; i++ {
			l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p+i)))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no run of free ports")
	return ""
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
	addr := FreePorts(t, Groups)
	cfg := raftgroups.Config{NodeID: 1, Peers: []raftgroups.Peer{{ID: 1, RaftAddr: addr}},
		ListenAddr: addr, Dir: t.TempDir(), Groups: Groups, RTTMillisecond: 10, ElectionRTT: 5, HeartbeatRTT: 1, Logger: Quiet}
	if adjust != nil {
		adjust(&cfg)
	}
	place, err := tenancy.NewPlacement(cfg.Groups, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Placement = place.Spec()
	host, err := raftgroups.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(host.Close)
	engine, err := raftgroups.NewEngine(host, place)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !host.Ready() || (!cfg.HoldFormat && !AtNewestFormat(host)) {
		if time.Now().After(deadline) {
			t.Fatal("node not ready, or its groups not raised to the newest format")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return host, engine
}

// AtNewestFormat reports whether every group of h is at the newest format
// h's build applies: a new cluster is raised to it within a second or two
// of its leaders' election, and tests of what it changes wait for that.
func AtNewestFormat(h *raftgroups.Host) bool {
	st := h.Format()
	for _, f := range st.Active {
		if f != st.Newest {
			return false
		}
	}
	return len(st.Active) > 0
}
