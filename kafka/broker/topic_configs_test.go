package broker

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createTopicsTopic is one topic of a CreateTopics request.
func createTopicsTopic(name string, partitions int32, replicationFactor int16, configs map[string]string) kmsg.CreateTopicsRequestTopic {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, replicationFactor
	for k, v := range configs {
		rc := kmsg.NewCreateTopicsRequestTopicConfig()
		rc.Name, rc.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, rc)
	}
	return rt
}

// createTopicWith creates a one-partition topic with configs and returns
// CreateTopics' error code for it.
func createTopicWith(t *testing.T, cl *kgo.Client, topic string, configs map[string]string) int16 {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = append(req.Topics, createTopicsTopic(topic, 1, -1, configs))
	resp, err := req.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].ErrorCode
}

// setTopicConfig sets one config with IncrementalAlterConfigs and returns
// its error code.
func setTopicConfig(t *testing.T, cl *kgo.Client, topic, name, value string) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: name, Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr(value)}}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Resources[0].ErrorCode
}

// A topic's max.message.bytes decides what a batch may weigh, above the
// broker's message.max.bytes as in Kafka: a 5 MiB record goes to a topic
// that allows 6 MiB, and comes back whole; a topic left at the default
// refuses it with MESSAGE_TOO_LARGE.
func TestTopicMaxMessageBytes(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client(kgo.ProducerBatchMaxBytes(7<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumeTopics("big"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if code := createTopicWith(t, cl, "big", map[string]string{"max.message.bytes": "6291456"}); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	if code := createTopicWith(t, cl, "small", nil); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	// Random bytes: the client compresses, and Kafka bounds the batch as
	// it travels.
	value := make([]byte, 5<<20)
	_, _ = rand.Read(value)
	if err := cl.ProduceSync(ctxFor(t), &kgo.Record{Topic: "big", Value: value}).FirstErr(); err != nil {
		t.Fatalf("5 MiB record to a topic allowing 6 MiB: %v", err)
	}
	err := cl.ProduceSync(ctxFor(t), &kgo.Record{Topic: "small", Value: value}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("5 MiB record to a default topic: %v, want MESSAGE_TOO_LARGE", err)
	}
	got := consume(t, cl, 1)
	if !bytes.Equal(got[0].Value, value) {
		t.Fatalf("fetched %d bytes, want the 5 MiB produced", len(got[0].Value))
	}
	if v := describeConfig(t, cl, "big", "max.message.bytes"); *v.Value != "6291456" || v.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("described %+v", v)
	}
	if v := describeConfig(t, cl, "small", "max.message.bytes"); *v.Value != "1048588" || v.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("described %+v", v)
	}
}

// min.insync.replicas describes the raft quorum (one replica of one) and
// cannot be set above it.
func TestMinInsyncReplicasIsTheQuorum(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client()
	if code := createTopicWith(t, cl, "isr", map[string]string{"min.insync.replicas": "2"}); code != kerr.InvalidConfig.Code {
		t.Fatalf("min.insync.replicas above the quorum: %v", kerr.ErrorForCode(code))
	}
	if code := createTopicWith(t, cl, "isr", nil); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if v := describeConfig(t, cl, "isr", "min.insync.replicas"); *v.Value != "1" || v.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("described %+v", v)
	}
	if code := setTopicConfig(t, cl, "isr", "min.insync.replicas", "2"); code != kerr.InvalidConfig.Code {
		t.Fatalf("altered above the quorum: %v", kerr.ErrorForCode(code))
	}
	if code := setTopicConfig(t, cl, "isr", "min.insync.replicas", "1"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
}

// With message.timestamp.type=LogAppendTime the broker stamps records:
// fetched batches say LogAppendTime and carry the append time, whatever
// the producer set, and the produce answer reports it.
func TestLogAppendTime(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client(kgo.ConsumeTopics("stamped"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if code := createTopicWith(t, cl, "stamped", map[string]string{"message.timestamp.type": "LogAppendTime"}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	old := time.UnixMilli(1_000_000)
	before := time.Now().Add(-time.Minute)
	res := cl.ProduceSync(ctxFor(t), &kgo.Record{Topic: "stamped", Value: []byte("v"), Timestamp: old})
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consume(t, cl, 1)[0]
	if got.Timestamp.Before(before) || got.Attrs.TimestampType() != 1 {
		t.Fatalf("fetched timestamp %v type %d, want the append time (type 1)", got.Timestamp, got.Attrs.TimestampType())
	}

	// The raw produce answer carries the append time.
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "stamped"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = gzipBatch(t, 10)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("%v %+v", err, resp)
	}
	if at := resp.Topics[0].Partitions[0].LogAppendTime; at < before.UnixMilli() {
		t.Fatalf("produce answered LogAppendTime %d", at)
	}
}

// cleanup.policy is a list: IncrementalAlterConfigs appends to it and
// subtracts from it; a config that is not a list refuses both.
func TestCleanupPolicyAppendSubtract(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client()
	if code := createTopicWith(t, cl, "lists", nil); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	edit := func(name string, op kmsg.IncrementalAlterConfigOp, value string) int16 {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "lists"
		res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: name, Op: op, Value: kmsg.StringPtr(value)}}
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctxFor(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Resources[0].ErrorCode
	}
	for _, step := range []struct {
		op   kmsg.IncrementalAlterConfigOp
		item string
		want string
	}{{kmsg.IncrementalAlterConfigOpAppend, "compact", "delete,compact"}, {kmsg.IncrementalAlterConfigOpAppend, "delete", "delete,compact"},
		{kmsg.IncrementalAlterConfigOpSubtract, "delete", "compact"}} {
		if code := edit("cleanup.policy", step.op, step.item); code != 0 {
			t.Fatalf("%v %s: %v", step.op, step.item, kerr.ErrorForCode(code))
		}
		if v := describeConfig(t, cl, "lists", "cleanup.policy"); *v.Value != step.want {
			t.Fatalf("after %v %s: %s, want %s", step.op, step.item, *v.Value, step.want)
		}
	}
	if code := edit("cleanup.policy", kmsg.IncrementalAlterConfigOpSubtract, "compact"); code != kerr.InvalidConfig.Code {
		t.Fatalf("an empty cleanup.policy: %v", kerr.ErrorForCode(code))
	}
	if code := edit("retention.ms", kmsg.IncrementalAlterConfigOpAppend, "5"); code != kerr.InvalidConfig.Code {
		t.Fatalf("APPEND to retention.ms: %v", kerr.ErrorForCode(code))
	}
}
