package http

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
)

// deadLetter pushes one message to q/p and fails it until the DLQ takes it
// (retryLimit 3: the fourth failure).
func deadLetter(t *testing.T, ctx context.Context, base, q, p string) e2etest.PopMessage {
	t.Helper()
	e2etest.PushN(t, ctx, base, q, p, 1)
	var last e2etest.PopMessage
	for i := 0; i < 4; i++ {
		got := e2etest.PopAck(t, ctx, base, q, p, "", 1, "failed")
		if len(got) != 1 {
			t.Fatalf("failure %d: nothing popped", i)
		}
		last = got[0]
	}
	return last
}

func TestDLQMessagesAndReplay(t *testing.T) {
	base, ctx := startOne(t)
	msg := deadLetter(t, ctx, base, "jobs", "p")

	var dlq struct {
		Messages []struct {
			ID, MessageID, TransactionID, PartitionID, Queue, Partition, ConsumerGroup string
			ErrorMessage                                                               *string
			RetryCount                                                                 int
			Data                                                                       map[string]int
			FailedAt                                                                   string
		}
		Total int
	}
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/dlq?queue=jobs", nil, 200, &dlq)
	if dlq.Total != 1 || len(dlq.Messages) != 1 {
		t.Fatalf("dlq: %+v", dlq)
	}
	row := dlq.Messages[0]
	if row.MessageID != msg.ID || row.Queue != "jobs" || row.ConsumerGroup != "__QUEUE_MODE__" || row.RetryCount != 4 ||
		row.ErrorMessage == nil || *row.ErrorMessage != "boom" || row.FailedAt == "" {
		t.Fatalf("dlq row: %+v", row)
	}
	var m map[string]any
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/messages/"+msg.PartitionID+"/"+msg.TransactionID, nil, 200, &m)
	if m["status"] != "dead_letter" || m["errorMessage"] != "boom" || m["queue"] != "jobs" {
		t.Fatalf("message: %+v", m)
	}
	var list struct {
		Messages []map[string]any
		Mode     map[string]any
	}
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/messages?queue=jobs", nil, 200, &list)
	if len(list.Messages) != 1 || list.Messages[0]["status"] != "dead_letter" || list.Mode["type"] != "queue" {
		t.Fatalf("messages: %+v", list)
	}
	var sigs struct {
		Signatures []struct {
			Error string
			Count int
		}
	}
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/analytics/dlq-signatures", nil, 200, &sigs)
	if len(sigs.Signatures) != 1 || sigs.Signatures[0].Error != "boom" || sigs.Signatures[0].Count != 1 {
		t.Fatalf("signatures: %+v", sigs)
	}

	var rep map[string]any
	e2etest.GetJSON(t, ctx, http.MethodPost, base+"/api/v1/dlq/"+row.ID+"/replay", nil, 200, &rep)
	if rep["result"] != "moved" || rep["transactionId"] != "dlq:"+row.ID || rep["offset"] != 1.0 {
		t.Fatalf("replay: %+v", rep)
	}
	e2etest.GetJSON(t, ctx, http.MethodPost, base+"/api/v1/dlq/"+row.ID+"/replay", nil, 200, &rep)
	if rep["result"] != "duplicate" || rep["offset"] != 1.0 {
		t.Fatalf("repeated replay: %+v", rep)
	}
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/dlq?queue=jobs", nil, 200, &dlq)
	if dlq.Total != 0 {
		t.Fatalf("replayed row still listed: %+v", dlq)
	}
	got := e2etest.PopAck(t, ctx, base, "jobs", "p", "", 10, "completed")
	if len(got) != 1 || got[0].TransactionID != "dlq:"+row.ID || string(got[0].Data) != `{"n":0}` {
		t.Fatalf("replayed message: %+v", got)
	}

	// A second dead letter, retried through the message route, then purged.
	msg2 := deadLetter(t, ctx, base, "jobs", "p")
	e2etest.GetJSON(t, ctx, http.MethodPost, base+"/api/v1/messages/"+msg2.PartitionID+"/"+msg2.TransactionID+"/retry", nil, 200, &rep)
	if rep["result"] != "moved" {
		t.Fatalf("retry: %+v", rep)
	}
	deadLetter(t, ctx, base, "jobs", "p")
	var purge map[string]any
	e2etest.GetJSON(t, ctx, http.MethodDelete, base+"/api/v1/dlq?queue=jobs", nil, 200, &purge)
	if purge["deleted"].(float64) < 1 {
		t.Fatalf("purge: %+v", purge)
	}
	e2etest.GetJSON(t, ctx, http.MethodPost, base+"/api/v1/dlq/"+row.ID+"/replay", nil, 404, nil)

	// Delete erases a live message: it is gone by id, its offset stays.
	e2etest.PushN(t, ctx, base, "erase", "p", 2)
	recs, _, err := e2etest.FetchAll(ctx, base, "erase", "p")
	if err != nil || len(recs) != 2 {
		t.Fatalf("fetch: %v %d", err, len(recs))
	}
	var pid string
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/messages?queue=erase", nil, 200, &list)
	pid = list.Messages[0]["partitionId"].(string)
	e2etest.GetJSON(t, ctx, http.MethodDelete, base+"/api/v1/messages/"+pid+"/"+recs[0].TransactionID, nil, 200, nil)
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/messages/"+pid+"/"+recs[0].TransactionID, nil, 404, nil)
	e2etest.GetJSON(t, ctx, http.MethodDelete, base+"/api/v1/messages/"+pid+"/"+recs[0].TransactionID, nil, 404, nil)
	after, _, _ := e2etest.FetchAll(ctx, base, "erase", "p")
	if len(after) != 2 || string(after[0].Payload) != "null" || string(after[1].Payload) != `{"n":1}` {
		t.Fatalf("after erase: %+v", after)
	}
}

