package cluster

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// Read-your-writes across nodes: what a client changes through one node is
// seen by its next request through any other, even one whose replicas
// trail the groups' leaders. Nodes 2 and 3 apply every raft entry late
// (QUEEN_TEST_APPLY_DELAY_MS), so a change committed and answered through
// node 1 has not reached their stores when the next request arrives: only
// a node that catches up before reading answers it right.

// trailingCluster starts 3 nodes of which 2 and 3 apply every batch of
// entries late.
func trailingCluster(t *testing.T) *harness.Cluster {
	t.Helper()
	late := map[string]string{"QUEEN_TEST_APPLY_DELAY_MS": "300"}
	return e2etest.StartCluster(t, harness.Options{Nodes: 3, NodeEnv: map[int]map[string]string{2: late, 3: late}})
}

// brokerRequest sends r to node id, whichever broker the client would
// have chosen.
func brokerRequest[R kmsg.Response](ctx context.Context, t *testing.T, cl *kgo.Client, id int32, r kmsg.Request) R {
	t.Helper()
	resp, err := cl.Broker(int(id)).Request(ctx, r)
	if err != nil {
		t.Fatalf("%T to node %d: %v", r, id, err)
	}
	return resp.(R)
}

// A topic created, reconfigured, grown and deleted through node 1 is seen
// so by Metadata, DescribeConfigs and ListOffsets sent to the trailing
// nodes right after each answer.
func TestKafkaMetadataReadYourWritesAcrossNodes(t *testing.T) {
	c := trailingCluster(t)
	ctx := e2etest.Deadline(t, 3*time.Minute)
	cl := e2etest.KgoClient(t, c)
	e2etest.WaitBrokers(ctx, t, cl, 3)

	metadata := func(node int32, topic string) kmsg.MetadataResponseTopic {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		req.AllowAutoTopicCreation = false
		return brokerRequest[*kmsg.MetadataResponse](ctx, t, cl, node, req).Topics[0]
	}
	retention := func(node int32, topic string) string {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{"retention.ms"}
		req.Resources = append(req.Resources, r)
		res := brokerRequest[*kmsg.DescribeConfigsResponse](ctx, t, cl, node, req).Resources[0]
		if res.ErrorCode != 0 || len(res.Configs) != 1 || res.Configs[0].Value == nil {
			t.Fatalf("node %d: DescribeConfigs of %s: %v %+v", node, topic, kerr.ErrorForCode(res.ErrorCode), res)
		}
		return *res.Configs[0].Value
	}

	for round := range 3 {
		topic := "ryw-" + strconv.Itoa(round)
		create := kmsg.NewPtrCreateTopicsRequest()
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, 4, -1
		ct.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: kmsg.StringPtr("123456")}}
		create.Topics = append(create.Topics, ct)
		if code := brokerRequest[*kmsg.CreateTopicsResponse](ctx, t, cl, 1, create).Topics[0].ErrorCode; code != 0 {
			t.Fatalf("create %s through node 1: %v", topic, kerr.ErrorForCode(code))
		}
		for _, node := range []int32{2, 3} {
			mt := metadata(node, topic)
			if mt.ErrorCode != 0 || len(mt.Partitions) != 4 {
				t.Fatalf("round %d: Metadata of %s through node %d right after its creation: %v, %d partitions",
					round, topic, node, kerr.ErrorForCode(mt.ErrorCode), len(mt.Partitions))
			}
			if v := retention(node, topic); v != "123456" {
				t.Fatalf("round %d: node %d describes retention.ms of the new topic as %s", round, node, v)
			}
		}
		// Each partition's leader knows the partition: ListOffsets answers
		// from it, never UNKNOWN_TOPIC_OR_PARTITION.
		for _, p := range metadata(1, topic).Partitions {
			lo := kmsg.NewPtrListOffsetsRequest()
			lt := kmsg.NewListOffsetsRequestTopic()
			lt.Topic = topic
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition, lp.Timestamp = p.Partition, -1
			lt.Partitions = append(lt.Partitions, lp)
			lo.Topics = append(lo.Topics, lt)
			if p.Leader < 0 {
				continue
			}
			got := brokerRequest[*kmsg.ListOffsetsResponse](ctx, t, cl, p.Leader, lo).Topics[0].Partitions[0]
			if got.ErrorCode == kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("round %d: ListOffsets of %s[%d] on its leader, node %d: UNKNOWN_TOPIC_OR_PARTITION", round, topic, p.Partition, p.Leader)
			}
		}

		alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
		ar := kmsg.NewIncrementalAlterConfigsRequestResource()
		ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		ar.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("654321")}}
		alter.Resources = append(alter.Resources, ar)
		if code := brokerRequest[*kmsg.IncrementalAlterConfigsResponse](ctx, t, cl, 1, alter).Resources[0].ErrorCode; code != 0 {
			t.Fatalf("alter %s through node 1: %v", topic, kerr.ErrorForCode(code))
		}
		if v := retention(2, topic); v != "654321" {
			t.Fatalf("round %d: node 2 describes retention.ms as %s right after node 1 set it to 654321", round, v)
		}

		grow := kmsg.NewPtrCreatePartitionsRequest()
		gt := kmsg.NewCreatePartitionsRequestTopic()
		gt.Topic, gt.Count = topic, 6
		grow.Topics = append(grow.Topics, gt)
		if code := brokerRequest[*kmsg.CreatePartitionsResponse](ctx, t, cl, 1, grow).Topics[0].ErrorCode; code != 0 {
			t.Fatalf("grow %s through node 1: %v", topic, kerr.ErrorForCode(code))
		}
		if mt := metadata(3, topic); len(mt.Partitions) != 6 {
			t.Fatalf("round %d: node 3 lists %d partitions of %s right after node 1 grew it to 6", round, len(mt.Partitions), topic)
		}

		del := kmsg.NewPtrDeleteTopicsRequest()
		del.TopicNames = []string{topic}
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(topic)
		del.Topics = append(del.Topics, dt)
		if code := brokerRequest[*kmsg.DeleteTopicsResponse](ctx, t, cl, 1, del).Topics[0].ErrorCode; code != 0 {
			t.Fatalf("delete %s through node 1: %v", topic, kerr.ErrorForCode(code))
		}
		if mt := metadata(2, topic); mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("round %d: node 2 answers Metadata of %s right after node 1 deleted it with %v, %d partitions",
				round, topic, kerr.ErrorForCode(mt.ErrorCode), len(mt.Partitions))
		}
	}
}

