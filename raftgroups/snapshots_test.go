package raftgroups

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A group that has applied SnapshotBytes of commands takes a snapshot (its
// store syncs) long before the entry count would ask for one.
func TestGroupSnapshotsByVolume(t *testing.T) {
	c := newTestClusterWith(t, 1, 1, 1_000_000, func(cfg *Config) { cfg.SnapshotBytes = 64 << 10 })
	c.waitReady()
	e, st := c.engines[0], c.hosts[0].groups[0].store
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	synced := func() uint64 { _, n := st.SinceSync(); return st.Applied() - n }
	before := synced()
	payload := `"` + strings.Repeat("x", 4096) + `"`
	for i := 0; i < 40; i++ {
		pushTo(ctx, t, e, "volume", "p", payload)
	}
	// 40 entries of 4 KiB: the store must have synced past the first 16.
	want := before + 16
	deadline := time.Now().Add(10 * time.Second)
	for synced() < want {
		if time.Now().After(deadline) {
			b, n := st.SinceSync()
			t.Fatalf("no snapshot: synced at %d (want >= %d); %d bytes in %d entries since", synced(), want, b, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b, _ := st.SinceSync(); b >= 2*(64<<10) {
		t.Fatalf("%d bytes applied since the last snapshot", b)
	}
	// The snapshots and the proposals show in the group's metrics.
	g := c.hosts[0].groups[0]
	for g.metrics.snapshots.Get() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("queen_raft_snapshots_total did not count the snapshot")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var buf bytes.Buffer
	c.hosts[0].cfg.Metrics.WritePrometheus(&buf)
	if !regexp.MustCompile(`(?m)^queen_raft_proposal_duration_seconds_count\{group="0"\} [1-9]`).Match(buf.Bytes()) {
		t.Fatalf("no proposal latency counted:\n%s", buf.String())
	}
	du, err := c.hosts[0].DiskUse()
	if err != nil || du.DirBytes == 0 || du.FSSizeBytes < du.FSAvailBytes || du.FSAvailBytes == 0 {
		t.Fatalf("disk use %+v, %v", du, err)
	}
}
