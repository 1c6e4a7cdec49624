package kafka

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// The Kafka data path against real nodes: franz-go clients, and records
// crossing between the two doors.

func TestKafkaProduceConsumeAndPopOverHTTP(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{"QUEEN_KAFKA_DEFAULT_PARTITIONS": "2"}})
	ctx := e2etest.Deadline(t, 60*time.Second)
	prod := e2etest.KgoClient(t, c, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("orders"))
	const n = 40
	for i := 0; i < n; i++ {
		r := &kgo.Record{Key: []byte(fmt.Sprintf("customer-%d", i%4)), Value: []byte(fmt.Sprintf(`{"orderId":%d}`, i)),
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("kafka")}}}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons := e2etest.KgoClient(t, c, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := e2etest.ConsumeN(ctx, t, cons, n)
	next := map[string]int{}
	for _, r := range got {
		var v struct{ OrderID int }
		if err := json.Unmarshal(r.Value, &v); err != nil || len(r.Headers) != 1 || string(r.Headers[0].Value) != "kafka" {
			t.Fatalf("record %+v: %v", r, err)
		}
		// Records of a key stay in order: same key, same partition.
		k := string(r.Key)
		if v.OrderID < next[k] || v.OrderID%4 != int(k[len(k)-1]-'0') {
			t.Fatalf("key %s: order %d after %d", k, v.OrderID, next[k])
		}
		next[k] = v.OrderID + 1
	}

	// The same records popped over HTTP: value as JSON data, key, headers.
	seen := 0
	for seen < n {
		var out struct {
			Messages []struct {
				Data    json.RawMessage `json:"data"`
				Key     json.RawMessage `json:"key"`
				Headers []struct {
					Key   string          `json:"key"`
					Value json.RawMessage `json:"value"`
				} `json:"headers"`
				TransactionID string `json:"transactionId"`
				PartitionID   string `json:"partitionId"`
			} `json:"messages"`
		}
		code, err := e2etest.Call(ctx, http.MethodGet, c.Nodes[0].URL()+"/api/v1/pop/queue/orders?batch=100&wait=true&timeout=5000", nil, &out)
		if err != nil || code != http.StatusOK {
			t.Fatalf("pop: %d %v", code, err)
		}
		for _, m := range out.Messages {
			var v struct{ OrderID int }
			if json.Unmarshal(m.Data, &v) != nil || string(m.Key) == "" || len(m.Headers) != 1 || string(m.Headers[0].Value) != `"kafka"` {
				t.Fatalf("popped %+v", m)
			}
			ack := map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": "completed"}
			if code, err := e2etest.Call(ctx, http.MethodPost, c.Nodes[0].URL()+"/api/v1/ack", ack, nil); err != nil || code >= 300 {
				t.Fatalf("ack: %d %v", code, err)
			}
			seen++
		}
	}
}

func TestHTTPPushIsFetchedOverKafka(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	ctx := e2etest.Deadline(t, 60*time.Second)
	var items []e2etest.PushItem
	for i := 0; i < 10; i++ {
		items = append(items, e2etest.PushItem{Queue: "billing.invoice", Partition: "customer-9", Payload: map[string]int{"n": i}})
	}
	if _, code, err := e2etest.Push(ctx, c.Nodes[0].URL(), items); err != nil || code != http.StatusCreated {
		t.Fatalf("push: %d %v", code, err)
	}
	// The HTTP queue is a topic; its named partition has index 0.
	admin := e2etest.KgoClient(t, c)
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("billing.invoice")}}
	resp, err := md.RequestWith(ctx, admin)
	if err != nil || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("metadata: %v %+v", err, resp)
	}
	cons := e2etest.KgoClient(t, c, kgo.ConsumeTopics("billing.invoice"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := e2etest.ConsumeN(ctx, t, cons, 10)
	for i, r := range got {
		if want := fmt.Sprintf(`{"n":%d}`, i); string(r.Value) != want || r.Offset != int64(i) || r.Key != nil {
			t.Fatalf("record %d: %q at %d, want %s", i, r.Value, r.Offset, want)
		}
	}
}
