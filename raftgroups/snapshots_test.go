package raftgroups

import (
	"context"
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
}
