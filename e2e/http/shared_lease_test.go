package http

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
	"github.com/queen-mq/queen/wire"
)

// Shared leases (docs/http-api.md, "Shared leases"): a pop with
// partitions=3 over a queue whose partitions live in three raft groups
// leases them all under one id; one extend keeps every one of them past
// the lease's first expiry; one ack batch releases them all; and a lease
// left to expire gives each partition's messages back, in order.
func TestSharedLeaseOverPartitionsInSeveralGroups(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Groups: 4})
	ctx := e2etest.Deadline(t, 4*time.Minute)
	cl := e2etest.NewClient(t, ctx, c.Nodes[0])
	waitFormat(cl, wire.FormatV4)
	const queue = "shared-lease"
	parts := []string{"p0", "p1", "p2"}
	push := func(round int) {
		for _, p := range parts {
			cl.Push(e2etest.PushItems(queue, p, fmt.Sprintf("%s-%d-a", p, round), fmt.Sprintf("%s-%d-b", p, round))...)
		}
	}
	push(1)

	// One pop, one lease id, three partitions in three groups.
	popAt := time.Now()
	a := cl.MustPop(e2etest.PopPath(queue, "batch=6", "partitions=3", "leaseSeconds=3"), 6)
	groups := map[int]bool{}
	for _, m := range a.Messages {
		if m.LeaseID == "" || m.LeaseID != a.LeaseID {
			t.Fatalf("message of %s under lease %q, the pop's is %q", m.Partition, m.LeaseID, a.LeaseID)
		}
		groups[e2etest.GroupOfPID(t, m.PartitionID)] = true
	}
	if len(groups) != 3 {
		t.Fatalf("the partitions are in groups %v, want three", groups)
	}

	// One extend renews all three.
	ext := extendLease(t, cl, a.LeaseID, 60)
	if !ext.Success || ext.Renewed != 3 || ext.NewExpiresAt == nil {
		t.Fatalf("extend: %+v", ext)
	}
	// Until past the lease's first expiry, and after, nothing of the
	// queue is free.
	err := harness.Poll(ctx, 250*time.Millisecond, func() (bool, error) {
		cl.PopEmpty(e2etest.PopPath(queue, "batch=6", "partitions=3"))
		return time.Since(popAt) > 4*time.Second, nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// One ack batch releases them all.
	released := 0
	for i, r := range cl.AckAll(a, "completed") {
		if !r.Success {
			t.Fatalf("ack %d: %+v %s", i, r, e2etest.ErrText(r.Error))
		}
		if r.LeaseReleased {
			released++
		}
	}
	if released != 3 {
		t.Fatalf("the ack batch released %d partitions, want 3", released)
	}
	if ext := extendLease(t, cl, a.LeaseID, 60); ext.Success || ext.Renewed != 0 {
		t.Fatalf("extend of a released lease: %+v", ext)
	}
	cl.PopEmpty(e2etest.PopPath(queue, "batch=6", "partitions=3"))

	// A lease left to expire: every partition's messages come back, in
	// order, as second deliveries.
	push(2)
	first := cl.MustPop(e2etest.PopPath(queue, "batch=6", "partitions=3", "leaseSeconds=2"), 6)
	want := byPartition(t, first.Messages, 1)
	var again []e2etest.PopMessage
	cl.Eventually(60*time.Second, "the expired lease's messages delivered again", func() bool {
		// Each group expires its partitions at its own entry's time: a
		// pop may come in between and find some of them.
		ans, code := cl.Pop(e2etest.PopPath(queue, "batch=6", "partitions=3", "leaseSeconds=60"))
		if code == http.StatusOK {
			again = append(again, ans.Messages...)
		}
		return len(again) >= 6
	})
	if got := byPartition(t, again, 2); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("redelivered %v, want %v", got, want)
	}
	for i, r := range cl.Ack(e2etest.AcksOf(again, "completed")...) {
		if !r.Success {
			t.Fatalf("ack of the redelivery %d: %+v %s", i, r, e2etest.ErrText(r.Error))
		}
	}
	cl.PopEmpty(e2etest.PopPath(queue, "batch=6", "partitions=3"))

	// Transactions as the SDKs send them (the acked messages' lease among
	// requiredLeases), one per partition in claim order: the first one
	// releases the first partition, and the later ones still find the
	// lease live where they acknowledge.
	push(3)
	b := cl.MustPop(e2etest.PopPath(queue, "batch=6", "partitions=3", "leaseSeconds=60"), 6)
	var order []string
	msgs := map[string][]e2etest.PopMessage{}
	for _, m := range b.Messages {
		if _, ok := msgs[m.Partition]; !ok {
			order = append(order, m.Partition)
		}
		msgs[m.Partition] = append(msgs[m.Partition], m)
	}
	for _, p := range order {
		var ops []map[string]any
		for _, m := range msgs[p] {
			ops = append(ops, map[string]any{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID,
				"leaseId": m.LeaseID, "status": "completed"})
		}
		ops = append(ops, map[string]any{"type": "push", "items": []map[string]any{{"queue": queue + "-out", "partition": p, "payload": p}}})
		if ans := cl.Txn(map[string]any{"operations": ops, "requiredLeases": []string{b.LeaseID}}); !ans.Success {
			t.Fatalf("transaction over %s: %+v", p, ans)
		}
	}
	cl.PopEmpty(e2etest.PopPath(queue, "batch=6", "partitions=3"))
	if ext := extendLease(t, cl, b.LeaseID, 60); ext.Success {
		t.Fatalf("extend after every partition was acknowledged: %+v", ext)
	}
}

