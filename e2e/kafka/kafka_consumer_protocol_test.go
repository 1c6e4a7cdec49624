package kafka

import (
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// consumerProtocolEnv makes KIP-848 members heartbeat often enough for a
// test to see handovers quickly.
var consumerProtocolEnv = map[string]string{
	"QUEEN_KAFKA_CONSUMER_GROUP_HEARTBEAT_INTERVAL_MS": "200",
	"QUEEN_KAFKA_CONSUMER_GROUP_SESSION_TIMEOUT_MS":    "5000",
}

// consumerProtocolClusterEnv is the group settings of the group tests with
// consumerProtocolEnv.
func consumerProtocolClusterEnv() map[string]string {
	env := maps.Clone(e2etest.GroupEnv)
	maps.Copy(env, consumerProtocolEnv)
	return env
}

// TestKafkaConsumerProtocolGroup runs two franz-go consumers with the
// KIP-848 protocol (kgo.ServerSideBalancer: the coordinator assigns) over
// four partitions: they share the partitions, no partition is ever given
// to one while the other owns it, every record is delivered, the group is
// described as a consumer group, and when one leaves the other takes over
// its partitions.
func TestKafkaConsumerProtocolGroup(t *testing.T) {
	for _, balancer := range []kgo.GroupBalancer{kgo.RangeBalancer(), kgo.StickyBalancer()} {
		t.Run(balancer.ProtocolName(), func(t *testing.T) {
			c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: consumerProtocolClusterEnv()})
			n := c.Nodes[0]
			ctx := e2etest.Deadline(t, 2*time.Minute)
			pushOrders(ctx, t, n.URL(), 4)
			own := &ownership{owner: map[int32]string{}}
			seeds := []string{n.KafkaAddr}
			members := []*groupConsumer{
				startGroupConsumerOf(t, seeds, "next-gen", "m0", own, balancer, kgo.ServerSideBalancer()),
				startGroupConsumerOf(t, seeds, "next-gen", "m1", own, balancer, kgo.ServerSideBalancer()),
			}
			delivered := func() int { return deliveredBy(members) }
			if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
				return own.settled(4, "m0", "m1") && delivered() == 20, nil
			}); err != nil {
				t.Fatalf("two members never shared the partitions (%v, delivered %d): %v", own, delivered(), err)
			}

			d := kmsg.NewPtrConsumerGroupDescribeRequest()
			d.Groups = []string{"next-gen"}
			g := e2etest.KafkaRequest[*kmsg.ConsumerGroupDescribeResponse](ctx, t, e2etest.KafkaClient(t, n), d).Groups[0]
			if g.ErrorCode != 0 || len(g.Members) != 2 || g.Epoch < 1 {
				t.Fatalf("describe: %+v", g)
			}

			members[1].close()
			if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
				return own.settled(4, "m0"), nil
			}); err != nil {
				t.Fatalf("the remaining member never took over (%v): %v", own, err)
			}
			if len(own.conflicts) > 0 {
				t.Fatalf("double ownership: %v", own.conflicts)
			}
		})
	}
}

// TestKafkaConsumerProtocolGroupSurvivesACoordinatorKill: on three nodes,
// the coordinator of a KIP-848 group is SIGKILLed; the new one continues
// the group from what raft recorded, the members go on at their epochs,
// and every record pushed after the kill is delivered with no partition
// owned twice.
func TestKafkaConsumerProtocolGroupSurvivesACoordinatorKill(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: consumerProtocolClusterEnv()})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	pushOrders(ctx, t, c.Nodes[0].URL(), 4)
	seeds := kafkaSeeds(c)
	own := &ownership{owner: map[int32]string{}}
	members := []*groupConsumer{
		startGroupConsumerOf(t, seeds, "next-gen", "m0", own, kgo.StickyBalancer(), kgo.ServerSideBalancer()),
		startGroupConsumerOf(t, seeds, "next-gen", "m1", own, kgo.StickyBalancer(), kgo.ServerSideBalancer()),
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		return own.settled(4, "m0", "m1") && deliveredBy(members) == 20, nil
	}); err != nil {
		t.Fatalf("before the kill: %v delivered %d: %v", own, deliveredBy(members), err)
	}
	type membership struct {
		id    string
		epoch int32
	}
	before := map[string]membership{}
	for _, m := range members {
		id, epoch := m.cl.GroupMetadata()
		before[m.name] = membership{id, epoch}
	}
	killed, survivor := killCoordinator(ctx, t, c, "next-gen")
	pushOrders(ctx, t, survivor.URL(), 4) // offsets 5..9 of each partition
	// Give the members time to heartbeat the new coordinator many times
	// over (members it did not know would join again under new ids).
	coord := newCoordinatorFinder(t, c, survivor, killed)
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{"next-gen"}
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		g := e2etest.KafkaRequest[*kmsg.ConsumerGroupDescribeResponse](ctx, t, coord.client(ctx, t, "next-gen"), d).Groups[0]
		return g.ErrorCode == 0 && len(g.Members) == 2, nil
	}); err != nil {
		t.Fatalf("the group never came back at a new coordinator: %v", err)
	}
	settle := time.Now().Add(3 * time.Second)
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) { return time.Now().After(settle), nil }); err != nil {
		t.Fatal(err)
	}
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		return own.settled(4, "m0", "m1") && deliveredBy(members) == 40, nil
	}); err != nil {
		t.Fatalf("after the kill: %v delivered %d: %v", own, deliveredBy(members), err)
	}
	if len(own.conflicts) > 0 {
		t.Fatalf("double ownership: %v", own.conflicts)
	}
	// The members kept their member ids and epochs: the group went on
	// where it was (members the new coordinator did not know would have
	// joined again under new ids).
	for _, m := range members {
		if id, epoch := m.cl.GroupMetadata(); (membership{id, epoch}) != before[m.name] {
			t.Errorf("%s is %s at epoch %d after the kill, %+v before", m.name, id, epoch, before[m.name])
		}
	}
}
