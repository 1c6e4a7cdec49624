package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/wire"
)

func createTopics(t *testing.T, n *testNode, counts map[string]int32) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	for name, c := range counts {
		req.Topics = append(req.Topics, kmsg.CreateTopicsRequestTopic{Topic: name, NumPartitions: c, ReplicationFactor: -1})
	}
	resp, err := req.RequestWith(ctxFor(t), n.client())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		out[rt.Topic] = rt.ErrorCode
	}
	return out
}

func growTopic(t *testing.T, n *testNode, topic string, count int32) int16 {
	t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: topic, Count: count}}
	resp, err := req.RequestWith(ctxFor(t), n.client())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].ErrorCode
}

// TestOneRequestCannotCreateUnboundedPartitions: the review's CreateTopics
// of 1,000,000 partitions made every Metadata take 2 s. By default one
// request creates at most 10,000 partitions; more is POLICY_VIOLATION and
// creates nothing.
func TestOneRequestCannotCreateUnboundedPartitions(t *testing.T) {
	n := startNode(t, nil)
	if codes := createTopics(t, n, map[string]int32{"huge": 20000}); codes["huge"] != kerr.PolicyViolation.Code {
		t.Fatalf("20,000 partitions in one request: error %d, want POLICY_VIOLATION", codes["huge"])
	}
	if _, ok := n.engine.KafkaTopic(wire.DefaultTenant, "huge"); ok {
		t.Fatal("the refused topic exists")
	}
}

// TestPartitionCapsPerRequestAndTenant: the caps count the partitions a
// request adds (new topics, growth) and those the tenant's Kafka topics
// already hold; a request over either creates nothing.
func TestPartitionCapsPerRequestAndTenant(t *testing.T) {
	n := startNode(t, func(c *Config) { c.MaxPartitionsPerRequest, c.MaxTenantPartitions = 10, 25 })
	if codes := createTopics(t, n, map[string]int32{"a": 6, "b": 6}); codes["a"] != kerr.PolicyViolation.Code || codes["b"] != kerr.PolicyViolation.Code {
		t.Fatalf("12 partitions over two topics: %v", codes)
	}
	if _, ok := n.engine.KafkaTopic(wire.DefaultTenant, "a"); ok {
		t.Fatal("a topic of the refused request exists")
	}
	if codes := createTopics(t, n, map[string]int32{"a": 8, "b": 2}); codes["a"] != 0 || codes["b"] != 0 {
		t.Fatalf("10 partitions: %v", codes)
	}
	if codes := createTopics(t, n, map[string]int32{"c": 10}); codes["c"] != 0 {
		t.Fatalf("20 in all: %v", codes)
	}
	if codes := createTopics(t, n, map[string]int32{"d": 6}); codes["d"] != kerr.PolicyViolation.Code {
		t.Fatalf("26 in all: %v", codes)
	}
	if code := growTopic(t, n, "a", 13); code != 0 {
		t.Fatalf("growing to 25 in all: %d", code)
	}
	if code := growTopic(t, n, "b", 3); code != kerr.PolicyViolation.Code {
		t.Fatalf("growing to 26 in all: %d", code)
	}
	if topic, _ := n.engine.KafkaTopic(wire.DefaultTenant, "b"); topic.Partitions != 2 {
		t.Fatalf("the refused growth changed b to %d partitions", topic.Partitions)
	}
}

// TestAutoCreatedTopicsCountAgainstTheCaps: a Metadata or a produce that
// creates topics by naming them adds partitions as CreateTopics does, so
// the same caps apply (before, any client allowed to create topics could
// pass both by asking for many new names).
func TestAutoCreatedTopicsCountAgainstTheCaps(t *testing.T) {
	n := startNode(t, func(c *Config) { c.DefaultPartitions, c.MaxPartitionsPerRequest, c.MaxTenantPartitions = 4, 10, 14 })
	cl := n.client()
	codes := func(resp *kmsg.MetadataResponse) map[string]int16 {
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			out[*rt.Topic] = rt.ErrorCode
		}
		return out
	}
	// 12 partitions in one request: the third topic is over the request cap.
	if got := codes(metadata(t, cl, true, "m1", "m2", "m3")); got["m1"] != 0 || got["m2"] != 0 || got["m3"] != kerr.PolicyViolation.Code {
		t.Fatalf("three topics of 4 partitions in one Metadata: %v", got)
	}
	if got := codes(metadata(t, cl, true, "m4")); got["m4"] != 0 {
		t.Fatalf("12 partitions in all: %v", got)
	}
	if got := codes(metadata(t, cl, true, "m5")); got["m5"] != kerr.PolicyViolation.Code {
		t.Fatalf("16 partitions in all: %v", got)
	}
	rec, err := records.AppendBatch(nil, records.NewBatchOptions(0), []records.Record{{Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if p := rawProduce(t, cl, "m6", rec, -1); p.ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("a produce creating a topic past the tenant cap: error %d", p.ErrorCode)
	}
	for _, name := range []string{"m3", "m5", "m6"} {
		if _, ok := n.engine.KafkaTopic(wire.DefaultTenant, name); ok {
			t.Fatalf("refused topic %s exists", name)
		}
	}
}

// An HTTP queue with more partitions than Kafka clients are shown (one per
// customer) answers POLICY_VIOLATION without partitions, listed or asked
// for by name, and DescribeLogDirs leaves it out; a topic within the cap
// is listed whole.
func TestMetadataRefusesATopicOverThePartitionCap(t *testing.T) {
	n := startNode(t, func(c *Config) { c.MetadataMaxPartitions = 3 })
	cl := n.client()
	for i := range 4 {
		httpPush(t, n.engine, wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "customers", Partition: fmt.Sprintf("c-%d", i),
			PartitionIndex: -1, Count: 1, Records: wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: wire.ID{byte(i + 1)}, Payload: []byte(`1`)})})
	}
	createTopic(t, cl, "small", 3)
	for _, resp := range []*kmsg.MetadataResponse{metadata(t, cl, false), metadata(t, cl, false, "customers", "small")} {
		byName := map[string]kmsg.MetadataResponseTopic{}
		for _, rt := range resp.Topics {
			byName[*rt.Topic] = rt
		}
		if big := byName["customers"]; big.ErrorCode != kerr.PolicyViolation.Code || len(big.Partitions) != 0 {
			t.Fatalf("a topic over the cap: %+v", big)
		}
		if small := byName["small"]; small.ErrorCode != 0 || len(small.Partitions) != 3 {
			t.Fatalf("a topic at the cap: %+v", small)
		}
	}
	dirs, err := kmsg.NewPtrDescribeLogDirsRequest().RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs.Dirs {
		for _, rt := range d.Topics {
			if rt.Topic == "customers" {
				t.Fatalf("DescribeLogDirs lists a topic over the cap: %+v", rt)
			}
		}
	}
}
