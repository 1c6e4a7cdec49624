package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// startFaultCluster starts the 3-node cluster of a fault run, with fault
// proxies between the nodes when proxied.
func startFaultCluster(t *testing.T, proxied bool, env map[string]string) *harness.Cluster {
	t.Helper()
	if proxied {
		if err := harness.ProxySupported(); err != nil {
			t.Skip("network faults need the fault proxy:", err)
		}
	}
	return e2etest.StartCluster(t, harness.Options{Nodes: 3, Proxied: proxied, Env: env})
}

// pickVictim chooses the node a round hits: most often (3 in 4) the leader
// of a random group, else any node.
func pickVictim(t *testing.T, ctx context.Context, c *harness.Cluster, rng *rand.Rand) (*harness.Node, string) {
	t.Helper()
	groups, err := e2etest.GroupsOf(ctx, c.Nodes[0])
	if err != nil || len(groups) == 0 || rng.IntN(4) == 3 {
		n := c.Nodes[rng.IntN(len(c.Nodes))]
		return n, "a random node"
	}
	g := rng.IntN(len(groups))
	return c.Nodes[e2etest.GroupLeader(t, ctx, c, g)], fmt.Sprintf("the leader of group %d", g)
}

// queueHWMs is every workload queue partition's high-water mark on node n.
func queueHWMs(ctx context.Context, w *workload, n *harness.Node) ([]uint64, error) {
	out := make([]uint64, w.cfg.HTTPPartitions)
	for p := range out {
		_, hwm, err := e2etest.FetchAll(ctx, n.URL(), faultQueue, fmt.Sprintf("p%d", p))
		if err != nil {
			return nil, err
		}
		out[p] = hwm
	}
	return out, nil
}

// waitCaughtUp waits until n is healthy and holds, in every partition of
// the workload queue, at least what another node held when it was called.
func waitCaughtUp(ctx context.Context, w *workload, n *harness.Node) error {
	if err := n.WaitHealthy(ctx); err != nil {
		return err
	}
	var want []uint64
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		for _, o := range w.c.Nodes {
			if o != n && o.Running() {
				h, err := queueHWMs(ctx, w, o)
				if err == nil {
					want = h
					return true, nil
				}
			}
		}
		return false, nil
	}); err != nil {
		return fmt.Errorf("no other node serves the queue: %w", err)
	}
	var got []uint64
	err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		h, err := queueHWMs(ctx, w, n)
		if err != nil {
			return false, nil
		}
		got = h
		for p := range want {
			if h[p] < want[p] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("node %d did not catch up: holds %v, peers held %v: %w", n.ID, got, want, err)
	}
	return nil
}

// Rounds of SIGKILL: each round kills a node (most often the leader of a
// group) while every client works, waits until the survivors acknowledge
// writes again, restarts it and waits until it has caught up. Then the
// clients' records are judged against every replica's logs.
// QUEEN_FAULT_ROUNDS sets the rounds (3 by default, for CI).
func TestFaultKillRounds(t *testing.T) {
	rounds := faultRounds(t, "QUEEN_FAULT_ROUNDS", 3)
	c := startFaultCluster(t, false, nil)
	ctx := e2etest.Deadline(t, 2*time.Minute+time.Duration(rounds)*45*time.Second)
	rng := faultRand(t)
	w := startWorkload(t, ctx, c, defaultWorkload())
	for r := 1; r <= rounds; r++ {
		victim, why := pickVictim(t, ctx, c, rng)
		victim.Kill()
		killedAt := time.Now()
		if err := w.progressWithin(ctx, 30*time.Second, 200); err != nil {
			t.Fatal(w.noProgress(fmt.Sprintf("round %d, node %d (%s) killed", r, victim.ID, why), err))
		}
		recovered := time.Since(killedAt)
		if err := c.Start(victim); err != nil {
			t.Fatal(err)
		}
		if err := waitCaughtUp(ctx, w, victim); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		k, h := w.led.ackedCounts()
		t.Logf("round %d: killed node %d (%s); writes acknowledged again within %v; back and caught up after %v (acked: kafka %d, http %d)",
			r, victim.ID, why, recovered.Round(time.Millisecond), time.Since(killedAt).Round(time.Millisecond), k, h)
	}
	f := &figures{Fault: "kill", Rounds: rounds}
	w.finish(ctx, f)
}
