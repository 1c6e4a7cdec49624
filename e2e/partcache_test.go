package e2e

import (
	"fmt"
	"testing"
	"time"

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
	c := startCluster(t, harness.Options{Nodes: 3, Env: map[string]string{"QUEEN_PARTITION_CACHE": "4"}})
	ctx := deadline(t, 150*time.Second)
	cl := newClient(t, ctx, c.Nodes[0])
	const queue, parts = "many-customers", 40
	want := map[string]int{}
	pushRound := func(round int) {
		var batch []pushItem
		for p := range parts {
			name := fmt.Sprintf("customer-%02d", p)
			batch = append(batch, items(queue, name, fmt.Sprintf("%s/%d", name, round))...)
			want[fmt.Sprintf("%s/%d", name, round)] = 0
		}
		cl.push(batch...)
	}
	leased, autoAcked := map[string]int{}, map[string]int{}
	// drain pops until both groups have every message pushed so far.
	drain := func(on *client) {
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
				a, code := on.pop(popPath(queue, query...))
				if code == 200 {
					for _, m := range a.Messages {
						var payload string
						decodeInto(t, m.Data, &payload)
						g.seen[payload]++
					}
					if g.flag == "" {
						on.ackAll(a, "completed")
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
	drain(cl.on(victim))

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
			cl.on(n).do("GET", "/api/v1/resources/queues", nil, &list)
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
