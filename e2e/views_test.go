package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/harness"
)

// getJSON GETs a path and decodes the answer, failing the test on any
// status but want.
func getJSON(t *testing.T, ctx context.Context, method, url string, body any, want int, out any) {
	t.Helper()
	var raw json.RawMessage
	code, err := call(ctx, method, url, body, &raw)
	if err != nil || code != want {
		t.Fatalf("%s %s: %d %v (%s)", method, url, code, err, raw)
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v (%s)", method, url, err, raw)
		}
	}
}

// pushN pushes n messages to queue/partition.
func pushN(t *testing.T, ctx context.Context, base, queue, partition string, n int) {
	t.Helper()
	items := make([]pushItem, n)
	for i := range items {
		items[i] = pushItem{Queue: queue, Partition: partition, Payload: map[string]int{"n": i}}
	}
	if _, code, err := push(ctx, base, items); err != nil || code != http.StatusCreated {
		t.Fatalf("push: %d %v", code, err)
	}
}

// popAck pops up to batch messages of queue (of one partition when set)
// for group and acknowledges them with status; it returns the messages.
func popAck(t *testing.T, ctx context.Context, base, queue, partition, group string, batch int, status string) []popMessage {
	t.Helper()
	path := "/api/v1/pop/queue/" + queue
	if partition != "" {
		path += "/partition/" + partition
	}
	path += fmt.Sprintf("?batch=%d&subscriptionMode=all", batch)
	if group != "" {
		path += "&consumerGroup=" + group
	}
	ans, code, err := pop(ctx, base, path)
	if err != nil || (code != http.StatusOK && code != http.StatusNoContent) {
		t.Fatalf("pop: %d %v", code, err)
	}
	for _, m := range ans.Messages {
		body := map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID,
			"status": status, "consumerGroup": group, "error": "boom"}
		var out []map[string]any
		if code, err := call(ctx, http.MethodPost, base+"/api/v1/ack", body, &out); err != nil || code != http.StatusOK {
			t.Fatalf("ack: %d %v", code, err)
		}
	}
	return ans.Messages
}

func startOne(t *testing.T) (string, context.Context) {
	c := startCluster(t, harness.Options{Nodes: 1})
	return c.Nodes[0].URL(), deadline(t, 90*time.Second)
}

