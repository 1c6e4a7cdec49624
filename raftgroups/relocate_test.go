package raftgroups

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/wire"
)

// A leader relocates what a deleted queue left sparse, and every replica
// gives the space back: the live queue's records all still read on each.
func TestLeaderRelocatesSparseSegmentsOnEveryReplica(t *testing.T) {
	c := newTestClusterWith(t, 3, 1, 20, func(cfg *Config) {
		cfg.SegmentBytes = 2048
		cfg.RelocateEvery = 100 * time.Millisecond
	})
	c.waitReady()
	e := c.engines[0]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	filler := `{"f":"` + strings.Repeat("x", 400) + `"}`
	for i := 0; i < 40; i++ {
		if _, err := pushOne(ctx, e, "doomed", fmt.Sprintf("d%d", i), filler); err != nil {
			t.Fatal(err)
		}
		if _, err := pushOne(ctx, e, "kept", fmt.Sprintf("k%d", i), fmt.Sprintf(`{"k":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	files := func(h *Host) int { n, _ := h.groups[0].store.SegmentStats(); return n }
	before := make([]int, len(c.hosts))
	for i, h := range c.hosts {
		before[i] = files(h)
		if before[i] < 8 {
			t.Fatalf("node %d has %d segments for 80 chunks of 2 KiB segments", i+1, before[i])
		}
	}
	if _, err := e.DeleteQueue(ctx, &wire.DeleteQueueCmd{Tenant: wire.DefaultTenant, Queue: "doomed"}); err != nil {
		t.Fatal(err)
	}
	// Keep entries flowing so every replica reaches its next Sync.
	for i := 0; ; i++ {
		done := true
		for j, h := range c.hosts {
			if files(h)*2 > before[j] {
				done = false
			}
		}
		if done {
			break
		}
		if ctx.Err() != nil {
			for j, h := range c.hosts {
				t.Logf("node %d: %d segments, %d before", j+1, files(h), before[j])
			}
			t.Fatal("segments not given back")
		}
		if _, err := pushOne(ctx, e, "other", fmt.Sprintf("o%d", i), `{}`); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for j, h := range c.hosts {
		p, ok := h.groups[0].store.PartitionByName(wire.DefaultTenant, "kept", "Default")
		if !ok {
			t.Fatalf("node %d lost the kept queue", j+1)
		}
		n := 0
		if _, err := h.groups[0].store.Read(p, 0, func(off uint64, _ int64, body []byte) bool {
			rec, err := wire.ParseRecord(body)
			if err != nil || string(rec.Payload) != fmt.Sprintf(`{"k":%d}`, off) {
				t.Errorf("node %d offset %d: %q %v", j+1, off, rec.Payload, err)
			}
			n++
			return true
		}); err != nil || n != 40 {
			t.Fatalf("node %d read %d kept records: %v", j+1, n, err)
		}
	}
}
