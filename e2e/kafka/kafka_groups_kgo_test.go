package kafka

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// groupConsumer is one franz-go consumer-group member polling in the
// background. Its assignment callbacks keep the partitions it owns, and
// check that no other live member owns a partition it is given.
type groupConsumer struct {
	name string
	cl   *kgo.Client
	peer *ownership

	mu   sync.Mutex
	got  map[string]int // "partition/offset" -> times delivered
	stop context.CancelFunc
	done chan struct{}
}

// ownership is who owns which partition across a test's consumers.
type ownership struct {
	mu        sync.Mutex
	owner     map[int32]string
	conflicts []string
}

func (o *ownership) assign(name string, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		if prev, ok := o.owner[p]; ok && prev != name {
			o.conflicts = append(o.conflicts, fmt.Sprintf("partition %d given to %s while %s owns it", p, name, prev))
		}
		o.owner[p] = name
	}
}

func (o *ownership) revoke(name string, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		if o.owner[p] == name {
			delete(o.owner, p)
		}
	}
}

// settled reports whether partitions 0..n-1 are each owned by one of
// members and every member owns at least one.
func (o *ownership) settled(n int32, members ...string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	per := map[string]int{}
	for p := range n {
		who, ok := o.owner[p]
		if !ok || !slices.Contains(members, who) {
			return false
		}
		per[who]++
	}
	return len(o.owner) == int(n) && len(per) == len(members)
}

func (o *ownership) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.owner)
}

func startGroupConsumer(t *testing.T, n *harness.Node, group, name string, own *ownership, balancer kgo.GroupBalancer) *groupConsumer {
	t.Helper()
	return startGroupConsumerOf(t, []string{n.KafkaAddr}, group, name, own, balancer)
}

func startGroupConsumerOf(t *testing.T, seeds []string, group, name string, own *ownership, balancer kgo.GroupBalancer, extra ...kgo.Opt) *groupConsumer {
	t.Helper()
	gc := &groupConsumer{name: name, peer: own, got: map[string]int{}, done: make(chan struct{})}
	topic := func(m map[string][]int32) []int32 { return m["orders"] }
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID(name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics("orders"), kgo.Balancers(balancer),
		kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.RebalanceTimeout(10 * time.Second), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.assign(name, topic(m)) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.revoke(name, topic(m)) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.revoke(name, topic(m)) }),
	}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	gc.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	gc.stop = cancel
	go func() {
		defer close(gc.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				gc.mu.Lock()
				gc.got[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]++
				gc.mu.Unlock()
			})
		}
	}()
	t.Cleanup(gc.close)
	return gc
}

// close stops polling, commits what was polled and leaves the group.
func (gc *groupConsumer) close() {
	select {
	case <-gc.done:
		return
	default:
	}
	gc.stop()
	<-gc.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = gc.cl.CommitUncommittedOffsets(ctx)
	gc.cl.Close()
}

// deliveredBy counts the distinct records members have delivered.
func deliveredBy(members []*groupConsumer) int {
	all := map[string]bool{}
	for _, m := range members {
		for k := range m.delivered() {
			all[k] = true
		}
	}
	return len(all)
}

func (gc *groupConsumer) delivered() map[string]int {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return maps.Clone(gc.got)
}

// TestKafkaConsumerGroupOfThreeRebalancesWhenOneLeaves runs three franz-go
// members over six partitions with an eager and with the cooperative-sticky
// assignor: every partition is owned by exactly one member before and after
// one member leaves, no partition is ever given to a member while another
// owns it, and every record is delivered.
func TestKafkaConsumerGroupOfThreeRebalancesWhenOneLeaves(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"range", kgo.RangeBalancer()},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: e2etest.GroupEnv})
			n := c.Nodes[0]
			ctx := e2etest.Deadline(t, 120*time.Second)
			pushOrders(ctx, t, n.URL(), 6)
			own := &ownership{owner: map[int32]string{}}
			var members []*groupConsumer
			for i := range 3 {
				members = append(members, startGroupConsumer(t, n, "three", fmt.Sprintf("m%d", i), own, tc.balancer))
			}
			if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
				return own.settled(6, "m0", "m1", "m2"), nil
			}); err != nil {
				t.Fatalf("three members never shared the partitions (%v): %v", own, err)
			}
			members[2].close()
			if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
				return own.settled(6, "m0", "m1"), nil
			}); err != nil {
				t.Fatalf("two members never took over the third's partitions (%v): %v", own, err)
			}
			if len(own.conflicts) > 0 {
				t.Fatalf("double ownership: %v", own.conflicts)
			}
			if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
				all := map[string]int{}
				for _, m := range members {
					for k := range m.delivered() {
						all[k]++
					}
				}
				return len(all) == 30, nil
			}); err != nil {
				t.Fatalf("not every record was delivered: %v", err)
			}
		})
	}
}

