package http

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

func startOne(t *testing.T) (string, context.Context) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	return c.Nodes[0].URL(), e2etest.Deadline(t, 90*time.Second)
}

func TestResourceViewsShowRealNumbers(t *testing.T) {
	base, ctx := startOne(t)
	e2etest.PushN(t, ctx, base, "billing.invoice.v1", "a", 5)
	e2etest.PushN(t, ctx, base, "billing.invoice.v1", "b", 3)
	if got := e2etest.PopAck(t, ctx, base, "billing.invoice.v1", "a", "", 4, "completed"); len(got) != 4 {
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
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/queues", nil, 200, &list)
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
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/queues/billing.invoice.v1", nil, 200, &detail)
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
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/status/queues/billing.invoice.v1", nil, 200, &status)
	if status.Queue.Name != "billing.invoice.v1" || status.Totals.Messages.Total != 8 {
		t.Fatalf("status queue: %+v", status)
	}

	var depth struct {
		Depth      uint64
		Partitions []struct{ Partition string }
	}
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/queues/billing.invoice.v1/depth", nil, 200, &depth)
	if depth.Depth != 4 || len(depth.Partitions) != 2 {
		t.Fatalf("depth: %+v", depth)
	}
	var sizes struct {
		Totals struct{ Messages, Bytes uint64 }
	}
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/queues/billing.invoice.v1/sizes", nil, 200, &sizes)
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
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/namespaces", nil, 200, &ns)
	if len(ns.Namespaces) != 1 || ns.Namespaces[0].Namespace != "billing" || ns.Namespaces[0].Messages.Total != 8 {
		t.Fatalf("namespaces: %+v", ns)
	}
	var overview struct {
		Queues, Partitions int
		Messages           struct{ Total, Completed uint64 }
		Throughput         map[string]float64
	}
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/overview", nil, 200, &overview)
	if overview.Queues != 1 || overview.Partitions != 2 || overview.Messages.Total != 8 || overview.Throughput["ingestedPerSecond"] <= 0 {
		t.Fatalf("overview: %+v", overview)
	}
	var parts struct {
		Partitions []struct{ Name, Queue string }
		Total      int
	}
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/partitions?queue=billing.invoice.v1", nil, 200, &parts)
	if parts.Total != 2 {
		t.Fatalf("partitions: %+v", parts)
	}
	var st struct {
		Throughput []struct{ Ingested, PopMessages, Processed uint64 }
		Messages   struct{ Total uint64 }
	}
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/status", nil, 200, &st)
	var in, popped, done uint64
	for _, p := range st.Throughput {
		in, popped, done = in+p.Ingested, popped+p.PopMessages, done+p.Processed
	}
	if in != 8 || popped != 4 || done != 4 || st.Messages.Total != 8 {
		t.Fatalf("status throughput in=%d popped=%d done=%d: %+v", in, popped, done, st)
	}
	var refresh map[string]any
	e2etest.GetJSON(t, ctx, http.MethodPost, base+"/api/v1/stats/refresh", nil, 200, &refresh)
	if refresh["success"] != true || refresh["engine"] != "raft" || refresh["refreshed"] != false {
		t.Fatalf("refresh: %+v", refresh)
	}
	for _, path := range []string{"/status", "/api/v1/status/queues", "/api/v1/status/analytics", "/api/v1/resources/tasks",
		"/api/v1/analytics/system-metrics", "/api/v1/analytics/worker-metrics", "/api/v1/analytics/queue-lag",
		"/api/v1/analytics/queue-ops", "/api/v1/analytics/workload", "/api/v1/analytics/queue-parked-replicas",
		"/api/v1/analytics/retention", "/api/v1/analytics/dlq-signatures", "/api/v1/analytics/partition-liveness"} {
		e2etest.GetJSON(t, ctx, http.MethodGet, base+path, nil, 200, nil)
	}
	var lag struct {
		Queues []struct {
			Queue       string
			LagMessages uint64
		}
	}
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/analytics/queue-lag", nil, 200, &lag)
	if len(lag.Queues) != 1 || lag.Queues[0].LagMessages != 4 {
		t.Fatalf("queue-lag: %+v", lag)
	}

	var del map[string]any
	e2etest.GetJSON(t, ctx, http.MethodDelete, base+"/api/v1/resources/queues/billing.invoice.v1", nil, 200, &del)
	if del["deleted"] != true {
		t.Fatalf("delete: %+v", del)
	}
	e2etest.GetJSON(t, ctx, http.MethodDelete, base+"/api/v1/resources/queues/billing.invoice.v1", nil, 200, &del)
	if del["deleted"] != false || del["existed"] != false {
		t.Fatalf("second delete: %+v", del)
	}
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/queues/billing.invoice.v1", nil, 404, nil)
	var nf e2etest.ErrorAnswer
	if code, _ := e2etest.Call(ctx, http.MethodGet, base+"/api/v1/nope", nil, &nf); code != 404 || nf.Code != "no_such_route" || nf.Path != "/api/v1/nope" {
		t.Fatalf("unknown route: %d %+v", code, nf)
	}
}