func TestConsumerGroupsAndMetrics(t *testing.T) {
	base, ctx := startOne(t)
	e2etest.PushN(t, ctx, base, "events", "p", 10)
	if got := e2etest.PopAck(t, ctx, base, "events", "p", "analytics", 4, "completed"); len(got) != 4 {
		t.Fatalf("bus pop: %d", len(got))
	}
	var groups []struct {
		Name, QueueName, State                       string
		Topics                                       []string
		PartitionCursors, PartitionsWithLag, Members int
		TotalLag                                     uint64
		SubscriptionMode                             *string
	}
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/consumer-groups", nil, 200, &groups)
	if len(groups) != 1 || groups[0].Name != "analytics" || groups[0].QueueName != "events" || groups[0].TotalLag != 6 ||
		groups[0].PartitionsWithLag != 1 || groups[0].State != "Stable" || *groups[0].SubscriptionMode != "all" {
		t.Fatalf("groups: %+v", groups)
	}
	var detail map[string]struct {
		Partitions []struct {
			Partition string
			OffsetLag uint64
			Offset    uint64
		}
	}
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/consumer-groups/analytics", nil, 200, &detail)
	if p := detail["events"].Partitions; len(p) != 1 || p[0].OffsetLag != 6 || p[0].Offset != 4 {
		t.Fatalf("detail: %+v", detail)
	}
	var lagging []map[string]any
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/consumer-groups/lagging?minLagSeconds=3600", nil, 200, &lagging)
	if len(lagging) != 0 {
		t.Fatalf("nothing is an hour behind: %+v", lagging)
	}

	// Prometheus: in/out per queue, depth and group lag.
	for sample, want := range map[string]float64{
		`queen_queue_messages_in_total{tenant="00000000-0000-0000-0000-000000000001",queue="events"}`:                       10,
		`queen_queue_messages_out_total{tenant="00000000-0000-0000-0000-000000000001",queue="events"}`:                      4,
		`queen_consumer_group_lag_messages{tenant="00000000-0000-0000-0000-000000000001",queue="events",group="analytics"}`: 6,
	} {
		if v, err := e2etest.Metric(ctx, base, sample); err != nil || v != want {
			t.Fatalf("%s = %v (%v), want %v", sample, v, err, want)
		}
	}
	var mj struct {
		Uptime   int64
		Requests struct{ Total uint64 }
		Messages struct{ Total uint64 }
		Engine   string
		Raft     struct {
			Role   string
			Leader uint64
		}
	}
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/metrics", nil, 200, &mj)
	if mj.Engine != "raft" || mj.Messages.Total != 10 || mj.Requests.Total == 0 || mj.Raft.Role != "leader" {
		t.Fatalf("metrics json: %+v", mj)
	}

	// Positions: write one, read it back.
	var pos struct {
		Results   []struct{ Success bool }
		Positions []struct {
			Partition string
			Offset    *uint64
			Lag       uint64
		}
	}
	body := map[string]any{"consumerGroup": "analytics", "write": []map[string]any{{"queue": "events", "partition": "p", "offset": 8}},
		"read": []map[string]any{{"queue": "events"}}}
	e2etest.GetJSON(t, ctx, http.MethodPost, base+"/api/v1/consumer-groups/positions", body, 200, &pos)
	if len(pos.Results) != 1 || !pos.Results[0].Success || len(pos.Positions) != 1 || *pos.Positions[0].Offset != 8 || pos.Positions[0].Lag != 2 {
		t.Fatalf("positions: %+v", pos)
	}

	// Seek to the end: nothing left; to a time before the pushes: all again.
	var seek map[string]any
	e2etest.GetJSON(t, ctx, http.MethodPost, base+"/api/v1/consumer-groups/analytics/queues/events/seek", map[string]any{"toEnd": true}, 200, &seek)
	if seek["partitionsUpdated"] != 1.0 {
		t.Fatalf("seek: %+v", seek)
	}
	if got := e2etest.PopAck(t, ctx, base, "events", "p", "analytics", 10, "completed"); len(got) != 0 {
		t.Fatalf("after seek to end: %d", len(got))
	}
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	e2etest.GetJSON(t, ctx, http.MethodPost, base+"/api/v1/consumer-groups/analytics/queues/events/partitions/p/seek", map[string]any{"timestamp": past}, 200, &seek)
	if got := e2etest.PopAck(t, ctx, base, "events", "p", "analytics", 100, "completed"); len(got) != 10 {
		t.Fatalf("after seek back: %d", len(got))
	}
	e2etest.GetJSON(t, ctx, http.MethodPost, base+"/api/v1/consumer-groups/analytics/queues/events/seek", map[string]any{}, 400, nil)
	var sub map[string]any
	e2etest.GetJSON(t, ctx, http.MethodPost, base+"/api/v1/consumer-groups/analytics/subscription", map[string]any{"subscriptionTimestamp": past}, 200, &sub)
	if sub["rowsUpdated"] != 1.0 {
		t.Fatalf("subscription: %+v", sub)
	}

	var del map[string]any
	e2etest.GetJSON(t, ctx, http.MethodDelete, base+"/api/v1/consumer-groups/analytics/queues/events", nil, 200, &del)
	if del["deletedPartitions"] != 1.0 {
		t.Fatalf("delete for queue: %+v", del)
	}
	e2etest.GetJSON(t, ctx, http.MethodDelete, base+"/api/v1/consumer-groups/analytics?deleteMetadata=true", nil, 200, &del)
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/consumer-groups", nil, 200, &groups)
	if len(groups) != 0 {
		t.Fatalf("groups after delete: %+v", groups)
	}
}