func TestResourceViewsShowRealNumbers(t *testing.T) {
	base, ctx := startOne(t)
	pushN(t, ctx, base, "billing.invoice.v1", "a", 5)
	pushN(t, ctx, base, "billing.invoice.v1", "b", 3)
	if got := popAck(t, ctx, base, "billing.invoice.v1", "a", "", 4, "completed"); len(got) != 4 {
		t.Fatalf("popped %d", len(got))
	}

	var list struct {
		Queues []struct {
			ID, Name   string
			Namespace  *string
			Task       *string
			CreatedAt  string
			Partitions int
			Messages   struct{ Total, Pending, Processing, Completed uint64 }
		}
	}
	getJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/queues", nil, 200, &list)
	if len(list.Queues) != 1 {
		t.Fatalf("queues: %+v", list)
	}
	q := list.Queues[0]
	if q.Name != "billing.invoice.v1" || q.Partitions != 2 || *q.Namespace != "billing" || *q.Task != "invoice" ||
		q.Messages.Total != 8 || q.Messages.Pending != 4 || q.Messages.Completed != 4 || q.CreatedAt == "" {
		t.Fatalf("queue list item: %+v", q)
	}

	var detail struct {
		Name       string
		Partitions []struct {
			ID, Name string
			Stats    struct{ Total, Pending, Completed uint64 }
		}
		Totals struct{ Total, Pending, Completed uint64 }
		Config map[string]any
	}
	getJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/queues/billing.invoice.v1", nil, 200, &detail)
	if len(detail.Partitions) != 2 || detail.Totals.Total != 8 || detail.Totals.Pending != 4 || detail.Config["leaseTime"] != 60.0 {
		t.Fatalf("queue detail: %+v", detail)
	}
	var status struct {
		Queue struct {
			Name   string
			Config map[string]any
		}
		Totals struct {
			Messages struct{ Total uint64 }
		}
	}
	getJSON(t, ctx, http.MethodGet, base+"/api/v1/status/queues/billing.invoice.v1", nil, 200, &status)
	if status.Queue.Name != "billing.invoice.v1" || status.Totals.Messages.Total != 8 {
		t.Fatalf("status queue: %+v", status)
	}

	var depth struct {
		Depth      uint64
		Partitions []struct{ Partition string }
	}
	getJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/queues/billing.invoice.v1/depth", nil, 200, &depth)
	if depth.Depth != 4 || len(depth.Partitions) != 2 {
		t.Fatalf("depth: %+v", depth)
	}
	var sizes struct {
		Totals struct{ Messages, Bytes uint64 }
	}
	getJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/queues/billing.invoice.v1/sizes", nil, 200, &sizes)
	if sizes.Totals.Messages != 8 || sizes.Totals.Bytes == 0 {
		t.Fatalf("sizes: %+v", sizes)
	}
	var ns struct {
		Namespaces []struct {
			Namespace string
			Queues    int
			Messages  struct{ Total uint64 }
		}
	}
	getJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/namespaces", nil, 200, &ns)
	if len(ns.Namespaces) != 1 || ns.Namespaces[0].Namespace != "billing" || ns.Namespaces[0].Messages.Total != 8 {
		t.Fatalf("namespaces: %+v", ns)
	}
	var overview struct {
		Queues, Partitions int
		Messages           struct{ Total, Completed uint64 }
		Throughput         map[string]float64
	}
	getJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/overview", nil, 200, &overview)
	if overview.Queues != 1 || overview.Partitions != 2 || overview.Messages.Total != 8 || overview.Throughput["ingestedPerSecond"] <= 0 {
		t.Fatalf("overview: %+v", overview)
	}
	var parts struct {
		Partitions []struct{ Name, Queue string }
		Total      int
	}
	getJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/partitions?queue=billing.invoice.v1", nil, 200, &parts)
	if parts.Total != 2 {
		t.Fatalf("partitions: %+v", parts)
	}
	var st struct {
		Throughput []struct{ Ingested, PopMessages, Processed uint64 }
		Messages   struct{ Total uint64 }
	}
	getJSON(t, ctx, http.MethodGet, base+"/api/v1/status", nil, 200, &st)
	var in, popped, done uint64
	for _, p := range st.Throughput {
		in, popped, done = in+p.Ingested, popped+p.PopMessages, done+p.Processed
	}
	if in != 8 || popped != 4 || done != 4 || st.Messages.Total != 8 {
		t.Fatalf("status throughput in=%d popped=%d done=%d: %+v", in, popped, done, st)
	}
	var refresh map[string]any
	getJSON(t, ctx, http.MethodPost, base+"/api/v1/stats/refresh", nil, 200, &refresh)
	if refresh["success"] != true || refresh["engine"] != "raft" || refresh["refreshed"] != false {
		t.Fatalf("refresh: %+v", refresh)
	}
	for _, path := range []string{"/status", "/api/v1/status/queues", "/api/v1/status/analytics", "/api/v1/resources/tasks",
		"/api/v1/analytics/system-metrics", "/api/v1/analytics/worker-metrics", "/api/v1/analytics/queue-lag",
		"/api/v1/analytics/queue-ops", "/api/v1/analytics/workload", "/api/v1/analytics/queue-parked-replicas",
		"/api/v1/analytics/retention", "/api/v1/analytics/dlq-signatures", "/api/v1/analytics/partition-liveness"} {
		getJSON(t, ctx, http.MethodGet, base+path, nil, 200, nil)
	}
	var lag struct {
		Queues []struct {
			Queue       string
			LagMessages uint64
		}
	}
	getJSON(t, ctx, http.MethodGet, base+"/api/v1/analytics/queue-lag", nil, 200, &lag)
	if len(lag.Queues) != 1 || lag.Queues[0].LagMessages != 4 {
		t.Fatalf("queue-lag: %+v", lag)
	}

	var del map[string]any
	getJSON(t, ctx, http.MethodDelete, base+"/api/v1/resources/queues/billing.invoice.v1", nil, 200, &del)
	if del["deleted"] != true {
		t.Fatalf("delete: %+v", del)
	}
	getJSON(t, ctx, http.MethodDelete, base+"/api/v1/resources/queues/billing.invoice.v1", nil, 200, &del)
	if del["deleted"] != false || del["existed"] != false {
		t.Fatalf("second delete: %+v", del)
	}
	getJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/queues/billing.invoice.v1", nil, 404, nil)
	var nf errorAnswer
	if code, _ := call(ctx, http.MethodGet, base+"/api/v1/nope", nil, &nf); code != 404 || nf.Code != "no_such_route" || nf.Path != "/api/v1/nope" {
		t.Fatalf("unknown route: %d %+v", code, nf)
	}
}
