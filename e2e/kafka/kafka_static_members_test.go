package kafka

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// rebalanceLog counts one static consumer's assignment callbacks, and
// keeps the client's own log for failure messages.
type rebalanceLog struct {
	mu                        sync.Mutex
	assigned, revoked, lost   int
	owned                     []int32
	assignedCalls, revokedSet [][]int32
	client                    e2etest.RingLog
}

func (l *rebalanceLog) snapshot() (assigned, revoked, lost int, owned []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.assigned, l.revoked, l.lost, slices.Clone(l.owned)
}

func (l *rebalanceLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("assigned %v revoked %v lost %d owning %v; client log:\n%s", l.assignedCalls, l.revokedSet, l.lost, l.owned,
		l.client.Tail(4000))
}

// staticConsumer starts a franz-go group consumer of orders with
// group.instance.id instance, polling in the background until the test
// ends or stop is called.
func staticConsumer(t *testing.T, seeds []string, group, instance string, log *rebalanceLog) (cl *kgo.Client, stop func()) {
	t.Helper()
	onTopic := func(m map[string][]int32) []int32 { return m["orders"] }
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID(instance),
		kgo.ConsumerGroup(group), kgo.InstanceID(instance), kgo.ConsumeTopics("orders"),
		kgo.Balancers(kgo.RangeBalancer()), // eager: any rebalance revokes everything
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.RebalanceTimeout(10*time.Second), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.WithLogger(kgo.BasicLogger(&log.client, kgo.LogLevelInfo, func() string { return time.Now().UTC().Format("15:04:05.000 ") })),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			log.mu.Lock()
			defer log.mu.Unlock()
			if ps := onTopic(m); len(ps) > 0 {
				log.assigned++
				log.assignedCalls = append(log.assignedCalls, ps)
				log.owned = append(log.owned, ps...)
				slices.Sort(log.owned)
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			log.mu.Lock()
			defer log.mu.Unlock()
			if ps := onTopic(m); len(ps) > 0 {
				log.revoked++
				log.revokedSet = append(log.revokedSet, ps)
				log.owned = slices.DeleteFunc(log.owned, func(p int32) bool { return slices.Contains(ps, p) })
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			log.mu.Lock()
			defer log.mu.Unlock()
			if len(onTopic(m)) > 0 {
				log.lost++
				log.owned = nil
			}
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	return cl, e2etest.PollInBackground(t, cl)
}

// staticPair is two static consumers of orders (instances inst-a and
// inst-b) sharing its four partitions, and what each saw.
type staticPair struct {
	seeds      []string
	a, b       *kgo.Client
	stopB      func()
	logA, logB *rebalanceLog

	// A's callbacks, ownership and generation once settled.
	assignedA, revokedA, lostA int
	ownedA                     []int32
	genA                       int32
}

func startStaticPair(ctx context.Context, t *testing.T, seeds []string) *staticPair {
	t.Helper()
	p := &staticPair{seeds: seeds, logA: &rebalanceLog{client: e2etest.RingLog{Max: 64 << 10}}, logB: &rebalanceLog{client: e2etest.RingLog{Max: 64 << 10}}}
	p.a, _ = staticConsumer(t, seeds, "static", "inst-a", p.logA)
	p.b, p.stopB = staticConsumer(t, seeds, "static", "inst-b", p.logB)
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		_, _, _, ownA := p.logA.snapshot()
		_, _, _, ownB := p.logB.snapshot()
		return len(ownA) == 2 && len(ownB) == 2, nil
	}); err != nil {
		t.Fatalf("two static members never shared the partitions (a: %v; b: %v): %v", p.logA, p.logB, err)
	}
	p.snapshotA()
	return p
}

// snapshotA takes a's callbacks, ownership and generation as the state
// checkAUndisturbed compares with.
func (p *staticPair) snapshotA() {
	p.assignedA, p.revokedA, p.lostA, p.ownedA = p.logA.snapshot()
	_, p.genA = p.a.GroupMetadata()
}

// restartB closes b and starts it again with the same instance id, and
// waits until it owns its partitions again at the same generation. It
// returns b's member id and generation before the restart.
func (p *staticPair) restartB(ctx context.Context, t *testing.T) (string, int32) {
	t.Helper()
	oldB, genB := p.b.GroupMetadata()
	_, _, _, ownedB := p.logB.snapshot()
	if oldB == "" || genB != p.genA {
		t.Fatalf("b is %q at generation %d, a at %d", oldB, genB, p.genA)
	}
	p.stopB() // a static member sends no LeaveGroup: its place waits for it
	p.logB = &rebalanceLog{client: e2etest.RingLog{Max: 64 << 10}}
	p.b, p.stopB = staticConsumer(t, p.seeds, "static", "inst-b", p.logB)
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		_, _, _, owned := p.logB.snapshot()
		return slices.Equal(owned, ownedB), nil
	}); err != nil {
		t.Fatalf("restarted member never got its partitions %v back (%v): %v", ownedB, p.logB, err)
	}
	if newB, gen := p.b.GroupMetadata(); newB == oldB || gen != genB {
		t.Fatalf("restarted member is %q at generation %d; before %q at %d", newB, gen, oldB, genB)
	}
	return oldB, genB
}