// On three nodes: popped through one node, extended through another and
// acknowledged through the third, a shared lease over partitions led from
// different nodes behaves as on one.
func TestSharedLeaseAcrossNodes(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Groups: 3})
	ctx := e2etest.Deadline(t, 4*time.Minute)
	cl := e2etest.NewClient(t, ctx, c.Nodes[0])
	for _, n := range c.Nodes {
		waitFormat(cl.On(n), wire.FormatV4)
	}
	const queue = "shared-nodes"
	for _, p := range []string{"p0", "p1", "p2"} {
		cl.Push(e2etest.PushItems(queue, p, p+"-a", p+"-b")...)
	}
	a := cl.MustPop(e2etest.PopPath(queue, "batch=6", "partitions=3", "leaseSeconds=30"), 6)
	groups := map[int]bool{}
	for _, m := range a.Messages {
		if m.LeaseID != a.LeaseID {
			t.Fatalf("message of %s under lease %q, the pop's is %q", m.Partition, m.LeaseID, a.LeaseID)
		}
		groups[e2etest.GroupOfPID(t, m.PartitionID)] = true
	}
	if len(groups) != 3 {
		t.Fatalf("the partitions are in groups %v, want three", groups)
	}
	if ext := extendLease(t, cl.On(c.Nodes[1]), a.LeaseID, 60); !ext.Success || ext.Renewed != 3 {
		t.Fatalf("extend through node 2: %+v", ext)
	}
	released := 0
	for i, r := range cl.On(c.Nodes[2]).AckAll(a, "completed") {
		if !r.Success {
			t.Fatalf("ack %d through node 3: %+v %s", i, r, e2etest.ErrText(r.Error))
		}
		if r.LeaseReleased {
			released++
		}
	}
	if released != 3 {
		t.Fatalf("the ack batch released %d partitions, want 3", released)
	}
	if ext := extendLease(t, cl.On(c.Nodes[1]), a.LeaseID, 60); ext.Success || ext.Renewed != 0 {
		t.Fatalf("extend of a released lease: %+v", ext)
	}
}

// A single-partition pop (partitions=1, or one naming its partition) keeps
// a lease of its own, as before.
func TestSinglePartitionPopKeepsItsOwnLease(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Groups: 2})
	cl := e2etest.NewClient(t, e2etest.Deadline(t, 2*time.Minute), c.Nodes[0])
	waitFormat(cl, wire.FormatV4)
	cl.Push(e2etest.PushItems("own-lease", "x", 1, 2)...)
	cl.Push(e2etest.PushItems("own-lease", "y", 3)...)
	a, code := cl.Pop(e2etest.PopPath("own-lease", "batch=5"))
	if code != http.StatusOK || len(a.Messages) == 0 {
		t.Fatalf("pop: %d %+v", code, a)
	}
	other := map[string]string{"x": "y", "y": "x"}[a.Partition]
	b, code := cl.Pop("/api/v1/pop/queue/own-lease/partition/" + other + "?batch=5")
	if code != http.StatusOK || a.LeaseID == b.LeaseID || b.Messages[0].LeaseID != b.LeaseID {
		t.Fatalf("pops of %s and %s: %d, leases %s and %s", a.Partition, other, code, a.LeaseID, b.LeaseID)
	}
	for _, l := range []string{a.LeaseID, b.LeaseID} {
		if ext := extendLease(t, cl, l, 30); !ext.Success || ext.Renewed != 1 {
			t.Fatalf("extend %s: %+v", l, ext)
		}
	}
}

type extendAnswer struct {
	Success      bool    `json:"success"`
	Renewed      int     `json:"renewed"`
	NewExpiresAt *string `json:"newExpiresAt"`
}

func extendLease(t *testing.T, cl *e2etest.Client, lease string, seconds int) extendAnswer {
	t.Helper()
	var ext extendAnswer
	if code := cl.Do(http.MethodPost, "/api/v1/lease/"+lease+"/extend", map[string]int{"seconds": seconds}, &ext); code != http.StatusOK {
		t.Fatalf("extend %s: %d", lease, code)
	}
	return ext
}

// waitFormat waits for every group of the node to apply at format v or
// later (the leader raises it a moment after start).
func waitFormat(cl *e2etest.Client, v uint32) {
	cl.Eventually(60*time.Second, fmt.Sprintf("every group at format %d", v), func() bool {
		var h struct {
			Format struct {
				Active []uint32 `json:"active"`
			} `json:"format"`
		}
		cl.Do(http.MethodGet, "/health", nil, &h)
		return len(h.Format.Active) > 0 && !slices.ContainsFunc(h.Format.Active, func(f uint32) bool { return f < v })
	})
}

// byPartition lists each partition's payloads in delivery order and checks
// every message's delivery attempt.
func byPartition(t *testing.T, msgs []e2etest.PopMessage, attempt int) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, m := range msgs {
		if m.DeliveryAttempt != attempt {
			t.Fatalf("%s of %s: delivery attempt %d, want %d", m.TransactionID, m.Partition, m.DeliveryAttempt, attempt)
		}
		var s string
		if err := json.Unmarshal(m.Data, &s); err != nil {
			t.Fatalf("payload %s: %v", m.Data, err)
		}
		out[m.Partition] = append(out[m.Partition], s)
	}
	return out
}
