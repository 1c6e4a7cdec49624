package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// Each raft group here keeps four partitions in memory
// (QUEEN_PARTITION_CACHE=4) and reads every other back from disk whenever
// a command needs it, each replica on its own. Over three nodes, one of
// them killed and restarted midway, every message of 40 partitions is
// delivered exactly once to a consumer group that takes leases and acks,
// and exactly once to one that pops with auto-ack; then every node
// counts the queue alike.
func TestPartitionsOutOfMemoryOnEveryNode(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: map[string]string{"QUEEN_PARTITION_CACHE": "4"}})
	ctx := e2etest.Deadline(t, 150*time.Second)
	cl := e2etest.NewClient(t, ctx, c.Nodes[0])
	const queue, parts = "many-customers", 40
	want := map[string]int{}
	pushRound := func(round int) {
		var batch []e2etest.PushItem
		for p := range parts {
			name := fmt.Sprintf("customer-%02d", p)
			batch = append(batch, e2etest.PushItems(queue, name, fmt.Sprintf("%s/%d", name, round))...)
			want[fmt.Sprintf("%s/%d", name, round)] = 0
		}
		cl.Push(batch...)
	}
	leased, autoAcked := map[string]int{}, map[string]int{}
	// drain pops until both groups have every message pushed so far.
	drain := func(on *e2etest.Client) {
		t.Helper()
		for _, g := range []struct {
			group string
			flag  string
			seen  map[string]int
		}{{"billing", "", leased}, {"audit", "autoAck=true", autoAcked}} {
			if err := harness.Poll(ctx, 10*time.Millisecond, func() (bool, error) {
				query := []string{"batch=100", "partitions=8", "subscriptionMode=all", "consumerGroup=" + g.group}
				if g.flag != "" {
					query = append(query, g.flag)
				}
				a, code := on.Pop(e2etest.PopPath(queue, query...))
				if code == 200 {
					for _, m := range a.Messages {
						var payload string
						e2etest.DecodeInto(t, m.Data, &payload)
						g.seen[payload]++
					}
					if g.flag == "" {
						on.AckAll(a, "completed")
					}
				}
				return len(g.seen) == len(want), nil
			}); err != nil {
				t.Fatalf("group %s got %d of %d messages: %v", g.group, len(g.seen), len(want), err)
			}
		}
	}
	pushRound(0)
	pushRound(1)
	drain(cl)

	victim := c.Nodes[2]
	victim.Kill()
	pushRound(2)
	if err := c.Start(victim); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAllHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	pushRound(3)
	drain(cl.On(victim))

	for _, seen := range []map[string]int{leased, autoAcked} {
		for m := range want {
			if seen[m] != 1 {
				t.Fatalf("message %s delivered %d times", m, seen[m])
			}
		}
	}
	// Every node answers the queue's counts alike once it has applied
	// everything: 160 messages, each consumed by both groups.
	for _, n := range c.Nodes {
		if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
			var list struct {
				Queues []struct {
					Name       string
					Partitions int
					Messages   struct{ Total, Completed uint64 }
				}
			}
			cl.On(n).Do("GET", "/api/v1/resources/queues", nil, &list)
			for _, q := range list.Queues {
				if q.Name == queue {
					return q.Partitions == parts && q.Messages.Total == 4*parts && q.Messages.Completed == 4*parts, nil
				}
			}
			return false, nil
		}); err != nil {
			t.Fatalf("node %d does not count the queue as the others: %v", n.ID, err)
		}
	}
}

// A node stopped with SIGTERM writes each raft group's load image and
// boots from it without reading every partition back; one killed writes
// none and reads them all. Either way it comes back with the same state:
// the same counts, the leases it had given (acknowledged after the
// restarts through their lease ids), and every message delivered once.
func TestARestartedNodeLoadsItsImageOrReadsEveryPartition(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{"QUEEN_PARTITION_CACHE": "4"}})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 120*time.Second)
	cl := e2etest.NewClient(t, ctx, n)
	const queue, parts = "restarted-customers", 40
	var batch []e2etest.PushItem
	for p := range parts {
		name := fmt.Sprintf("customer-%02d", p)
		batch = append(batch, e2etest.PushItems(queue, name, name)...)
	}
	cl.Push(batch...)
	// Leases on 8 partitions, kept across both restarts.
	held := cl.MustPop(e2etest.PopPath(queue, "batch=8", "partitions=8", "subscriptionMode=all", "consumerGroup=billing", "leaseSeconds=600"), 8)

	counts := func() string {
		var list struct {
			Queues []struct {
				Name       string
				Partitions int
				Messages   struct{ Total, Pending, Processing, Completed uint64 }
			}
		}
		cl.Do("GET", "/api/v1/resources/queues", nil, &list)
		for _, q := range list.Queues {
			if q.Name == queue {
				return fmt.Sprintf("%d partitions %+v", q.Partitions, q.Messages)
			}
		}
		return "no queue"
	}
	before := counts()
	loaded := func(from string) int { return countLines(n.Log(), "boot: store loaded", from) }
	images, walks := loaded(`from="load image"`), loaded(`from=walk`)

	restart := func(stop func(), from string, had int) {
		t.Helper()
		stop()
		if err := c.Start(n); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitAllHealthy(ctx); err != nil {
			t.Fatal(err)
		}
		if got := loaded(from); got <= had {
			t.Fatalf("no group loaded with %s after the restart:\n%s", from, n.Tail(4000))
		}
		if n.Grep("load image not used") {
			t.Fatalf("an image was refused:\n%s", n.Tail(4000))
		}
		if got := counts(); got != before {
			t.Fatalf("after the restart the queue counts %s, before %s", got, before)
		}
	}
	restart(n.Stop, `from="load image"`, images)
	restart(n.Kill, `from=walk`, walks)

	// The leases survived: the rest of the queue pops, and the held
	// messages are acknowledged through their leases.
	seen := map[string]int{}
	for _, m := range held.Messages {
		var payload string
		e2etest.DecodeInto(t, m.Data, &payload)
		seen[payload]++
	}
	for _, r := range cl.AckAll(held, "completed") {
		if !r.Success {
			t.Fatalf("an ack through a lease given before the restarts: %+v", r)
		}
	}
	if err := harness.Poll(ctx, 10*time.Millisecond, func() (bool, error) {
		a, code := cl.Pop(e2etest.PopPath(queue, "batch=100", "partitions=8", "subscriptionMode=all", "consumerGroup=billing"))
		if code == 200 {
			for _, m := range a.Messages {
				var payload string
				e2etest.DecodeInto(t, m.Data, &payload)
				seen[payload]++
			}
			cl.AckAll(a, "completed")
		}
		return len(seen) == parts, nil
	}); err != nil {
		t.Fatalf("got %d of %d messages: %v", len(seen), parts, err)
	}
	for m, k := range seen {
		if k != 1 {
			t.Fatalf("message %s delivered %d times", m, k)
		}
	}
}

// countLines counts the lines of log holding both a and b.
func countLines(log, a, b string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, a) && strings.Contains(line, b) {
			n++
		}
	}
	return n
}
