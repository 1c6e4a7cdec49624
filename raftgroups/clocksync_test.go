package raftgroups

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A node whose wall clock is an hour ahead compares its clock with its
// peers' before it proposes anything and takes the cluster's time, so the
// entries it proposes do not move the group's replicated clock.
func TestNodeAnHourAheadStampsTheClusterTime(t *testing.T) {
	c := newTestClusterWith(t, 3, 1, 0, func(cfg *Config) {
		if cfg.NodeID == 1 {
			cfg.ClockTestOffset = time.Hour
		}
		cfg.ClockSyncEvery = 100 * time.Millisecond
	})
	c.waitReady()
	skew := c.hosts[0].cfg.MaxClockSkew
	for i, h := range c.hosts {
		if d := time.Duration(h.NowMs()-time.Now().UnixMilli()) * time.Millisecond; d < -skew || d > skew {
			t.Fatalf("node %d clock is %v off", i+1, d)
		}
	}
	if s := c.hosts[0].ClockStats(); s.Corrections == 0 || !s.Synced {
		t.Fatalf("node 1 clock stats %+v", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 10; i++ {
		if _, err := pushOne(ctx, c.engines[0], "clock", fmt.Sprint(i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	for i, e := range c.engines {
		if err := e.Barrier(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if d := time.Duration(e.GroupStore(0).ClockMs()-time.Now().UnixMilli()) * time.Millisecond; d > skew {
			t.Fatalf("node %d: the group's clock is %v ahead of real time", i+1, d)
		}
	}
}
