package storage

import (
	"fmt"
	"testing"

	"github.com/queen-mq/queen/wire"
)

func (h *harness) countCmd(kind wire.Kind, body []byte) wire.CountResult {
	h.t.Helper()
	r, err := wire.DecodeCountResult(h.apply(kind, body))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) queueView(name string) QueueView {
	h.t.Helper()
	qs := h.s.Queues(wire.DefaultTenant, QueueFilter{Name: name, Partitions: true}, h.now)
	if len(qs) != 1 {
		h.t.Fatalf("queue %s: %d views", name, len(qs))
	}
	return qs[0]
}

// deadLetterOne pushes one message to q/p and fails it past the retry
// limit, so it lands in the DLQ.
func (h *harness) deadLetterOne(q, p, group string) {
	h.t.Helper()
	h.push(q, p, `{"x":1}`)
	for i := 0; ; i++ {
		r := h.pop(q, group, 1, 60000)
		if len(r.Claims) == 0 {
			h.t.Fatalf("nothing to pop after %d failures", i)
		}
		_, txns := h.payloads(r.Claims[0])
		if o := h.ack(group, r.Claims[0], txns[0], wire.AckFailed); o.DLQ {
			return
		}
	}
}

func TestViewsCountWhatWasApplied(t *testing.T) {
	h := newHarness(t)
	h.push("q", "a", "1", "2", "3")
	h.push("q", "b", "4")
	cl := h.pop("q", wire.QueueModeGroup, 2, 60000).Claims[0]
	_, txns := h.payloads(cl)
	h.ack(wire.QueueModeGroup, cl, txns[0], wire.AckCompleted)

	v := h.queueView("q")
	if v.Activity.Pushed != 4 || v.Activity.Popped != 2 || v.Activity.Completed != 1 || v.Activity.PushOps != 2 {
		t.Fatalf("activity %+v", v.Activity)
	}
	if len(v.Partitions) != 2 {
		t.Fatalf("partitions %+v", v.Partitions)
	}
	pending, processing, completed := v.Partitions[0].Depth()
	// Partition a: 3 messages, 2 leased of which 1 acked: 1 pending, 1
	// processing, 1 completed (the cursor moves when the lease closes).
	if pending != 1 || processing != 1 || completed != 1 {
		t.Fatalf("depth a: %d %d %d", pending, processing, completed)
	}
	if p, _, _ := v.Partitions[1].Depth(); p != 1 {
		t.Fatalf("depth b pending %d", p)
	}
	if s := h.s.Series(wire.DefaultTenant, "q", h.now-60000, h.now+60000); len(s) != 1 || s[0].Pushed != 4 {
		t.Fatalf("series %+v", s)
	}
}

func TestSeekToEndAndBackToATime(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "1", "2")
	mid := h.now + 1000
	h.now = mid
	h.push("q", "p", "3")
	h.pop("q", "g", 1, 60000) // the group holds a lease at 0
	seek := wire.SeekCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g", ToEnd: true}
	if r := h.countCmd(wire.KindSeek, seek.Encode(nil)); r.Code != wire.CodeOK || r.N != 1 {
		t.Fatalf("seek to end: %+v", r)
	}
	if r := h.pop("q", "g", 10, 60000); len(r.Claims) != 0 {
		t.Fatalf("after seek to end nothing is left: %+v", r)
	}
	seek = wire.SeekCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g", Partition: "p", TimestampMs: mid}
	if r := h.countCmd(wire.KindSeek, seek.Encode(nil)); r.N != 1 {
		t.Fatalf("seek to time: %+v", r)
	}
	if r := h.pop("q", "g", 10, 60000); len(r.Claims) != 1 || r.Claims[0].From != 2 || r.Claims[0].To != 3 {
		t.Fatalf("seek to a time redelivers from there: %+v", r)
	}
	seek.Partition = "nope"
	if r := h.countCmd(wire.KindSeek, seek.Encode(nil)); r.Code != wire.CodePartitionNotFound {
		t.Fatalf("unknown partition: %+v", r)
	}
}

