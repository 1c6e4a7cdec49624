package http

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// cleanupDays is a PARTITION_CLEANUP_DAYS of about two seconds.
const cleanupDays = "0.000025"

// emptyPartitions turns on queue's completed retention, pushes one message
// to each of n partitions prefix-0..n-1 through node pushTo and pops them all
// with auto-ack through popFrom: retention then empties every partition.
func emptyPartitions(t *testing.T, ctx context.Context, pushTo, popFrom *harness.Node, queue, prefix string, n int) {
	t.Helper()
	e2etest.NewClient(t, ctx, pushTo).Configure(map[string]any{"queue": queue, "options": map[string]any{"retentionEnabled": true, "completedRetentionSeconds": 1}})
	items := make([]e2etest.PushItem, n)
	for i := range items {
		items[i] = e2etest.PushItem{Queue: queue, Partition: fmt.Sprintf("%s-%d", prefix, i), Payload: map[string]int{"n": i}}
	}
	if _, code, err := e2etest.Push(ctx, pushTo.URL(), items); err != nil || code != http.StatusCreated {
		t.Fatalf("push: %d %v", code, err)
	}
	ans, code, err := e2etest.Pop(ctx, popFrom.URL(), e2etest.PopPath(queue, "batch=100", fmt.Sprintf("partitions=%d", n), "autoAck=true"))
	if err != nil || code != http.StatusOK || len(ans.Messages) != n {
		t.Fatalf("pop: %d %v, %d messages", code, err, len(ans.Messages))
	}
}

// pushedAgain pushes one message to partition name through pushTo, then
// answers it is the only one a new consumer group pops through popFrom.
func pushedAgain(t *testing.T, ctx context.Context, pushTo, popFrom *harness.Node, queue, name string) {
	t.Helper()
	if _, code, err := e2etest.Push(ctx, pushTo.URL(), []e2etest.PushItem{{Queue: queue, Partition: name, Payload: map[string]int{"n": 99}}}); err != nil || code != http.StatusCreated {
		t.Fatalf("push after the cleanup: %d %v", code, err)
	}
	ans, code, err := e2etest.Pop(ctx, popFrom.URL(), e2etest.PopPath(queue, "batch=10", "partitions=16", "autoAck=true", "consumerGroup=later", "subscriptionMode=all"))
	if err != nil || code != http.StatusOK || len(ans.Messages) != 1 || ans.Messages[0].Partition != name {
		t.Fatalf("pop after the cleanup: %d %v %+v", code, err, ans.Messages)
	}
}

// Idle empty partitions go (PARTITION_CLEANUP_DAYS, here about two
// seconds): partitions whose messages retention dropped leave the queue's
// views and its directory at the home, over two raft groups so most of them
// live outside the home; a name pushed again comes back as a new partition
// whose message is delivered, and the others stay gone.
func TestIdleEmptyPartitionsAreCleanedUp(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Groups: 2, Env: map[string]string{
		"PARTITION_CLEANUP_DAYS": cleanupDays,
	}})
	ctx := e2etest.Deadline(t, 90*time.Second)
	node := c.Nodes[0]
	base := node.URL()
	const queue = "customers"
	emptyPartitions(t, ctx, node, node, queue, "customer", 8)
	groups := map[int]bool{}
	for _, p := range e2etest.PlacementOf(ctx, t, base, queue).Queue.Partitions {
		groups[p.Group] = true
	}
	if len(groups) != 2 {
		t.Fatalf("the partitions are in groups %v, want both", groups)
	}

	partitionsOf := func() int {
		var q struct{ Partitions any }
		e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/queues/"+queue, nil, http.StatusOK, &q)
		switch v := q.Partitions.(type) {
		case float64:
			return int(v)
		case []any:
			return len(v)
		}
		t.Fatalf("queue view partitions: %#v", q.Partitions)
		return -1
	}
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		return partitionsOf() == 0 && len(e2etest.PlacementOf(ctx, t, base, queue).Queue.Partitions) == 0, nil
	}); err != nil {
		t.Fatalf("partitions not cleaned up: view %d, directory %+v: %v", partitionsOf(), e2etest.PlacementOf(ctx, t, base, queue).Queue.Partitions, err)
	}

	pushedAgain(t, ctx, node, node, queue, "customer-3")
	dir := e2etest.PlacementOf(ctx, t, base, queue).Queue.Partitions
	if len(dir) != 1 || dir[0].Name != "customer-3" || dir[0].Index < 8 {
		t.Fatalf("directory after the push: %+v", dir)
	}
}

// Three nodes remove the same partitions: one node is killed (SIGKILL)
// after the pops and started again while the partitions are being removed;
// every node then lists the same empty directory, and a name pushed again
// through one node is delivered through another.
func TestIdleEmptyPartitionsAreCleanedUpOnEveryNode(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: map[string]string{"PARTITION_CLEANUP_DAYS": cleanupDays}})
	ctx := e2etest.Deadline(t, 120*time.Second)
	const queue = "tenants"
	emptyPartitions(t, ctx, c.Nodes[0], c.Nodes[1], queue, "tenant", 12)
	victim := c.Nodes[2]
	victim.Kill()
	if err := c.Start(victim); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAllHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
			return len(e2etest.PlacementOf(ctx, t, n.URL(), queue).Queue.Partitions) == 0, nil
		}); err != nil {
			t.Fatalf("node %d still lists %+v: %v", n.ID, e2etest.PlacementOf(ctx, t, n.URL(), queue).Queue.Partitions, err)
		}
	}
	pushedAgain(t, ctx, c.Nodes[2], c.Nodes[0], queue, "tenant-7")
	dirOf := func(n *harness.Node) string {
		var out []string
		for _, p := range e2etest.PlacementOf(ctx, t, n.URL(), queue).Queue.Partitions {
			out = append(out, fmt.Sprintf("%s@%d/%d", p.Name, p.Index, p.Group))
		}
		return fmt.Sprint(out)
	}
	want := dirOf(c.Nodes[0])
	for _, n := range c.Nodes[1:] {
		if got := dirOf(n); got != want {
			t.Fatalf("node %d lists %s, node 1 %s", n.ID, got, want)
		}
	}
}
