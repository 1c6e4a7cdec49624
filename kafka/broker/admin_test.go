package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/wire"
)

func metadata(t *testing.T, cl *kgo.Client, allowCreate bool, topics ...string) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = allowCreate
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestMetadataAndAutoCreation(t *testing.T) {
	n := startNode(t, func(c *Config) { c.DefaultPartitions = 4 })
	cl := n.client()
	resp := metadata(t, cl, false, "absent")
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("%+v", resp)
	}
	resp = metadata(t, cl, true, "made", "bad name!")
	byName := map[string]kmsg.MetadataResponseTopic{}
	for _, rt := range resp.Topics {
		byName[*rt.Topic] = rt
	}
	made := byName["made"]
	if made.ErrorCode != 0 || len(made.Partitions) != 4 || made.Partitions[3].Leader != 1 || made.Partitions[3].ISR[0] != 1 {
		t.Fatalf("auto-created: %+v", made)
	}
	if byName["bad name!"].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("bad name: %+v", byName["bad name!"])
	}
	// A queue created over HTTP is a topic with its partitions by index.
	httpPush(t, n.engine, wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "http.queue", Partition: "customer-1", PartitionIndex: -1,
		Count: 1, Records: wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: wire.ID{1}, Payload: []byte(`{"a":1}`)})})
	all := metadata(t, cl, false)
	names := []string{}
	for _, rt := range all.Topics {
		if !rt.IsInternal {
			names = append(names, *rt.Topic)
		}
	}
	if len(names) != 2 || names[0] != "http.queue" || names[1] != "made" {
		t.Fatalf("all topics: %v", names)
	}

	// A topic's partitions spread over every raft group; each is led by
	// its group's leader, in that group's term.
	createTopic(t, cl, "wide", 8)
	groups := raftGroupsOf(t, n.engine, "wide", 8)
	if distinct(groups) != raftgroupstest.Groups {
		t.Fatalf("8 partitions in raft groups %v, want all %d", groups, raftgroupstest.Groups)
	}
	wide := metadata(t, cl, false, "wide").Topics[0]
	if len(wide.Partitions) != 8 {
		t.Fatalf("wide: %d partitions", len(wide.Partitions))
	}
	for i, p := range wide.Partitions {
		_, term, ok := n.engine.Leader(groups[i])
		if !ok || p.ErrorCode != 0 || p.Partition != int32(i) || p.Leader != 1 || p.LeaderEpoch != int32(term) ||
			fmt.Sprint(p.Replicas) != "[1]" || fmt.Sprint(p.ISR) != "[1]" {
			t.Fatalf("wide/%d in raft group %d (term %d): %+v", i, groups[i], term, p)
		}
	}
}

