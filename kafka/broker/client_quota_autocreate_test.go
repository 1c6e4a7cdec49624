package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/wire"
)

// TestAutoCreateChargesMutationRate: topics created automatically (by
// Metadata or by a produce) are charged to the client's
// controller_mutation_rate as Kafka's controller charges the CreateTopics
// a broker forwards for them: strictly, so a client in debt has its next
// automatic creation refused (UNKNOWN_TOPIC_OR_PARTITION, the client
// asks again, nothing created), and shares the bucket with CreateTopics;
// the Metadata answer carries no mutation throttle (Kafka throttles no
// forwarded request). Another client id is not limited.
func TestAutoCreateChargesMutationRate(t *testing.T) {
	n := startNode(t, func(c *Config) { c.DefaultPartitions = 4 })
	ctx := ctxFor(t)
	setQuota(t, n, "auto", quotaControllerMutationRate, 1) // a bucket of 10
	cl := n.client(kgo.ClientID("auto"))
	// 4 + 4 + 4: the third takes the bucket into debt (strict: a topic is
	// let through while the bucket is not in debt), the fourth is refused.
	resp := metadata(t, cl, true, "auto-1", "auto-2", "auto-3", "auto-4")
	for _, rt := range resp.Topics {
		want := int16(0)
		if *rt.Topic == "auto-4" {
			want = kerr.UnknownTopicOrPartition.Code
		}
		if rt.ErrorCode != want {
			t.Fatalf("topic %s: code %d, want %d", *rt.Topic, rt.ErrorCode, want)
		}
	}
	if resp.ThrottleMillis != 0 {
		t.Fatalf("a Metadata auto-creating topics answered throttle %d ms", resp.ThrottleMillis)
	}
	if _, ok := n.engine.KafkaTopic(wire.DefaultTenant, "auto-4"); ok {
		t.Fatal("a refused automatic creation created the topic")
	}
	// The same bucket as CreateTopics'.
	res, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, "auto-explicit")
	if err != nil || !errors.Is(res["auto-explicit"].Err, kerr.ThrottlingQuotaExceeded) {
		t.Fatalf("CreateTopics after automatic creations took the bucket into debt: %v %v", err, res["auto-explicit"].Err)
	}
	// A produce's automatic creation is refused alike.
	prod := n.client(kgo.ClientID("auto"), kgo.AllowAutoTopicCreation(), kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(2*time.Second))
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "auto-5", Value: []byte("v")}).FirstErr(); err == nil {
		t.Fatal("a produce in debt auto-created its topic")
	}
	if _, ok := n.engine.KafkaTopic(wire.DefaultTenant, "auto-5"); ok {
		t.Fatal("a produce in debt auto-created its topic")
	}
	// Another client id is not limited.
	for _, rt := range metadata(t, n.client(kgo.ClientID("free")), true, "free-1", "free-2", "free-3", "free-4").Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("another client id: %s code %d", *rt.Topic, rt.ErrorCode)
		}
	}
}