// TestKafkaCommittedOffsetsSurviveAClientRestart consumes a topic in a
// group, stops the client, and checks that the next client of the group
// starts where the first committed, and that HTTP shows the group.
func TestKafkaCommittedOffsetsSurviveAClientRestart(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: e2etest.GroupEnv})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 90*time.Second)
	pushOrders(ctx, t, n.URL(), 3)
	own := &ownership{owner: map[int32]string{}}
	first := startGroupConsumer(t, n, "restart", "first", own, kgo.RangeBalancer())
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) { return len(first.delivered()) == 15, nil }); err != nil {
		t.Fatalf("first client consumed %d of 15: %v", len(first.delivered()), err)
	}
	first.close()
	if got := fetchOffsets(ctx, t, e2etest.KafkaClient(t, n), "restart", 3); fmt.Sprint(got) != "[5 5 5]" {
		t.Fatalf("committed offsets after the first client: %v", got)
	}
	if row := httpGroup(ctx, t, n.URL(), "restart", "orders"); row.TotalLag != 0 || row.PartitionCursors != 3 {
		t.Fatalf("GET /api/v1/consumer-groups row after the first client: %+v", row)
	}
	pushOrders(ctx, t, n.URL(), 3) // offsets 5..9 of each partition
	second := startGroupConsumer(t, n, "restart", "second", own, kgo.RangeBalancer())
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) { return len(second.delivered()) >= 15, nil }); err != nil {
		t.Fatalf("second client consumed %d of 15: %v", len(second.delivered()), err)
	}
	for k := range second.delivered() {
		var p, off int
		fmt.Sscanf(k, "%d/%d", &p, &off)
		if off < 5 {
			t.Fatalf("second client got %s, committed before it started", k)
		}
	}
}

// startSettledPair pushes 20 orders over 4 partitions, starts two franz-go
// members m0 and m1 of group on every node's Kafka port, and waits until
// they share the partitions and have consumed everything. delivered counts
// the distinct records the pair consumed.
func startSettledPair(ctx context.Context, t *testing.T, c *harness.Cluster, group string) (members []*groupConsumer, own *ownership, delivered func() int) {
	t.Helper()
	pushOrders(ctx, t, c.Nodes[0].URL(), 4)
	seeds := kafkaSeeds(c)
	own = &ownership{owner: map[int32]string{}}
	members = []*groupConsumer{
		startGroupConsumerOf(t, seeds, group, "m0", own, kgo.CooperativeStickyBalancer()),
		startGroupConsumerOf(t, seeds, group, "m1", own, kgo.CooperativeStickyBalancer()),
	}
	delivered = func() int { return deliveredBy(members) }
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		return own.settled(4, "m0", "m1") && delivered() == 20, nil
	}); err != nil {
		t.Fatalf("group %s did not settle: %v delivered %d: %v", group, own, delivered(), err)
	}
	return members, own, delivered
}

// TestKafkaConsumerGroupSurvivesALeaderKill runs two franz-go members on a
// 3-node cluster and SIGKILLs the group's coordinator (the leader of the raft
// group its id hashes to): the members find the new one, rebuild the group
// there, and go on consuming from the committed offsets.
func TestKafkaConsumerGroupSurvivesALeaderKill(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: e2etest.GroupEnv})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	_, own, delivered := startSettledPair(ctx, t, c, "failover")
	_, survivor := killCoordinator(ctx, t, c, "failover")
	pushOrders(ctx, t, survivor.URL(), 4) // offsets 5..9 of each partition
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		return own.settled(4, "m0", "m1") && delivered() == 40, nil
	}); err != nil {
		t.Fatalf("after the kill: %v delivered %d: %v", own, delivered(), err)
	}
	if len(own.conflicts) > 0 {
		t.Fatalf("double ownership: %v", own.conflicts)
	}
}

// kafkaSeeds is every node's Kafka address.
func kafkaSeeds(c *harness.Cluster) []string {
	var seeds []string
	for _, n := range c.Nodes {
		seeds = append(seeds, n.KafkaAddr)
	}
	return seeds
}

// killCoordinator SIGKILLs the node coordinating group and returns its id
// and a node still running.
func killCoordinator(ctx context.Context, t *testing.T, c *harness.Cluster, group string) (int32, *harness.Node) {
	t.Helper()
	coord := findCoordinator(ctx, t, e2etest.KafkaClient(t, c.Nodes[0]), group)
	var survivor *harness.Node
	for _, n := range c.Nodes {
		if int32(n.ID) == coord.NodeID {
			n.Kill()
		} else {
			survivor = n
		}
	}
	return coord.NodeID, survivor
}

// coordinatorFinder finds a group's coordinator after a node was killed,
// asking a node still running each time (leadership may move on), and
// keeps one client per node.
type coordinatorFinder struct {
	c       *harness.Cluster
	asker   *kgo.Client
	killed  int32
	clients map[int32]*kgo.Client
}

func newCoordinatorFinder(t *testing.T, c *harness.Cluster, survivor *harness.Node, killed int32) *coordinatorFinder {
	return &coordinatorFinder{c: c, asker: e2etest.KafkaClient(t, survivor), killed: killed, clients: map[int32]*kgo.Client{}}
}

// client waits until a coordinator of group other than the killed node is
// named, and returns a client of it.
func (f *coordinatorFinder) client(ctx context.Context, t *testing.T, group string) *kgo.Client {
	t.Helper()
	var cl *kgo.Client
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		now := findCoordinator(ctx, t, f.asker, group).NodeID
		for _, n := range f.c.Nodes {
			if int32(n.ID) == now && now != f.killed {
				if f.clients[now] == nil {
					f.clients[now] = e2etest.KafkaClient(t, n)
				}
				cl = f.clients[now]
			}
		}
		return cl != nil, nil
	}); err != nil {
		t.Fatalf("no new coordinator of %s: %v", group, err)
	}
	return cl
}