func TestTopicAdministration(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client()
	create := kmsg.NewPtrCreateTopicsRequest()
	for _, c := range []struct {
		name string
		n    int32
		rf   int16
		cfg  map[string]string
	}{{"a", 2, -1, map[string]string{"retention.ms": "3600000"}}, {"b", 1, 1, nil}, {"c", 0, -1, nil},
		{"d", 1, 5, nil}, {"e", 1, -1, map[string]string{"no.such": "1"}}, {"a", 1, -1, nil}} {
		create.Topics = append(create.Topics, createTopicsTopic(c.name, c.n, c.rf, c.cfg))
	}
	cr, err := create.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	want := []int16{kerr.InvalidRequest.Code, 0, kerr.InvalidPartitions.Code, kerr.InvalidReplicationFactor.Code,
		kerr.InvalidConfig.Code, kerr.InvalidRequest.Code}
	for i, rt := range cr.Topics {
		if rt.ErrorCode != want[i] {
			t.Errorf("create %s: %d, want %d", rt.Topic, rt.ErrorCode, want[i])
		}
	}
	createTopic(t, cl, "a", 2)
	dup := kmsg.NewPtrCreateTopicsRequest()
	dup.Topics = append(dup.Topics, kmsg.CreateTopicsRequestTopic{Topic: "a", NumPartitions: 1, ReplicationFactor: -1})
	if r, _ := dup.RequestWith(ctxFor(t), cl); r.Topics[0].ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("existing topic: %+v", r.Topics[0])
	}

	grow := kmsg.NewPtrCreatePartitionsRequest()
	grow.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "a", Count: 5}, {Topic: "b", Count: 1}, {Topic: "zz", Count: 3}}
	gr, err := grow.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for i, code := range []int16{0, kerr.InvalidPartitions.Code, kerr.UnknownTopicOrPartition.Code} {
		if gr.Topics[i].ErrorCode != code {
			t.Errorf("grow %s: %d, want %d", gr.Topics[i].Topic, gr.Topics[i].ErrorCode, code)
		}
	}
	if md := metadata(t, cl, false, "a"); len(md.Topics[0].Partitions) != 5 {
		t.Fatalf("%d partitions after growing", len(md.Topics[0].Partitions))
	}
	for i := range uint32(5) {
		if _, ok := n.engine.PartitionAt(wire.DefaultTenant, "a", i); !ok {
			t.Fatalf("partition a/%d is not in its raft group", i)
		}
	}

	// Configs: set, describe, delete back to the default.
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "a"
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("7200000")},
		{Name: "cleanup.policy", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("delete")}}
	inc.Resources = append(inc.Resources, res)
	if r, err := inc.RequestWith(ctxFor(t), cl); err != nil || r.Resources[0].ErrorCode != 0 {
		t.Fatalf("%v %+v", err, r)
	}
	// The options reach the topic's home and every raft group holding
	// its partitions: retention runs in each.
	groups := n.engine.QueueGroups(wire.DefaultTenant, "a")
	if len(groups) != 3 {
		t.Fatalf("5 partitions of a in raft groups %v", groups)
	}
	for _, g := range groups {
		q, _ := n.engine.GroupStore(g).Queue(wire.DefaultTenant, "a")
		if !q.Config.RetentionEnabled || q.Config.RetentionSec != 7200 {
			t.Fatalf("retention.ms did not reach the queue in raft group %d: %+v", g, q.Config)
		}
	}
	if v := describeConfig(t, cl, "a", "retention.ms"); v == nil || *v.Value != "7200000" || v.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("%+v", v)
	}
	alter := kmsg.NewPtrAlterConfigsRequest()
	ar := kmsg.NewAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "a"
	ar.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "segment.ms", Value: kmsg.StringPtr("1000")}}
	alter.Resources = append(alter.Resources, ar)
	if r, err := alter.RequestWith(ctxFor(t), cl); err != nil || r.Resources[0].ErrorCode != 0 {
		t.Fatalf("%v %+v", err, r)
	}
	if v := describeConfig(t, cl, "a", "retention.ms"); *v.Value != "-1" || v.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("replaced configs kept retention.ms: %+v", v)
	}
	// A queue created over HTTP refuses Kafka config changes.
	httpPush(t, n.engine, wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "h", Partition: "p", PartitionIndex: -1,
		Count: 1, Records: wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: wire.ID{2}, Payload: []byte(`1`)})})
	inc.Resources[0].ResourceName = "h"
	if r, _ := inc.RequestWith(ctxFor(t), cl); r.Resources[0].ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("HTTP queue: %+v", r.Resources[0])
	}
	if v := describeConfig(t, cl, "h", "retention.ms"); v == nil || !v.ReadOnly {
		t.Fatalf("HTTP queue config: %+v", v)
	}

	logDirs := kmsg.NewPtrDescribeLogDirsRequest()
	if r, err := logDirs.RequestWith(ctxFor(t), cl); err != nil || len(r.Dirs) != 1 || r.Dirs[0].Dir != "/data" || len(r.Dirs[0].Topics) != 3 {
		t.Fatalf("%v %+v", err, r)
	}
	acls := kmsg.NewPtrDescribeACLsRequest()
	if r, err := acls.RequestWith(ctxFor(t), cl); err != nil || r.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("%v %+v", err, r)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	if r, err := dc.RequestWith(ctxFor(t), cl); err != nil || len(r.Brokers) != 1 || r.ClusterID != clusterID {
		t.Fatalf("%v %+v", err, r)
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"a", "zz"}
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("a")}, {Topic: kmsg.StringPtr("zz")}}
	dr, err := del.RequestWith(ctxFor(t), cl)
	if err != nil || dr.Topics[0].ErrorCode != 0 || dr.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("%v %+v", err, dr)
	}
}

func describeConfig(t *testing.T, cl *kgo.Client, topic, name string) *kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctxFor(t), cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe %s: %v %+v", topic, err, resp)
	}
	for i, c := range resp.Resources[0].Configs {
		if c.Name == name {
			return &resp.Resources[0].Configs[i]
		}
	}
	return nil
}

func TestListOffsets(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client(kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("lo"))
	before := time.Now().UnixMilli()
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(ctxFor(t), rec("lo", i)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	list := func(ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctxFor(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	if p := list(-2); p.Offset != 0 || p.ErrorCode != 0 {
		t.Fatalf("earliest: %+v", p)
	}
	if p := list(-1); p.Offset != 3 {
		t.Fatalf("latest: %+v", p)
	}
	if p := list(before - 1000); p.Offset != 0 || p.Timestamp < before-1000 {
		t.Fatalf("by time: %+v", p)
	}
	if p := list(time.Now().Add(time.Hour).UnixMilli()); p.Offset != -1 {
		t.Fatalf("future: %+v", p)
	}
}

func TestHTTPPushedMessagesAreFetchable(t *testing.T) {
	n := startNode(t, nil)
	push := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "orders", Partition: "Default", PartitionIndex: -1,
		Flags: wire.PushIndexTxn, Count: 2}
	push.Records = wire.AppendRecord(push.Records, &wire.Record{Flags: wire.FlagJSON, MsgID: wire.ID{1}, Payload: []byte(`{"orderId":1}`)})
	push.Records = wire.AppendRecord(push.Records, &wire.Record{Flags: wire.FlagJSON, MsgID: wire.ID{2}, Payload: []byte(`"two"`)})
	httpPush(t, n.engine, push)
	cons := n.client(kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := consume(t, cons, 2)
	if string(got[0].Value) != `{"orderId":1}` || string(got[1].Value) != `"two"` || got[0].Key != nil || got[1].Offset != 1 {
		t.Fatalf("%+v %+v", got[0], got[1])
	}
}
