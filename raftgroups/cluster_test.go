package raftgroups

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// freeBase finds a port p such that p..p+groups-1 are free on 127.0.0.1.
func freeBase(t *testing.T, groups int) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ok := true
		for n := 0; n < groups && ok; n++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+n))
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
	t.Fatal("no free port range")
	return 0
}

type testCluster struct {
	t        *testing.T
	snapshot uint64 // SnapshotEntries (0: default)
	adjust   func(*Config)
	peers    []Peer
	dirs     []string
	groups   int
	hosts    []*Host
	engines  []*Engine
}

func newTestCluster(t *testing.T, nodes, groups int) *testCluster {
	return newTestClusterWith(t, nodes, groups, 0)
}

func newTestClusterWith(t *testing.T, nodes, groups int, snapshotEntries uint64, adjust ...func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, groups: groups, snapshot: snapshotEntries}
	if len(adjust) > 0 {
		c.adjust = adjust[0]
	}
	for i := 1; i <= nodes; i++ {
		c.peers = append(c.peers, Peer{ID: uint64(i), RaftAddr: fmt.Sprintf("127.0.0.1:%d", freeBase(t, groups+1))})
		c.dirs = append(c.dirs, t.TempDir())
	}
	c.hosts = make([]*Host, nodes)
	c.engines = make([]*Engine, nodes)
	// Start the nodes concurrently: each start waits for its replica to
	// recover, which in a fresh cluster needs its peers.
	errs := make(chan error, nodes)
	for i := range c.peers {
		go func(i int) { errs <- c.start(i) }(i)
	}
	for range c.peers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, h := range c.hosts {
			if h != nil {
				h.Close()
			}
		}
	})
	return c
}