// A message pushed through node 1 is popped and fetched through the
// trailing nodes right after the push is answered: the queue and its
// partition exist there for the pop and the fetch, which do not answer
// "nothing" or "unknown" before catching up.
func TestHTTPReadYourWritesAcrossNodes(t *testing.T) {
	c := trailingCluster(t)
	ctx := e2etest.Deadline(t, 3*time.Minute)
	writer := c.Nodes[0].URL()
	for round := range 3 {
		queue := "ryw-" + strconv.Itoa(round)
		if _, code, err := e2etest.Push(ctx, writer, e2etest.PushItems(queue, "p-pop", map[string]int{"n": round})); err != nil || code != http.StatusCreated {
			t.Fatalf("push through node 1: %d %v", code, err)
		}
		ans, code, err := e2etest.Pop(ctx, c.Nodes[1].URL(), e2etest.PopPath(queue, "batch=1"))
		if err != nil || code != http.StatusOK || len(ans.Messages) != 1 {
			t.Fatalf("round %d: pop through node 2 right after the push: %d %v, %d messages", round, code, err, len(ans.Messages))
		}

		if _, code, err := e2etest.Push(ctx, writer, e2etest.PushItems(queue, "p-fetch", "a", "b")); err != nil || code != http.StatusCreated {
			t.Fatalf("push through node 1: %d %v", code, err)
		}
		var out struct {
			Entries []e2etest.FetchEntry `json:"entries"`
		}
		body := map[string]any{"entries": []map[string]any{{"queue": queue, "partition": "p-fetch", "offset": 0}}}
		if code, err := e2etest.Call(ctx, http.MethodPost, c.Nodes[2].URL()+"/api/v1/fetch", body, &out); err != nil || code != http.StatusOK {
			t.Fatalf("fetch through node 3: %d %v", code, err)
		}
		if e := out.Entries[0]; e.Error != "" || len(e.Records) != 2 {
			t.Fatalf("round %d: fetch through node 3 right after the push: error %q, %d records", round, e.Error, len(e.Records))
		}
	}
}
