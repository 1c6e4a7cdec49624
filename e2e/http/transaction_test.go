package http

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// A transaction commits its pushes, acks and positions together, or
// answers success false with the spec's reason and changes nothing.
func TestTransactionsAreAllOrNothing(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	cl := e2etest.NewClient(t, e2etest.Deadline(t, 2*time.Minute), c.Nodes[0])
	cl.Push(e2etest.PushItems("in", "p", "a", "b", "c")...)
	cl.Push(e2etest.PushItem{Queue: "out", Partition: "p", Payload: "seed", TransactionID: "taken"})
	cl.Push(e2etest.PushItems("audit", "p", 0, 1, 2)...)
	stale := cl.MustPop(e2etest.PopPath("in", "batch=1", "leaseSeconds=1"), 1)
	var live e2etest.PopAnswer
	cl.Eventually(10*time.Second, "lease expiry", func() bool {
		a, code := cl.Pop(e2etest.PopPath("in", "batch=2"))
		live = a
		return code == http.StatusOK
	})
	ack := func(m e2etest.PopMessage) map[string]any {
		return map[string]any{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": "completed"}
	}
	push := func(txn string) map[string]any {
		return map[string]any{"type": "push", "items": []map[string]any{{"queue": "out", "partition": "p", "payload": map[string]any{"from": "txn"}, "transactionId": txn}}}
	}
	position := map[string]any{"queue": "audit", "consumerGroup": "auditors", "partition": "p", "offset": 2, "subscriptionMode": "all"}

	// What each failure must leave alone.
	snapshot := func() string {
		_, outHWM, _ := cl.Log("out", "p")
		_, inHWM, _ := cl.Log("in", "p")
		return fmt.Sprint(outHWM, inHWM)
	}
	before := snapshot()
	for _, tc := range []struct {
		name, reason, failedType string
		failedIndex              int
		body                     map[string]any
	}{
		{"stale required lease", "rejected_ack", "requiredLease", 1, map[string]any{
			"operations": []any{ack(live.Messages[0]), push("n1")}, "requiredLeases": []string{live.LeaseID, stale.LeaseID}}},
		{"stale fenced ack", "rejected_ack", "ack", 1, map[string]any{
			"operations": []any{push("n1"), map[string]any{"type": "ack", "transactionId": stale.Messages[0].TransactionID,
				"partitionId": stale.Messages[0].PartitionID, "leaseId": stale.LeaseID}}}},
		{"duplicate push", "duplicate", "push", 1, map[string]any{"operations": []any{ack(live.Messages[0]), push("taken")}}},
		{"missing queue", "queue_not_found", "position", 0, map[string]any{"operations": []any{push("n1"), ack(live.Messages[0])},
			"positions": []any{map[string]any{"queue": "nowhere", "consumerGroup": "g", "partition": "p", "offset": 1}}}},
		{"unknown operation", "bad_request", "delete", 1, map[string]any{"operations": []any{push("n1"), map[string]any{"type": "delete"}}}},
		{"bad name", "name_too_long", "push", 0, map[string]any{"operations": []any{map[string]any{"type": "push",
			"items": []map[string]any{{"queue": strings.Repeat("q", 500), "payload": 1}}}}}},
		{"no operations", "bad_request", "", -1, map[string]any{"operations": []any{}}},
		{"a KV guard that does not hold", "kv_precondition", "kv", 1, map[string]any{"operations": []any{push("n1")},
			"kv": []any{map[string]any{"op": "put", "ns": "app", "key": "k", "value": 1},
				map[string]any{"op": "check", "ns": "app", "key": "k", "expect": 42, "required": true}}}},
	} {
		r := cl.Txn(tc.body)
		idx := -1
		if r.FailedIndex != nil {
			idx = *r.FailedIndex
		}
		if r.Success || r.Reason != tc.reason || r.FailedType != tc.failedType || idx != tc.failedIndex || r.Error == "" || r.Results != nil {
			t.Fatalf("%s: %+v", tc.name, r)
		}
		if now := snapshot(); now != before {
			t.Fatalf("%s changed state: %s -> %s", tc.name, before, now)
		}
	}
	// The failed transactions acknowledged nothing: the live lease still
	// holds both messages.
	cl.PopEmpty(e2etest.PopPath("in"))

	// Commit: ack one message, push, move a group, all at once.
	r := cl.Txn(map[string]any{
		"operations":     []any{ack(live.Messages[0]), push("n1"), ack(live.Messages[1])},
		"requiredLeases": []string{live.LeaseID},
		"positions":      []any{position},
	})
	if !r.Success || r.Reason != "" || len(r.Results) != 4 {
		t.Fatalf("commit: %+v", r)
	}
	if r.Results[0].Type != "ack" || !r.Results[0].Success || r.Results[2].Type != "ack" || !r.Results[2].LeaseReleased ||
		r.Results[1].Type != "push" || len(r.Results[1].Items) != 1 || r.Results[1].Items[0].Status != "queued" || r.Results[1].Items[0].Offset != 1 ||
		r.Results[3].Type != "position" || r.Results[3].Offset == nil || *r.Results[3].Offset != 2 {
		t.Fatalf("results: %+v", r.Results)
	}
	if recs, _, _ := cl.Log("out", "p"); len(recs) != 2 || string(recs[1].Payload) != `{"from":"txn"}` {
		t.Fatalf("out: %+v", recs)
	}
	if a := cl.MustPop(e2etest.PopPath("in", "batch=5"), 1); string(a.Messages[0].Data) != `"c"` {
		t.Fatalf("in after the acks: %s", payloads(a))
	}
	if a := cl.MustPop(e2etest.PopPath("audit", "batch=5", "consumerGroup=auditors"), 1); a.Messages[0].Offset != 2 {
		t.Fatalf("audit position: %+v", a.Messages[0])
	}
	// Replaying the committed transaction's push is a duplicate now.
	if r := cl.Txn(map[string]any{"operations": []any{push("n1")}}); r.Success || r.Reason != "duplicate" {
		t.Fatalf("replay: %+v", r)
	}
	// offset null forgets a position.
	reset := map[string]any{"queue": "audit", "consumerGroup": "auditors", "partition": "p", "offset": nil}
	if r := cl.Txn(map[string]any{"positions": []any{reset}}); !r.Success {
		t.Fatalf("reset: %+v", r)
	}
}

// In a cluster, pops, acks, lease extensions and transactions can go to
// any node: they are all proposals, ordered by the raft log.
func TestPopAndAckOnDifferentNodes(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	n := c.Nodes
	one, two, three := e2etest.NewClient(t, ctx, n[0]), e2etest.NewClient(t, ctx, n[1]), e2etest.NewClient(t, ctx, n[2])
	for i := 0; i < 6; i++ {
		one.Push(e2etest.PushItems("shared", "p", i)...)
	}
	// Node 2 may not have applied the pushes yet when it is asked: the pop
	// is a proposal, so it sees everything committed before it.
	a := two.MustPop(e2etest.PopPath("shared", "batch=2"), 2)
	if payloads(a)[0] != "0" {
		t.Fatalf("first pop: %s", payloads(a))
	}
	one.PopEmpty(e2etest.PopPath("shared")) // the partition is leased to the group
	var ext struct {
		Success bool `json:"success"`
	}
	if code := one.Do(http.MethodPost, "/api/v1/lease/"+a.LeaseID+"/extend", map[string]any{"seconds": 90}, &ext); code != 200 || !ext.Success {
		t.Fatalf("extend on another node: %d %+v", code, ext)
	}
	rs := three.AckAll(a, "completed")
	if !rs[0].Success || !rs[1].LeaseReleased {
		t.Fatalf("acks on a third node: %+v", rs)
	}
	b := one.MustPop(e2etest.PopPath("shared", "batch=2"), 2)
	if payloads(b)[0] != "2" {
		t.Fatalf("next pop continues in order: %s", payloads(b))
	}
	// A stale ack on yet another node is rejected, a repeated one a noop.
	if r := two.Ack(e2etest.AckOf(a.Messages[0], "completed"))[0]; !r.Noop {
		t.Fatalf("repeated ack elsewhere: %+v", r)
	}
	r := three.Txn(map[string]any{"operations": []any{
		map[string]any{"type": "ack", "transactionId": b.Messages[0].TransactionID, "partitionId": b.Messages[0].PartitionID},
		map[string]any{"type": "ack", "transactionId": b.Messages[1].TransactionID, "partitionId": b.Messages[1].PartitionID},
		map[string]any{"type": "push", "items": []map[string]any{{"queue": "shared-out", "payload": "done"}}},
	}, "requiredLeases": []string{b.LeaseID}})
	if !r.Success {
		t.Fatalf("transaction on a follower: %+v", r)
	}
	if c := two.MustPop(e2etest.PopPath("shared", "batch=10"), 2); payloads(c)[0] != "4" {
		t.Fatalf("after the transaction: %s", payloads(c))
	}
	two.MustPop(e2etest.PopPath("shared-out"), 1)
}
