package e2e

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

	"github.com/queen-mq/queen/e2e/harness"
)

// rebalanceLog counts one static consumer's assignment callbacks.
type rebalanceLog struct {
	mu                        sync.Mutex
	assigned, revoked, lost   int
	owned                     []int32
	assignedCalls, revokedSet [][]int32
}

func (l *rebalanceLog) snapshot() (assigned, revoked, lost int, owned []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.assigned, l.revoked, l.lost, slices.Clone(l.owned)
}

func (l *rebalanceLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("assigned %v revoked %v lost %d owning %v", l.assignedCalls, l.revokedSet, l.lost, l.owned)
}

// staticConsumer starts a franz-go group consumer of orders with
// group.instance.id instance, polling in the background until the test
// ends or stop is called.
func staticConsumer(t *testing.T, n *harness.Node, group, instance string, log *rebalanceLog) (cl *kgo.Client, stop func()) {
	t.Helper()
	onTopic := func(m map[string][]int32) []int32 { return m["orders"] }
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.ClientID(instance),
		kgo.ConsumerGroup(group), kgo.InstanceID(instance), kgo.ConsumeTopics("orders"),
		kgo.Balancers(kgo.RangeBalancer()), // eager: any rebalance revokes everything
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.RebalanceTimeout(10*time.Second), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			cl.Close()
		})
	}
	t.Cleanup(stop)
	return cl, stop
}

// TestKafkaStaticMemberRestartsWithoutRebalance: two franz-go consumers
// with group.instance.id share four partitions; one is closed and started
// again within its session timeout. The other is never told to rebalance
// (no revoke, no new assignment, the same generation), the restarted one
// gets its old partitions back, and the member id it had before is fenced.
func TestKafkaStaticMemberRestartsWithoutRebalance(t *testing.T) {
	c := startCluster(t, harness.Options{Nodes: 1, Env: groupEnv})
	n := c.Nodes[0]
	ctx := deadline(t, 2*time.Minute)
	pushOrders(ctx, t, n.URL(), 4)

	var logA, logB rebalanceLog
	a, _ := staticConsumer(t, n, "static", "inst-a", &logA)
	b, stopB := staticConsumer(t, n, "static", "inst-b", &logB)
	settled := func() bool {
		_, _, _, ownA := logA.snapshot()
		_, _, _, ownB := logB.snapshot()
		return len(ownA) == 2 && len(ownB) == 2
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) { return settled(), nil }); err != nil {
		t.Fatalf("two static members never shared the partitions (a: %v; b: %v): %v", &logA, &logB, err)
	}
	assignedA, revokedA, lostA, ownedA := logA.snapshot()
	_, _, _, ownedB := logB.snapshot()
	_, genA := a.GroupMetadata()
	oldB, genB := b.GroupMetadata()
	if genA != genB || oldB == "" {
		t.Fatalf("members at generations %d and %d (b is %q)", genA, genB, oldB)
	}

	stopB() // a static member sends no LeaveGroup: its place waits for it
	var logB2 rebalanceLog
	b2, _ := staticConsumer(t, n, "static", "inst-b", &logB2)
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		_, _, _, owned := logB2.snapshot()
		return slices.Equal(owned, ownedB), nil
	}); err != nil {
		t.Fatalf("restarted member never got its partitions %v back (%v): %v", ownedB, &logB2, err)
	}
	newB, genB2 := b2.GroupMetadata()
	if newB == oldB || genB2 != genB {
		t.Fatalf("restarted member is %q at generation %d; before %q at %d", newB, genB2, oldB, genB)
	}

	// Give a rebalance, had one started, time to reach the other member:
	// a dozen of its heartbeats.
	quiet := time.Now().Add(4 * time.Second)
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		as, rv, ls, _ := logA.snapshot()
		if as != assignedA || rv != revokedA || ls != lostA {
			return false, fmt.Errorf("the other member saw a rebalance: %v", &logA)
		}
		return time.Now().After(quiet), nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, owned := logA.snapshot(); !slices.Equal(owned, ownedA) {
		t.Fatalf("the other member owns %v, before %v", owned, ownedA)
	}
	if _, gen := a.GroupMetadata(); gen != genA {
		t.Fatalf("the other member is at generation %d, before %d", gen, genA)
	}

	// The old incarnation's member id is fenced.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.InstanceID, hb.Generation = "static", oldB, kmsg.StringPtr("inst-b"), genB
	if r := kreq[*kmsg.HeartbeatResponse](ctx, t, kafkaClient(t, n), hb); r.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("heartbeat of the replaced member id: %v, want FENCED_INSTANCE_ID", kerr.ErrorForCode(r.ErrorCode))
	}
	codes := commitOffsetsAs(ctx, t, kafkaClient(t, n), "static", oldB, kmsg.StringPtr("inst-b"), genB, map[int32]int64{ownedB[0]: 0})
	if codes[ownedB[0]] != kerr.FencedInstanceID.Code {
		t.Fatalf("commit of the replaced member id: %v, want FENCED_INSTANCE_ID", kerr.ErrorForCode(codes[ownedB[0]]))
	}
}
