package cluster

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// clockSkew is QUEEN_RAFT_MAX_CLOCK_SKEW_MS's default, the bound tested.
const clockSkew = 500 * time.Millisecond

// groupLeases reads, from one node, when each partition's lease of the
// consumer group on queue expires (zero: no lease).
func groupLeases(t *testing.T, ctx context.Context, base, group, queue string) map[string]time.Time {
	t.Helper()
	var detail map[string]struct {
		Partitions []struct {
			Partition      string  `json:"partition"`
			LeaseExpiresAt *string `json:"leaseExpiresAt"`
		} `json:"partitions"`
	}
	if code, err := e2etest.Call(ctx, http.MethodGet, base+"/api/v1/consumer-groups/"+group, nil, &detail); err != nil || code != http.StatusOK {
		t.Fatalf("group %s detail: %d %v", group, code, err)
	}
	out := map[string]time.Time{}
	for _, p := range detail[queue].Partitions {
		if p.LeaseExpiresAt == nil {
			out[p.Partition] = time.Time{}
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, *p.LeaseExpiresAt)
		if err != nil {
			t.Fatalf("lease expiry %q: %v", *p.LeaseExpiresAt, err)
		}
		out[p.Partition] = at
	}
	return out
}

// A node whose wall clock is an hour ahead, and one an hour behind, do not
// move the cluster's time: every group's replicated clock stays within the
// max skew of real time (seen in lease expiry times), leases of popped
// messages do not expire early, and leases still expire on time.
func TestSkewedNodeClocksDoNotMoveTheGroupsClock(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Groups: 3, NodeEnv: map[int]map[string]string{
		1: {"QUEEN_TEST_CLOCK_OFFSET_MS": "3600000"},
		2: {"QUEEN_TEST_CLOCK_OFFSET_MS": "-3600000"},
	}})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	cl := e2etest.NewClient(t, ctx, c.Nodes[0])
	// Leaders spread to their preferred nodes, so the skewed nodes lead
	// groups and stamp the ticks that expire leases.
	cl.Eventually(30*time.Second, "every node leading a group", func() bool {
		for _, n := range c.Nodes {
			var h struct {
				Groups []struct {
					Role string `json:"role"`
				} `json:"groups"`
			}
			if code, err := e2etest.Call(ctx, http.MethodGet, n.URL()+"/health", nil, &h); err != nil || code != http.StatusOK {
				return false
			}
			leads := false
			for _, g := range h.Groups {
				leads = leads || g.Role == "leader"
			}
			if !leads {
				return false
			}
		}
		return true
	})

	// Six partitions, spread over the three groups, each written and
	// popped (60 s leases) through every node in turn.
	const lease = 60 * time.Second
	parts := []string{"p0", "p1", "p2", "p3", "p4", "p5"}
	popped := map[string][2]time.Time{} // partition → real time before and after its pop
	for i, p := range parts {
		node := cl.On(c.Nodes[i%3])
		node.Push(e2etest.PushItems("clk", p, fmt.Sprintf("m-%s", p))...)
	}
	for i, p := range parts {
		node := cl.On(c.Nodes[i%3])
		before := time.Now()
		node.MustPop("/api/v1/pop/queue/clk/partition/"+p+"?consumerGroup=g&subscriptionMode=all&batch=1&leaseSeconds=60", 1)
		popped[p] = [2]time.Time{before, time.Now()}
	}

	// Traffic stamped by every node in every group for a few seconds.
	until := time.Now().Add(3 * time.Second)
	for k := 0; time.Now().Before(until); k++ {
		node := cl.On(c.Nodes[k%3])
		node.Push(e2etest.PushItems("noise", parts[k%len(parts)], k)...)
		node.Pop(e2etest.PopPath("noise", "consumerGroup=n", "subscriptionMode=all", "batch=10", "autoAck=true"))
	}

	// No lease expired early: nothing of clk is delivered again.
	for _, n := range c.Nodes {
		for _, p := range parts {
			cl.On(n).PopEmpty("/api/v1/pop/queue/clk/partition/" + p + "?consumerGroup=g&batch=1")
		}
	}
	// Each lease ends 60 s after its pop by real time, within the bound,
	// as every node sees it.
	for _, n := range c.Nodes {
		leases := groupLeases(t, ctx, n.URL(), "g", "clk")
		for _, p := range parts {
			at := leases[p]
			lo, hi := popped[p][0].Add(lease-clockSkew-250*time.Millisecond), popped[p][1].Add(lease+clockSkew+250*time.Millisecond)
			if at.Before(lo) || at.After(hi) {
				t.Errorf("node %d: lease of %s expires at %v, want within [%v, %v] (real time + 60 s ± the max skew)",
					n.ID, p, at.Format(time.RFC3339Nano), lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano))
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Leases still expire, on every group: 1 s leases come back within
	// a few seconds.
	for i, p := range parts {
		cl.On(c.Nodes[i%3]).MustPop("/api/v1/pop/queue/clk/partition/"+p+"?consumerGroup=short&subscriptionMode=all&batch=1&leaseSeconds=1", 1)
	}
	expired := time.Now().Add(time.Second)
	for i, p := range parts {
		node := cl.On(c.Nodes[(i+1)%3])
		node.Eventually(15*time.Second, "the 1 s lease of "+p+" to expire", func() bool {
			a, code := node.Pop("/api/v1/pop/queue/clk/partition/" + p + "?consumerGroup=short&batch=1&leaseSeconds=60")
			return code == http.StatusOK && len(a.Messages) == 1
		})
	}
	if late := time.Since(expired); late > 10*time.Second {
		t.Fatalf("1 s leases came back %v after they were due", late)
	}

	// The skewed nodes took the cluster's time and said so; the correct
	// one did not move.
	for _, n := range c.Nodes {
		corrections, err := e2etest.Metric(ctx, n.URL(), "queen_clock_corrections_total")
		if err != nil {
			t.Fatal(err)
		}
		if skewed := n.ID != 3; skewed != (corrections > 0) || skewed != n.Grep("using the cluster's time") {
			t.Errorf("node %d: %v corrections, logged: %v", n.ID, corrections, n.Grep("using the cluster's time"))
		}
	}
	if !strings.Contains(c.Nodes[0].Log(), "QUEEN_TEST_CLOCK_OFFSET_MS is set") {
		t.Error("node 1 did not warn about its test clock offset")
	}
}
