package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/harness"
)

// consumerProtocolEnv makes KIP-848 members heartbeat often enough for a
// test to see handovers quickly.
var consumerProtocolEnv = map[string]string{
	"QUEEN_KAFKA_CONSUMER_GROUP_HEARTBEAT_INTERVAL_MS": "200",
	"QUEEN_KAFKA_CONSUMER_GROUP_SESSION_TIMEOUT_MS":    "5000",
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
			env := map[string]string{}
			for k, v := range groupEnv {
				env[k] = v
			}
			for k, v := range consumerProtocolEnv {
				env[k] = v
			}
			c := startCluster(t, harness.Options{Nodes: 1, Env: env})
			n := c.Nodes[0]
			ctx := deadline(t, 2*time.Minute)
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
			g := kreq[*kmsg.ConsumerGroupDescribeResponse](ctx, t, kafkaClient(t, n), d).Groups[0]
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