func (c *testCluster) start(i int) error {
	cfg := Config{
		NodeID: c.peers[i].ID, Peers: append([]Peer(nil), c.peers...), ListenAddr: c.peers[i].RaftAddr,
		Dir: c.dirs[i], Groups: c.groups, RTTMillisecond: 10, ElectionRTT: 10, HeartbeatRTT: 1,
		AttemptTimeout: 500 * time.Millisecond, RequestTimeout: 10 * time.Second,
		SnapshotEntries: c.snapshot, CompactionOverhead: c.snapshot / 2,
		Logger: slog.New(slog.NewTextHandler(testLogOut, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	place, _ := tenancy.NewPlacement(c.groups, "")
	cfg.Placement = place.Spec()
	if c.adjust != nil {
		c.adjust(&cfg)
	}
	h, err := Start(cfg)
	if err != nil {
		return err
	}
	e, err := NewEngine(h, place)
	if err != nil {
		return err
	}
	c.hosts[i], c.engines[i] = h, e
	return nil
}

func (c *testCluster) waitReady() {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		all := true
		for _, h := range c.hosts {
			if h != nil && !h.Ready() {
				all = false
			}
		}
		if all {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatal("cluster not ready")
}

func (c *testCluster) leaderOf(group int) int {
	for i, h := range c.hosts {
		if h == nil {
			continue
		}
		for _, st := range h.Status() {
			if st.Group == group && st.IsLeader {
				return i
			}
		}
	}
	return -1
}

func pushOne(ctx context.Context, e *Engine, queue, txn, payload string) (wire.PushResult, error) {
	id := wire.ID{0: 7}
	copy(id[1:], txn)
	rec := wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON | wire.FlagTxnID, MsgID: id, TxnID: []byte(txn), Payload: []byte(payload)})
	res, err := e.Push(ctx, wire.DefaultTenant, []wire.PushCmd{{Tenant: wire.DefaultTenant, Queue: queue, Partition: "Default",
		PartitionIndex: -1, Flags: wire.PushIndexTxn, Count: 1, Records: rec}})
	if err != nil {
		return wire.PushResult{}, err
	}
	return res[0].PushResult, res[0].Err
}

func TestClusterReplicatesAndSurvivesLeaderLoss(t *testing.T) {
	c := newTestCluster(t, 3, 2)
	c.waitReady()
	group := c.engines[0].Home(wire.DefaultTenant, "orders")
	leader := c.leaderOf(group)
	follower := (leader + 1) % 3
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for i := 0; i < 20; i++ {
		r, err := pushOne(ctx, c.engines[follower], "orders", fmt.Sprintf("t-%d", i), fmt.Sprint(i))
		if err != nil || r.BaseOffset != uint64(i) {
			t.Fatalf("push %d through follower: %+v %v", i, r, err)
		}
	}
	// Every replica holds the same log after a barrier.
	for i, e := range c.engines {
		if err := e.Barrier(ctx, group); err != nil {
			t.Fatal(err)
		}
		p, ok := e.PartitionNamed(wire.DefaultTenant, "orders", "Default")
		if !ok || p.HighWatermark() != 20 {
			t.Fatalf("node %d: hwm %d", i, p.HighWatermark())
		}
	}

	c.hosts[leader].Close()
	c.hosts[leader] = nil
	r, err := pushOne(ctx, c.engines[follower], "orders", "after", "x")
	if err != nil || r.BaseOffset != 20 {
		t.Fatalf("push after leader loss: %+v %v", r, err)
	}
	// A retried push of an acknowledged transaction id is a duplicate.
	r, err = pushOne(ctx, c.engines[follower], "orders", "t-3", "again")
	if err != nil || len(r.Dups) != 1 || r.Dups[0].Offset != 3 {
		t.Fatalf("dedup across leader change: %+v %v", r, err)
	}

	// The old leader comes back with its data and catches up.
	if err := c.start(leader); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := c.engines[leader].Barrier(ctx, group); err == nil {
			if p, ok := c.engines[leader].PartitionNamed(wire.DefaultTenant, "orders", "Default"); ok && p.HighWatermark() == 21 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("restarted node did not catch up")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWatchWakesOnApply(t *testing.T) {
	c := newTestCluster(t, 1, 1)
	c.waitReady()
	e := c.engines[0]
	ch, release := e.Changed(wire.DefaultTenant, "q")
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pushOne(ctx, e, "q", "a", "1"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatal("waiter not woken by the apply loop")
	}
	// What is applied is committed: /health never shows commit < applied.
	for _, st := range c.hosts[0].Status() {
		if st.Applied == 0 || st.Commit < st.Applied {
			t.Fatalf("status after a write: applied %d, commit %d", st.Applied, st.Commit)
		}
	}
}

func TestLaggingReplicaCatchesUpFromAStreamedSnapshot(t *testing.T) {
	c := newTestClusterWith(t, 3, 1, 20)
	c.waitReady()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lagging := (c.leaderOf(0) + 1) % 3
	writer := (lagging + 1) % 3
	c.hosts[lagging].Close()
	c.hosts[lagging] = nil
	// Far more entries than the log keeps: the replica cannot catch up from
	// the log and must be sent the store.
	for i := 0; i < 200; i++ {
		if _, err := pushOne(ctx, c.engines[writer], "q", fmt.Sprintf("t-%d", i), fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Log compaction follows snapshots asynchronously: wait for it.
	for compacted := false; !compacted; {
		for _, h := range c.hosts {
			if h == nil {
				continue
			}
			r, err := h.groups[0].nh.GetLogReader(1)
			if err != nil {
				t.Fatal(err)
			}
			first, _ := r.GetRange()
			compacted = first > 100
			if !compacted {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatal("the raft log was never compacted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.start(lagging); err != nil {
		t.Fatal(err)
	}
	store := c.engines[lagging].GroupStore(0)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if p, ok := c.engines[lagging].PartitionNamed(wire.DefaultTenant, "q", "Default"); ok && p.HighWatermark() == 200 && store.SnapshotsRecovered() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lagging replica did not catch up from a snapshot (snapshots recovered: %d)", store.SnapshotsRecovered())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The recovered replica serves the data and keeps applying.
	if _, err := pushOne(ctx, c.engines[lagging], "q", "after", "x"); err != nil {
		t.Fatal(err)
	}
	p, _ := c.engines[lagging].PartitionNamed(wire.DefaultTenant, "q", "Default")
	var got []string
	if _, err := store.Read(p, 198, func(_ uint64, _ int64, body []byte) bool {
		r, _ := wire.ParseRecord(body)
		got = append(got, string(r.Payload))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[198 199 x]" {
		t.Fatalf("tail after recovery: %v", got)
	}
}

var testLogOut io.Writer = io.Discard

// A node that removed itself no longer hosts the groups, yet a peer whose
// leader view is stale can still forward a membership request to it. It
// must answer a retriable no-quorum (the caller then reaches the new
// leader), not an internal error: CI saw a 500 "shard not found" there.
func TestMembershipRequestAtARemovedNodeIsRetriable(t *testing.T) {
	c := newTestCluster(t, 3, 2)
	c.waitReady()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	removed := c.hosts[1]
	if err := removed.SetVoters(ctx, []uint64{1, 3}, true, 0); err != nil {
		t.Fatalf("node 2 leaving: %v", err)
	}
	for _, call := range []func() error{
		func() error { return removed.SetVoters(ctx, []uint64{1, 3}, true, 0) },
		func() error { return removed.Promote(ctx, []uint64{3}, true, 0) },
		func() error { return removed.Remove(ctx, 3, true) },
	} {
		if err := call(); !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("at the removed node: %v, want ErrNoQuorum", err)
		}
	}
	// The survivors read it through a quorum: a read the leader change
	// dropped is retried, not left waiting for the whole deadline.
	for _, i := range []int{0, 2} {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m := c.hosts[i].Membership(rctx)
		cancel()
		if !slices.Equal(m.Voters, []uint64{1, 3}) || m.Source != "leader" {
			t.Fatalf("node %d sees voters %v (source %s)", i+1, m.Voters, m.Source)
		}
	}
}
