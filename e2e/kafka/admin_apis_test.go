package kafka

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// The admin APIs operators' tools call (issue 36), each driven by franz-go's
// kadm against real nodes: DescribeTopicPartitions (kadm has no call for
// it: its request goes through kadm's client), DeleteRecords, ElectLeaders
// and the SCRAM credential keys.

// adminOf is a kadm client over cl.
func adminOf(cl *kgo.Client) *kadm.Client { return kadm.NewClient(cl) }

// createTopics creates topics of partitions partitions through kadm.
func createTopics(ctx context.Context, t *testing.T, adm *kadm.Client, partitions int32, topics ...string) {
	t.Helper()
	res, err := adm.CreateTopics(ctx, partitions, -1, nil, topics...)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create %v: %v", topics, err)
	}
}

// DescribeTopicPartitions pages a three-node cluster's topics by cursor,
// each page within its partition limit, every partition once and led by
// a node Metadata names, asked of a node other than the one that created
// them.
func TestKafkaAdminDescribeTopicPartitions(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	adm := adminOf(e2etest.KafkaClient(t, c.Nodes[0]))
	createTopics(ctx, t, adm, 5, "dtp-a", "dtp-b")

	cl := e2etest.KafkaClient(t, c.Nodes[2])
	brokers := map[int32]bool{}
	md, err := adminOf(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range md.Brokers {
		brokers[b.NodeID] = true
	}
	var seen []string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatalf("cursor does not end: %v", seen)
		}
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "dtp-b"}, {Topic: "dtp-a"}}
		req.ResponsePartitionLimit, req.Cursor = 4, cursor
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, rt := range resp.Topics {
			if rt.ErrorCode != 0 {
				t.Fatalf("%s: error %d", *rt.Topic, rt.ErrorCode)
			}
			for _, p := range rt.Partitions {
				if p.ErrorCode != 0 || !brokers[p.LeaderID] || len(p.Replicas) != 3 {
					t.Fatalf("%s/%d: %+v (brokers %v)", *rt.Topic, p.Partition, p, brokers)
				}
				seen = append(seen, fmt.Sprintf("%s/%d", *rt.Topic, p.Partition))
				n++
			}
		}
		if n > 4 {
			t.Fatalf("%d partitions in a page limited to 4", n)
		}
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	want := "[dtp-a/0 dtp-a/1 dtp-a/2 dtp-a/3 dtp-a/4 dtp-b/0 dtp-b/1 dtp-b/2 dtp-b/3 dtp-b/4]"
	if fmt.Sprint(seen) != want {
		t.Fatalf("paged %v, want %s", seen, want)
	}
}

// DeleteRecords through kadm on a queue pushed over HTTP: the low
// watermark is the new log start on every node, HTTP pops start there,
// HTTP fetch reports it, and an offset past the high watermark is
// OFFSET_OUT_OF_RANGE.
func TestKafkaAdminDeleteRecords(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	h := e2etest.NewClient(t, ctx, c.Nodes[0])
	payloads := make([]any, 10)
	for i := range payloads {
		payloads[i] = map[string]any{"i": i}
	}
	h.Push(e2etest.PushItems("drq", "Default", payloads...)...)

	adm := adminOf(e2etest.KafkaClient(t, c.Nodes[1]))
	del := func(at int64) kadm.DeleteRecordsResponse {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "drq", Partition: 0, At: at})
		rs, err := adm.DeleteRecords(ctx, os)
		if err != nil {
			t.Fatal(err)
		}
		r, err := rs.On("drq", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := del(6); r.Err != nil || r.LowWatermark != 6 {
		t.Fatalf("delete below 6: %+v", r)
	}
	if r := del(11); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("past the high watermark: %+v", r)
	}
	for _, n := range c.Nodes {
		on := h.On(n)
		on.Eventually(30*time.Second, "log start 6 on "+n.HTTPAddr, func() bool {
			_, _, start := on.Log("drq", "Default")
			return start == 6
		})
	}
	a := h.On(c.Nodes[2]).MustPop(e2etest.PopPath("drq", "batch=20"), 4)
	if a.Messages[0].Offset != 6 || string(a.Messages[0].Data) != `{"i":6}` {
		t.Fatalf("first message popped after deleting below 6: offset %d %s", a.Messages[0].Offset, a.Messages[0].Data)
	}
}

// ElectLeaders through kadm on a three-node cluster: electing every
// partition's preferred leader answers once each is led there (or that
// it already was), after which asking again for a topic's partitions is
// ELECTION_NOT_NEEDED for each.
func TestKafkaAdminElectLeaders(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	adm := adminOf(e2etest.KgoClient(t, c))
	createTopics(ctx, t, adm, 4, "elt")
	all, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all["elt"]) != 4 {
		t.Fatalf("every partition: %+v", all)
	}
	for _, ps := range all {
		for _, p := range ps {
			if p.Err != nil && !errors.Is(p.Err, kerr.ElectionNotNeeded) {
				t.Fatalf("%s/%d: %v", p.Topic, p.Partition, p.Err)
			}
		}
	}
	set := kadm.TopicsSet{}
	set.Add("elt", 0, 1, 2, 3)
	again, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range again["elt"] {
		if !errors.Is(p.Err, kerr.ElectionNotNeeded) {
			t.Fatalf("elt/%d asked again: %v", p.Partition, p.Err)
		}
	}
}

// scramLoginTo says whether user logs in to addr with password over
// SCRAM-SHA-512.
func scramLoginTo(ctx context.Context, t *testing.T, addr, user, password string) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	return err
}

// A SCRAM credential added through kadm on one node logs in on every
// node at once, is described with its iterations through another, and
// once deleted through a third is refused everywhere; the bootstrap user
// of QUEEN_KAFKA_SASL_USERS keeps working.
func TestKafkaAdminScramCredentials(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: map[string]string{
		"QUEEN_KAFKA_SASL": "scram-sha-256,scram-sha-512", "QUEEN_KAFKA_SASL_USERS": "ops:bootstrap"}})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	admin := func(i int) *kadm.Client {
		return adminOf(e2etest.KafkaClient(t, c.Nodes[i], kgo.SASL(scram.Auth{User: "ops", Pass: "bootstrap"}.AsSha256Mechanism())))
	}
	res, err := admin(0).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "svc", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "s3cret"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("upsert: %v %+v", err, res)
	}
	for _, n := range c.Nodes {
		if err := scramLoginTo(ctx, t, n.KafkaAddr, "svc", "s3cret"); err != nil {
			t.Fatalf("login on %s right after the upsert: %v", n.KafkaAddr, err)
		}
	}
	desc, err := admin(1).DescribeUserSCRAMs(ctx, "svc")
	if err != nil || desc["svc"].Err != nil || len(desc["svc"].CredInfos) != 1 || desc["svc"].CredInfos[0].Iterations != 8192 {
		t.Fatalf("describe: %v %+v", err, desc)
	}
	del, err := admin(2).AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "svc", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || del.Error() != nil {
		t.Fatalf("delete: %v %+v", err, del)
	}
	for _, n := range c.Nodes {
		if err := scramLoginTo(ctx, t, n.KafkaAddr, "svc", "s3cret"); err == nil {
			t.Fatalf("a deleted credential logged in on %s", n.KafkaAddr)
		}
		if err := scramLoginTo(ctx, t, n.KafkaAddr, "ops", "bootstrap"); err != nil {
			t.Fatalf("the bootstrap user on %s: %v", n.KafkaAddr, err)
		}
	}
}