func TestDeleteGroupDropsCursorsAndSurvivesReopen(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "1", "2")
	cl := h.pop("q", "g", 2, 60000).Claims[0]
	_, txns := h.payloads(cl)
	h.ack("g", cl, txns[0], wire.AckCompleted)
	h.ack("g", cl, txns[1], wire.AckCompleted)
	del := wire.DeleteGroupCmd{Tenant: wire.DefaultTenant, Group: "g", DeleteMetadata: true}
	if r := h.countCmd(wire.KindDeleteGroup, del.Encode(nil)); r.N != 1 {
		t.Fatalf("delete group: %+v", r)
	}
	h.s.Close()
	h.open()
	v := h.queueView("q")
	if len(v.Subscriptions) != 0 || len(v.Partitions[0].Cursors) != 0 {
		t.Fatalf("group still there after reopen: %+v", v)
	}
	// A fresh subscription from the start sees every message again.
	if r := h.pop("q", "g", 10, 60000); len(r.Claims) != 1 || r.Claims[0].From != 0 || r.Claims[0].To != 2 {
		t.Fatalf("re-created group: %+v", r)
	}
}

func TestSubscriptionMovesUntouchedPartitions(t *testing.T) {
	h := newHarness(t)
	h.push("q", "a", "1")
	h.pop("q", "g", 1, 60000) // subscribes g (mode all) and takes a
	h.now += 1000
	h.push("q", "b", "old")
	cut := h.now + 1000
	h.now = cut
	h.push("q", "b", "new")
	sub := wire.SubscriptionCmd{Tenant: wire.DefaultTenant, Group: "g", FromMs: cut}
	if r := h.countCmd(wire.KindSubscription, sub.Encode(nil)); r.N != 1 {
		t.Fatalf("subscription: %+v", r)
	}
	r := h.pop("q", "g", 10, 60000)
	if len(r.Claims) != 1 || r.Claims[0].Partition != "b" || r.Claims[0].From != 1 {
		t.Fatalf("untouched partition starts at the new time: %+v", r)
	}
}

func TestDLQReplayPurgeAndReopenCounts(t *testing.T) {
	h := newHarness(t)
	h.deadLetterOne("q", "p", "g")
	h.deadLetterOne("q", "p", "g")
	rows, total, err := h.s.DLQ(wire.DefaultTenant, DLQFilter{Offset: -1}, 0, 10)
	if err != nil || total != 2 || len(rows) != 2 || rows[0].ID <= rows[1].ID {
		t.Fatalf("dlq rows %v %d %+v", err, total, rows)
	}
	if v := h.queueView("q"); v.DLQRows != 2 || v.Activity.DLQ != 2 {
		t.Fatalf("dlq counts %+v", v)
	}
	// The engine pushes the message again and records where; the store
	// only marks the row, keeping its first outcome.
	out := h.push("q", "p", `{"again":true}`)
	replay := wire.DLQReplayCmd{Tenant: wire.DefaultTenant, ID: rows[0].ID, MsgID: wire.ID{7}, Queue: "q", Partition: "p",
		PartitionID: out.PartitionID, Offset: out.BaseOffset}
	res, err := wire.DecodeDLQReplayResult(h.apply(wire.KindDLQReplay, replay.Encode(nil)))
	if err != nil || res.Code != wire.CodeOK || res.Duplicate || res.Queue != "q" || res.Offset != 2 {
		t.Fatalf("replay: %v %+v", err, res)
	}
	second := replay
	second.Offset, second.MsgID = 99, wire.ID{8}
	again, _ := wire.DecodeDLQReplayResult(h.apply(wire.KindDLQReplay, second.Encode(nil)))
	if !again.Duplicate || again.Offset != res.Offset || again.MsgID != res.MsgID {
		t.Fatalf("repeated replay must answer the first: %+v", again)
	}
	if live, _, _ := h.s.DLQ(wire.DefaultTenant, DLQFilter{Offset: -1}, 0, 10); len(live) != 1 {
		t.Fatalf("a replayed row still listed as dead-lettered: %+v", live)
	}
	h.s.Close()
	h.open()
	if v := h.queueView("q"); v.DLQRows != 1 {
		t.Fatalf("live rows after reopen %d", v.DLQRows)
	}
	purge := wire.DLQPurgeCmd{Tenant: wire.DefaultTenant, Queue: "q"}
	if r := h.countCmd(wire.KindDLQPurge, purge.Encode(nil)); r.N != 2 || r.More {
		t.Fatalf("purge removes the row and the marker: %+v", r)
	}
	if _, total, _ := h.s.DLQ(wire.DefaultTenant, DLQFilter{Offset: -1, Replayed: true}, 0, 10); total != 0 {
		t.Fatalf("rows left after purge: %d", total)
	}
	if r, _ := wire.DecodeDLQReplayResult(h.apply(wire.KindDLQReplay, replay.Encode(nil))); r.Code != wire.CodeNotFound {
		t.Fatalf("replay of a purged row: %+v", r)
	}
}

