package kafka

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// Topic configs honoured against real nodes: a topic's max.message.bytes
// above the broker's, and a compacted topic read from the start by
// franz-go, on the leader and again on the replica that takes over.

// createTopicWithConfigs creates a one-partition topic with configs.
func createTopicWithConfigs(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, -1
	for k, v := range configs {
		rc := kmsg.NewCreateTopicsRequestTopicConfig()
		rc.Name, rc.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, rc)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// describeTopicConfig returns one config of a topic as DescribeConfigs
// shows it.
func describeTopicConfig(ctx context.Context, t *testing.T, cl *kgo.Client, topic, name string) kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{name}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 || len(resp.Resources[0].Configs) != 1 {
		t.Fatalf("describe %s of %s: %v %+v", name, topic, err, resp)
	}
	return resp.Resources[0].Configs[0]
}

// A client that raises a topic's max.message.bytes for a 5 MiB record is
// accepted, reads the record back whole, and sees the config described
// as set on the topic; a topic at the default refuses the record.
func TestKafkaTopicMaxMessageBytes(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	ctx := e2etest.Deadline(t, 90*time.Second)
	cl := e2etest.KgoClient(t, c, kgo.ProducerBatchMaxBytes(7<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumeTopics("large"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	createTopicWithConfigs(ctx, t, cl, "large", map[string]string{"max.message.bytes": "6291456"})
	createTopicWithConfigs(ctx, t, cl, "plain", nil)
	value := make([]byte, 5<<20)
	_, _ = rand.Read(value) // incompressible: the batch travels at 5 MiB
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "large", Key: []byte("k"), Value: value}).FirstErr(); err != nil {
		t.Fatalf("5 MiB record: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "plain", Value: value}).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("5 MiB record to a topic at the default: %v, want MESSAGE_TOO_LARGE", err)
	}
	got := e2etest.ConsumeN(ctx, t, cl, 1)
	if !bytes.Equal(got[0].Value, value) || got[0].Offset != 0 {
		t.Fatalf("fetched %d bytes at offset %d", len(got[0].Value), got[0].Offset)
	}
	set := describeTopicConfig(ctx, t, cl, "large", "max.message.bytes")
	def := describeTopicConfig(ctx, t, cl, "plain", "max.message.bytes")
	if *set.Value != "6291456" || set.Source != kmsg.ConfigSourceDynamicTopicConfig ||
		*def.Value != "1048588" || def.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("described %s (%v) and %s (%v)", *set.Value, set.Source, *def.Value, def.Source)
	}
}

// readFromStart reads partition 0 of topic with a fresh franz-go consumer
// seeded with nodes, from offset 0 up to the record at the high-water mark
// less one (the log's last record, which compaction keeps unless it is a
// tombstone), as offset:key=value.
func readFromStart(ctx context.Context, t *testing.T, nodes []*harness.Node, topic string) []string {
	t.Helper()
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.KafkaAddr)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	hwm := highWatermark(ctx, t, cl, topic)
	var out []string
	for hwm > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %v of %s: %v", out, topic, ctx.Err())
		}
		for _, r := range fs.Records() {
			v := string(r.Value)
			if r.Value == nil {
				v = "null"
			}
			out = append(out, fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, v))
			if r.Offset >= hwm-1 {
				return out
			}
		}
	}
	return out
}

// highWatermark is partition 0's high-water mark by ListOffsets.
func highWatermark(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	var resp *kmsg.ListOffsetsResponse
	var last error
	// A leader still proving itself answers a retriable code: ask again.
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		resp, last = req.RequestWith(ctx, cl)
		return last == nil && resp.Topics[0].Partitions[0].ErrorCode == 0, nil
	}); err != nil {
		t.Fatalf("list offsets of %s: %v (last: %v %+v)", topic, err, last, resp)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// A compacted topic, after compaction, keeps exactly the last value of
// every key at its offset, and no key whose last record was a tombstone;
// franz-go reads it from the start across the gaps. The leader decided
// what went and every replica dropped the same: the node that takes over
// after the leader is killed serves the same records.
func TestKafkaCompactedTopicKeepsLastValuePerKey(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: map[string]string{"QUEEN_KAFKA_LOG_CLEANER_INTERVAL_MS": "100"}})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	admin := e2etest.KgoClient(t, c)
	e2etest.WaitBrokers(ctx, t, admin, 3)
	createTopicWithConfigs(ctx, t, admin, "accounts", map[string]string{"cleanup.policy": "compact",
		"delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.01"})
	// On three nodes a write is acknowledged once two replicas have it.
	if isr := describeTopicConfig(ctx, t, admin, "accounts", "min.insync.replicas"); *isr.Value != "2" {
		t.Fatalf("min.insync.replicas described as %s on three nodes", *isr.Value)
	}
	prod := e2etest.KgoClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic("accounts"))
	const keys, rounds = 10, 8
	offset := 0
	last := map[string]int{} // key → the offset of its last record
	byOffset := map[int]string{}
	for round := range rounds {
		var batch []*kgo.Record
		for k := range keys {
			key := fmt.Sprintf("acct-%d", k)
			var value []byte
			if round == rounds-1 && k < 2 {
				value = nil // the last word on two keys is a tombstone
			} else {
				value = []byte(fmt.Sprintf("balance-%d-%d", k, round))
			}
			batch = append(batch, &kgo.Record{Key: []byte(key), Value: value})
			if value == nil {
				delete(last, key)
			} else {
				last[key] = offset
				byOffset[offset] = fmt.Sprintf("%d:%s=%s", offset, key, value)
			}
			offset++
		}
		// Several chunks, one per round: compaction drops whole ones and
		// splits others.
		if err := prod.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var offsets []int
	for _, off := range last {
		offsets = append(offsets, off)
	}
	slices.Sort(offsets)
	var want []string
	for _, off := range offsets {
		want = append(want, byOffset[off])
	}

	var got []string
	if err := harness.Poll(ctx, 200*time.Millisecond, func() (bool, error) {
		got = readFromStart(ctx, t, c.Nodes, "accounts")
		return slices.Equal(got, want), nil
	}); err != nil {
		t.Fatalf("after compaction read %v, want %v: %v", got, want, err)
	}

	// The replica that takes over holds the same records.
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	var leader *harness.Node
	for _, tp := range md.Topics {
		if tp.Topic != nil && *tp.Topic == "accounts" {
			for _, n := range c.Nodes {
				if int32(n.ID) == tp.Partitions[0].Leader {
					leader = n
				}
			}
		}
	}
	if leader == nil {
		t.Fatalf("no leader for accounts/0 in %+v", md)
	}
	leader.Kill()
	t.Logf("killed node %d, the leader of accounts/0", leader.ID)
	var rest []*harness.Node
	for _, n := range c.Nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	if got := readFromStart(ctx, t, rest, "accounts"); !slices.Equal(got, want) {
		t.Fatalf("the new leader serves %v, want %v", got, want)
	}
}
