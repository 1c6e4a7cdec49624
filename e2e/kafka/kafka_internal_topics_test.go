package kafka

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// TestKafkaRegexConsumerSkipsInternalTopics: Metadata lists
// __consumer_offsets and __transaction_state marked internal, and a
// franz-go group consumer subscribed to ".*" consumes the ordinary topic
// and leaves the internal ones out, as against Apache Kafka.
func TestKafkaRegexConsumerSkipsInternalTopics(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: e2etest.GroupEnv})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 90*time.Second)
	pushOrders(ctx, t, n.URL(), 3)

	md := e2etest.KafkaRequest[*kmsg.MetadataResponse](ctx, t, e2etest.KafkaClient(t, n), kmsg.NewPtrMetadataRequest())
	internal := map[string]bool{}
	for _, rt := range md.Topics {
		internal[*rt.Topic] = rt.IsInternal
	}
	if !internal["__consumer_offsets"] || !internal["__transaction_state"] || internal["orders"] {
		t.Fatalf("internal flags in an all-topics Metadata: %v", internal)
	}

	got := map[string]int{}
	cl := e2etest.KafkaClient(t, n, kgo.ConsumerGroup("regex"), kgo.ConsumeTopics(".*"), kgo.ConsumeRegex(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.SessionTimeout(3*time.Second), kgo.MetadataMinAge(100*time.Millisecond))
	pollCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for got["orders"] < 15 && pollCtx.Err() == nil {
		fs := cl.PollFetches(pollCtx)
		fs.EachRecord(func(r *kgo.Record) { got[r.Topic]++ })
		fs.EachError(func(topic string, p int32, err error) {
			if pollCtx.Err() == nil {
				t.Errorf("fetch %s/%d: %v", topic, p, err)
			}
		})
	}
	if fmt.Sprint(got) != "map[orders:15]" {
		t.Fatalf("records consumed by topic: %v", got)
	}
	if topics := cl.GetConsumeTopics(); !slices.Equal(topics, []string{"orders"}) {
		t.Fatalf("regex consumer subscribed to %v", topics)
	}
}