func TestDeleteMessageLeavesATombstone(t *testing.T) {
	h := newHarness(t)
	r := h.push("q", "p", `{"a":1}`, `{"a":2}`, `{"a":3}`)
	_, txns := h.payloads(wire.Claim{PartitionID: r.PartitionID, From: 0, To: 3})
	del := wire.DeleteMessageCmd{Tenant: wire.DefaultTenant, PartitionID: r.PartitionID, TxnID: []byte(txns[1])}
	if c, _ := wire.DecodeCodeResult(h.apply(wire.KindDeleteMessage, del.Encode(nil))); c.Code != wire.CodeOK {
		t.Fatalf("delete: %+v", c)
	}
	if c, _ := wire.DecodeCodeResult(h.apply(wire.KindDeleteMessage, del.Encode(nil))); c.Code != wire.CodeMessageNotFound {
		t.Fatalf("second delete: %+v", c)
	}
	payloads, _ := h.payloads(wire.Claim{PartitionID: r.PartitionID, From: 0, To: 3})
	if payloads[0] != `{"a":1}` || payloads[1] != "" || payloads[2] != `{"a":3}` {
		t.Fatalf("payloads after delete: %q", payloads)
	}
	if _, ok, _ := h.s.MessageByTxn(wire.DefaultTenant, r.PartitionID, txns[1]); ok {
		t.Fatal("deleted message still found by id")
	}
}

func TestDeleteQueueRemovesItsDLQRows(t *testing.T) {
	h := newHarness(t)
	h.deadLetterOne("q", "p", "g")
	h.deadLetterOne("other", "p", "g")
	del := wire.DeleteQueueCmd{Tenant: wire.DefaultTenant, Queue: "q"}
	if c := h.code(wire.KindDeleteQueue, del.Encode(nil)); c != wire.CodeOK {
		t.Fatalf("delete: %v", c)
	}
	rows, total, err := h.s.DLQ(wire.DefaultTenant, DLQFilter{Offset: -1, Replayed: true}, 0, 10)
	if err != nil || total != 1 || len(rows) != 1 || rows[0].Queue != "other" {
		t.Fatalf("after deleting q the DLQ holds only other's row: %v %d %+v", err, total, rows)
	}
	h.push("q", "p", `{"again":1}`)
	if v := h.queueView("q"); v.DLQRows != 0 {
		t.Fatalf("a re-created queue inherits %d dead letters", v.DLQRows)
	}
	h.s.Close()
	h.open()
	if _, total, _ := h.s.DLQ(wire.DefaultTenant, DLQFilter{Offset: -1, Replayed: true}, 0, 10); total != 1 {
		t.Fatalf("rows after reopen: %d", total)
	}
}

