package raftgroups

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/queen-mq/queen/wire"
)

// rawCmd is a command of n encoded bytes whose kind no state machine
// knows: every replica answers it CodeBadRequest, so it only tests how
// entries are built and moved.
func rawCmd(n int) wire.Command {
	c := wire.Command{Kind: 255, Body: make([]byte, n)}
	for c.EncodedLen() > n {
		c.Body = c.Body[:len(c.Body)-1]
	}
	return c
}

// A request of the largest accepted size queued right behind another
// request, beside other traffic, commits on a three-replica group and
// leaves the group working: group commit must not put both into one entry
// larger than what a follower accepts (it would be refused and resent
// forever, and the group would never commit again).
func TestMaxSizeRequestBesideOtherTrafficCommits(t *testing.T) {
	const limit = 2 << 20
	c := newTestClusterWith(t, 3, 1, 0, func(cfg *Config) { cfg.MaxEntryBytes = limit })
	c.waitReady()
	leader := c.leaderOf(0)
	h := c.hosts[leader]
	g := h.groups[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Other traffic: small pushes through every node until the end.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, len(c.engines))
	for i, e := range c.engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := pushOne(ctx, e, "beside", fmt.Sprintf("n%d-%d", i, n), "x"); err != nil {
					errs <- fmt.Errorf("node %d push %d: %w", i, n, err)
					return
				}
			}
		}()
	}

	// A second proposer for the group, filled before it runs, so the two
	// requests are waiting together when it gathers.
	p := newProposer(g.nh, g.shardID, 0, &h.cfg, h.disk, h.clock.NowMs)
	small, err := p.enqueue([]wire.Command{rawCmd(limit * 3 / 4)})
	if err != nil {
		t.Fatal(err)
	}
	big, err := p.enqueue([]wire.Command{rawCmd(limit)})
	if err != nil {
		t.Fatal(err)
	}
	p.start()
	defer p.close()
	for name, wait := range map[string]func(context.Context) ([][]byte, error){"small": small, "max-size": big} {
		if _, err := wait(ctx); err != nil {
			t.Fatalf("%s request: %v", name, err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The group still commits, on every replica.
	if _, err := pushOne(ctx, c.engines[(leader+1)%3], "beside", "after", "x"); err != nil {
		t.Fatalf("push after the max-size request: %v", err)
	}
	for i, e := range c.engines {
		if err := e.Barrier(ctx, 0); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
}

// A follower that was cut off catches up even when entries are small:
// dragonboat sends a lagging follower up to 64 MiB of entries in one
// message, so the transport must accept that much whatever
// QUEEN_RAFT_ENTRY_MAX_BYTES says, or the catch-up is refused and resent
// forever.
func TestFollowerCatchesUpWithSmallEntryLimit(t *testing.T) {
	const limit = 1 << 20
	var cut sync.Map // raft address → cut off
	c := newTestClusterWith(t, 3, 1, 0, func(cfg *Config) {
		cfg.MaxEntryBytes = limit
		self := cfg.ListenAddr
		cfg.Drop = func(_ int, target string) error {
			if _, ok := cut.Load(target); ok {
				return fmt.Errorf("cut off")
			}
			if _, ok := cut.Load(self); ok {
				return fmt.Errorf("cut off")
			}
			return nil
		}
	})
	c.waitReady()
	leader := c.leaderOf(0)
	follower := (leader + 1) % 3
	cut.Store(c.peers[follower].RaftAddr, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 24; i++ {
		if _, err := c.engines[leader].Propose(ctx, 0, rawCmd(limit/2)); err != nil {
			t.Fatalf("proposal %d: %v", i, err)
		}
	}
	want := c.hosts[leader].Store(0).Applied()
	cut.Delete(c.peers[follower].RaftAddr)
	deadline := time.Now().Add(20 * time.Second)
	for c.hosts[follower].Store(0).Applied() < want {
		if time.Now().After(deadline) {
			t.Fatalf("follower applied %d of %d entries 20 s after the partition healed", c.hosts[follower].Store(0).Applied(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