// checkAUndisturbed waits long enough for a rebalance, had one started,
// to reach a (a dozen of its heartbeats), then checks it never saw one:
// no revoke, no assignment, the same partitions and generation.
func (p *staticPair) checkAUndisturbed(ctx context.Context, t *testing.T) {
	t.Helper()
	quiet := time.Now().Add(4 * time.Second)
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		as, rv, ls, _ := p.logA.snapshot()
		if as != p.assignedA || rv != p.revokedA || ls != p.lostA {
			return false, fmt.Errorf("the other member saw a rebalance: %v", p.logA)
		}
		return time.Now().After(quiet), nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, owned := p.logA.snapshot(); !slices.Equal(owned, p.ownedA) {
		t.Fatalf("the other member owns %v, before %v", owned, p.ownedA)
	}
	if _, gen := p.a.GroupMetadata(); gen != p.genA {
		t.Fatalf("the other member is at generation %d, before %d", gen, p.genA)
	}
}

// checkFenced checks that b's member id before its restart is fenced on
// Heartbeat and OffsetCommit at the group's coordinator, which cl reaches.
func checkFenced(ctx context.Context, t *testing.T, cl *kgo.Client, oldB string, gen int32) {
	t.Helper()
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.InstanceID, hb.Generation = "static", oldB, kmsg.StringPtr("inst-b"), gen
	if r := e2etest.KafkaRequest[*kmsg.HeartbeatResponse](ctx, t, cl, hb); r.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("heartbeat of the replaced member id: %v, want FENCED_INSTANCE_ID", kerr.ErrorForCode(r.ErrorCode))
	}
	codes := e2etest.CommitOffsetsAs(ctx, t, cl, "static", oldB, kmsg.StringPtr("inst-b"), gen, map[int32]int64{0: 0})
	if codes[0] != kerr.FencedInstanceID.Code {
		t.Fatalf("commit of the replaced member id: %v, want FENCED_INSTANCE_ID", kerr.ErrorForCode(codes[0]))
	}
}

// TestKafkaStaticMemberRestartsWithoutRebalance: two franz-go consumers
// with group.instance.id share four partitions; one is closed and started
// again within its session timeout. The other is never told to rebalance
// (no revoke, no new assignment, the same generation), the restarted one
// gets its old partitions back, and the member id it had before is fenced.
func TestKafkaStaticMemberRestartsWithoutRebalance(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: e2etest.GroupEnv})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 2*time.Minute)
	pushOrders(ctx, t, n.URL(), 4)
	p := startStaticPair(ctx, t, []string{n.KafkaAddr})
	oldB, gen := p.restartB(ctx, t)
	p.checkAUndisturbed(ctx, t)
	checkFenced(ctx, t, e2etest.KafkaClient(t, n), oldB, gen)
}

// TestKafkaStaticMembersSurviveACoordinatorKill: on three nodes, the
// group's coordinator is SIGKILLed; the new coordinator continues the
// group from what raft recorded, instance ids included, so a static member
// restarted there still takes its old place without a rebalance, its old
// member id fenced. (The failover itself usually costs no rebalance
// either, but a client whose heartbeats fail for long enough rejoins, and
// a leader rejoining rebalances, as in Kafka: the other member's state is
// taken again once the group is stable at the new coordinator.)
func TestKafkaStaticMembersSurviveACoordinatorKill(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: e2etest.GroupEnv})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	pushOrders(ctx, t, c.Nodes[0].URL(), 4)
	p := startStaticPair(ctx, t, kafkaSeeds(c))
	killed, survivor := killCoordinator(ctx, t, c, "static")
	// Both members reach the new coordinator and heartbeat there. The
	// group can look stable there (restored from raft) while a member's
	// heartbeat is still retrying the dead node: franz-go ends its session
	// (partitions lost, then a rejoin) if the election outlasts its
	// retries, as against Kafka. So the group counts as settled once it is
	// stable and a's callbacks have not moved for a while.
	coord := newCoordinatorFinder(t, c, survivor, killed)
	var lastA string
	var quietSince time.Time
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		if as, rv, ls, own := p.logA.snapshot(); fmt.Sprint(as, rv, ls, own) != lastA {
			lastA, quietSince = fmt.Sprint(as, rv, ls, own), time.Now()
		}
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups = []string{"static"}
		g := e2etest.KafkaRequest[*kmsg.DescribeGroupsResponse](ctx, t, coord.client(ctx, t, "static"), dg).Groups[0]
		if g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != 2 {
			return false, nil
		}
		for _, m := range g.Members {
			if m.InstanceID == nil {
				return false, fmt.Errorf("member %s without its instance id at the new coordinator", m.MemberID)
			}
		}
		_, genA := p.a.GroupMetadata()
		_, genB := p.b.GroupMetadata()
		_, _, _, ownA := p.logA.snapshot()
		_, _, _, ownB := p.logB.snapshot()
		return genA == genB && len(ownA) == 2 && len(ownB) == 2 && time.Since(quietSince) > 5*time.Second, nil
	}); err != nil {
		t.Fatalf("the group never came back at a new coordinator: %v", err)
	}
	p.snapshotA()
	oldB, gen := p.restartB(ctx, t)
	p.checkAUndisturbed(ctx, t)
	checkFenced(ctx, t, coord.client(ctx, t, "static"), oldB, gen)
}
