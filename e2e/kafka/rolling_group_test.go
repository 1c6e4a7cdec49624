package kafka

import (
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// TestKafkaConsumerGroupKeepsItsGenerationWhenItsCoordinatorRestarts runs a
// franz-go group of two on three nodes, stops the group's coordinator with
// SIGTERM and starts it again. Membership lives in raft, so the new
// coordinator knows both members at their generation: heartbeats go on,
// nobody rejoins, and records pushed meanwhile are still consumed.
func TestKafkaConsumerGroupKeepsItsGenerationWhenItsCoordinatorRestarts(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: e2etest.GroupEnv})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	members, own, delivered := startSettledPair(ctx, t, c, "keep")
	type membership struct {
		id  string
		gen int32
	}
	before := map[string]membership{}
	for _, m := range members {
		id, gen := m.cl.GroupMetadata()
		before[m.name] = membership{id, gen}
	}
	coord := findCoordinator(ctx, t, e2etest.KafkaClient(t, c.Nodes[0]), "keep")
	var stopped, other *harness.Node
	for _, n := range c.Nodes {
		if int32(n.ID) == coord.NodeID {
			stopped = n
		} else {
			other = n
		}
	}
	stopped.Stop()
	// Another node coordinates now; records pushed while the node is down
	// reach the members at the generation they had.
	pushOrders(ctx, t, other.URL(), 4)
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) { return delivered() == 40, nil }); err != nil {
		t.Fatalf("while the coordinator was down: delivered %d: %v", delivered(), err)
	}
	if err := c.Start(stopped); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAllHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	// The restarted node may lead the raft group again (it is preferred):
	// a second coordinator change, which must keep the generation too.
	pushOrders(ctx, t, other.URL(), 4)
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) { return delivered() == 60, nil }); err != nil {
		t.Fatalf("after the restart: delivered %d: %v", delivered(), err)
	}
	// Heartbeats at the new coordinator run every 300 ms; give them a
	// session's worth of time to fail if the member was unknown there.
	settle := time.Now().Add(3 * time.Second)
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) { return time.Now().After(settle), nil }); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		id, gen := m.cl.GroupMetadata()
		if (membership{id, gen}) != before[m.name] {
			t.Errorf("%s was %+v before the coordinator restarted, %+v after", m.name, before[m.name], membership{id, gen})
		}
	}
	if len(own.conflicts) > 0 {
		t.Fatalf("double ownership: %v", own.conflicts)
	}
}