// Copying every queue for metrics lets the apply loop in between: it
// holds the store's lock for a bounded share of the queues at a time, not
// for the whole copy of every partition and cursor (a scrape of a store
// with many queues stalled every apply for as long).
func TestAllQueuesLetsApplyInBetween(t *testing.T) {
	h := newHarness(t)
	const n = 600
	for i := 0; i < n; i++ {
		h.alloc(fmt.Sprint("q", i), "a", "b", "c")
	}
	free, calls := 0, 0
	h.s.viewHook = func() {
		calls++
		if h.s.mu.TryLock() {
			free++
			h.s.mu.Unlock()
		}
	}
	views := h.s.AllQueues(h.now, 3)
	if len(views) != n || len(views[0].Partitions) != 3 {
		t.Fatalf("%d queues copied, want %d", len(views), n)
	}
	for i := 1; i < len(views); i++ {
		if views[i-1].ID >= views[i].ID {
			t.Fatal("queues out of id order")
		}
	}
	if free == 0 {
		t.Fatalf("the store's lock was held across the whole copy of %d queues (%d checks): the apply loop waits for all of it", n, calls)
	}
}

// A DLQ listing resumed after a row lists the older rows only, skips
// within them, and still counts every matching row in total.
func TestDLQAfterResumesOlderRows(t *testing.T) {
	h := newHarness(t)
	for range 4 {
		h.deadLetterOne("q", "p", "g")
	}
	all, _, err := h.s.DLQ(wire.DefaultTenant, DLQFilter{Offset: -1}, 0, 10)
	if err != nil || len(all) != 4 {
		t.Fatalf("rows %v %+v", err, all)
	}
	after := DLQPos{FailedMs: all[1].FailedMs, ID: all[1].ID}
	rows, total, err := h.s.DLQ(wire.DefaultTenant, DLQFilter{Offset: -1, After: &after}, 1, 10)
	if err != nil || total != 4 || len(rows) != 1 || rows[0].ID != all[3].ID {
		t.Fatalf("after row 1, skipping 1: %v total %d %+v", err, total, rows)
	}
}

// A queue's totals add up every partition as its own view counts it,
// whether or not the partitions are copied, and a page copies the
// partitions from an index on, at most a limit of them.
func TestQueueTotalsAndPartitionPages(t *testing.T) {
	h := newHarness(t)
	for i := range 6 {
		h.push("q", fmt.Sprintf("p%d", i), "1", "2", "3")
	}
	// Two groups equally behind in p0 with different leases: the first by
	// name counts, in the totals as in the partition's own depth.
	h.pop("q", "b", 2, 60000)
	h.pop("q", "a", 1, 60000)
	r := h.pop("q", "g", 3, 60000) // leased, one acknowledged
	_, txns := h.payloads(r.Claims[0])
	h.ack("g", r.Claims[0], txns[0], wire.AckCompleted)
	h.deadLetterOne("q", "p5", "g")

	whole := h.queueView("q")
	var sum Counts
	for i := range whole.Partitions {
		sum.Add(whole.Partitions[i].Counts())
	}
	if sum != whole.Totals || sum.Partitions != 6 || sum.Processing == 0 {
		t.Fatalf("totals %+v, partitions add up to %+v", whole.Totals, sum)
	}
	bare := h.s.Queues(wire.DefaultTenant, QueueFilter{Name: "q"}, h.now)[0]
	if bare.Partitions != nil || bare.Totals != whole.Totals {
		t.Fatalf("without partitions: %d copied, totals %+v want %+v", len(bare.Partitions), bare.Totals, whole.Totals)
	}
	page := h.s.Queues(wire.DefaultTenant, QueueFilter{Name: "q", Partitions: true, PartitionsFrom: 2, PartitionLimit: 3}, h.now)[0]
	if len(page.Partitions) != 3 || page.Partitions[0].Index != 2 || page.Partitions[2].Index != 4 || page.Totals != whole.Totals {
		t.Fatalf("page from 2 of 3: %+v", page.Partitions)
	}
	if end := h.s.Queues(wire.DefaultTenant, QueueFilter{Name: "q", Partitions: true, PartitionsFrom: 9}, h.now)[0]; len(end.Partitions) != 0 {
		t.Fatalf("page past the end: %+v", end.Partitions)
	}
}
