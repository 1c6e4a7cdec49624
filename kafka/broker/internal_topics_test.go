package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/wire"
)

// TestInternalTopicsListedAsInternal: a Metadata for all topics lists
// __consumer_offsets and __transaction_state marked internal, one
// partition per raft group led by that group's leader; asking for one by
// name never creates it; creating, deleting or listing offsets of one
// answers as Kafka would for an empty internal topic.
func TestInternalTopicsListedAsInternal(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client()
	createTopic(t, cl, "plain", 1)

	all := metadata(t, cl, false)
	byName := map[string]kmsg.MetadataResponseTopic{}
	for _, rt := range all.Topics {
		byName[*rt.Topic] = rt
	}
	if byName["plain"].IsInternal {
		t.Fatalf("plain topic listed internal: %+v", byName["plain"])
	}
	groups := n.engine.TenantGroups(wire.DefaultTenant)
	if len(groups) != raftgroupstest.Groups {
		t.Fatalf("tenant groups %v", groups)
	}
	for _, name := range internalTopics {
		rt, ok := byName[name]
		if !ok || !rt.IsInternal || rt.ErrorCode != 0 || len(rt.Partitions) != len(groups) {
			t.Fatalf("%s in all-topics metadata: %+v", name, rt)
		}
		for i, p := range rt.Partitions {
			_, term, _ := n.engine.Leader(groups[i])
			if p.ErrorCode != 0 || p.Partition != int32(i) || p.Leader != 1 || p.LeaderEpoch != int32(term) {
				t.Fatalf("%s/%d: %+v", name, i, p)
			}
		}
	}

	// By name, even allowing auto-creation: listed, not created.
	one := metadata(t, cl, true, "__consumer_offsets").Topics
	if len(one) != 1 || !one[0].IsInternal || len(one[0].Partitions) != len(groups) {
		t.Fatalf("by name: %+v", one)
	}
	if _, exists := n.engine.Catalog(wire.DefaultTenant, "__consumer_offsets"); exists {
		t.Fatal("asking for __consumer_offsets created a queue")
	}

	// A produce is refused as Kafka refuses it from clients, and creates
	// nothing.
	if p := rawProduce(t, cl, "__consumer_offsets", mustBatch(t, []byte("x")), -1); p.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("produce to __consumer_offsets: %+v", p)
	}
	if _, exists := n.engine.Catalog(wire.DefaultTenant, "__consumer_offsets"); exists {
		t.Fatal("a produce to __consumer_offsets created a queue")
	}

	create := kmsg.NewPtrCreateTopicsRequest()
	create.Topics = append(create.Topics, kmsg.CreateTopicsRequestTopic{Topic: "__transaction_state", NumPartitions: 1, ReplicationFactor: -1})
	if cr, err := create.RequestWith(ctxFor(t), cl); err != nil || cr.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("create __transaction_state: %+v %v", cr, err)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"__consumer_offsets"}
	if dr, err := del.RequestWith(ctxFor(t), cl); err != nil || dr.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("delete __consumer_offsets: %+v %v", dr, err)
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "__consumer_offsets"
	for _, ts := range []int64{listEarliest, listLatest} {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = 0, ts
		lt.Partitions = append(lt.Partitions, lp)
	}
	lo.Topics = append(lo.Topics, lt)
	lr, err := lo.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	ps := lr.Topics[0].Partitions
	if len(ps) != 2 || ps[0].ErrorCode != 0 || ps[0].Offset != 0 || ps[1].ErrorCode != 0 || ps[1].Offset != 0 {
		t.Fatalf("list offsets of __consumer_offsets: %+v", ps)
	}
}

// A KIP-848 group whose regex names an internal topic is assigned it, as
// Kafka's broker-side resolution does, beside the regular topics it
// matches; the consumer fetches it (empty) without an error.
func TestConsumerProtocolRegexAssignsAnInternalTopic(t *testing.T) {
	n := startNode(t, func(c *Config) { c.DefaultPartitions = 1 })
	prod := n.client(kgo.AllowAutoTopicCreation())
	if err := prod.ProduceSync(ctxFor(t), &kgo.Record{Topic: "rx-orders", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl := n.client(kgo.ConsumerGroup("rx"), kgo.ServerSideBalancer(), kgo.ConsumeRegex(),
		kgo.ConsumeTopics("rx-.*", "__consumer_offsets"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.MetadataMinAge(100*time.Millisecond), kgo.FetchMaxWait(100*time.Millisecond))
	ctx := ctxFor(t)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("nothing consumed")
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		if len(fs.Records()) > 0 {
			break
		}
	}
	waitFor(t, "the internal topic assigned", func() bool {
		return slices.Contains(cl.GetConsumeTopics(), "__consumer_offsets")
	})
	if got := fetchFrom(t, n, "__consumer_offsets", 0); len(got) != 0 {
		t.Fatalf("an internal topic fetched %d bytes", len(got))
	}
}
