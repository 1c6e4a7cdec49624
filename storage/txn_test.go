package storage

import (
	"bytes"
	"testing"

	"github.com/queen-mq/queen/wire"
)

func (h *harness) txn(c wire.TxnCmd) wire.TxnResult {
	h.t.Helper()
	c.Tenant = wire.DefaultTenant
	r, err := wire.DecodeTxnResult(h.apply(wire.KindTransaction, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func ackOp(group string, cl wire.Claim, txn string, fenced bool) wire.TxnOp {
	it := wire.AckItem{PartitionID: cl.PartitionID, TxnID: []byte(txn), Status: wire.AckCompleted}
	if fenced {
		it.LeaseID = cl.LeaseID
	}
	c := wire.AckCmd{Tenant: wire.DefaultTenant, Group: group, Items: []wire.AckItem{it}}
	return wire.TxnOp{Kind: wire.TxnOpAck, Body: c.Encode(nil)}
}

func posOp(p wire.PositionOp) wire.TxnOp {
	return wire.TxnOp{Kind: wire.TxnOpPosition, Body: p.Encode(nil)}
}

func TestTransactionCommitsEverythingTogether(t *testing.T) {
	h := newHarness(t)
	h.push("in", "p", "a", "b")
	h.push("audit", "p", "x", "y", "z")
	cl := h.pop("in", wire.QueueModeGroup, 1, 60000).Claims[0]
	_, txns := h.payloads(cl)
	r := h.txn(wire.TxnCmd{ID: wire.ID{1}, RequiredLeases: []wire.ID{cl.LeaseID}, Ops: []wire.TxnOp{
		ackOp(wire.QueueModeGroup, cl, txns[0], false),
		h.pushOp("out", "p", "o-1", "o-2"),
		posOp(wire.PositionOp{Queue: "audit", Group: "auditors", Partition: "p", Offset: 2, SubMode: wire.SubAll}),
	}})
	if r.Code != wire.CodeOK || len(r.Ops) != 3 {
		t.Fatalf("commit: %+v", r)
	}
	ack, _ := wire.DecodeAckResult(r.Ops[0])
	push, _ := wire.DecodePushResult(r.Ops[1])
	if ack.Items[0].Code != wire.CodeOK || !ack.Items[0].LeaseReleased || push.Code != wire.CodeOK {
		t.Fatalf("op results: %+v %+v", ack, push)
	}
	if next := h.pop("in", wire.QueueModeGroup, 5, 60000); len(next.Claims) != 1 || next.Claims[0].From != 1 {
		t.Fatalf("the ack moved the queue on: %+v", next)
	}
	if p, _ := h.s.PartitionByName(wire.DefaultTenant, "out", "p"); p.HighWatermark() != 2 {
		t.Fatalf("pushed %d", p.HighWatermark())
	}
	if got := h.pop("audit", "auditors", 5, 60000); len(got.Claims) != 1 || got.Claims[0].From != 2 {
		t.Fatalf("position: %+v", got)
	}
	// offset null forgets the position: the group starts over from its
	// subscription (all).
	r = h.txn(wire.TxnCmd{ID: wire.ID{2}, Ops: []wire.TxnOp{posOp(wire.PositionOp{Queue: "audit", Group: "auditors", Partition: "p", Reset: true})}})
	if r.Code != wire.CodeOK {
		t.Fatalf("reset: %+v", r)
	}
	if got := h.pop("audit", "auditors", 5, 60000); len(got.Claims) != 1 || got.Claims[0].From != 0 {
		t.Fatalf("after reset: %+v", got)
	}
}

func TestFailedTransactionChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.push("in", "p", "a", "b")
	stale := h.pop("in", wire.QueueModeGroup, 1, 1000).Claims[0]
	_, txns := h.payloads(stale)
	h.txn(wire.TxnCmd{ID: wire.ID{1}, Ops: []wire.TxnOp{h.pushOp("out", "p", "seen")}})
	h.now += 2000
	live := h.pop("in", wire.QueueModeGroup, 1, 60000).Claims[0] // redelivery under a new lease
	pos := func(queue string) wire.TxnOp {
		return posOp(wire.PositionOp{Queue: queue, Group: "g", Partition: "p", Offset: 1})
	}
	cases := []struct {
		name      string
		c         wire.TxnCmd
		code      wire.Code
		op, lease int
	}{
		{"stale required lease", wire.TxnCmd{RequiredLeases: []wire.ID{live.LeaseID, stale.LeaseID},
			Ops: []wire.TxnOp{h.pushOp("out", "p", "n1")}}, wire.CodeLeaseNotFound, -1, 1},
		{"fenced ack of a stale lease", wire.TxnCmd{Ops: []wire.TxnOp{h.pushOp("out", "p", "n1"),
			ackOp(wire.QueueModeGroup, stale, txns[0], true)}}, wire.CodeLeaseMismatch, 1, -1},
		{"duplicate transaction id", wire.TxnCmd{Ops: []wire.TxnOp{ackOp(wire.QueueModeGroup, live, txns[0], true),
			h.pushOp("out", "p", "n1", "seen")}}, wire.CodeDuplicate, 1, -1},
		{"same id twice in one transaction", wire.TxnCmd{Ops: []wire.TxnOp{h.pushOp("out", "p", "n1"),
			h.pushOp("out", "p", "n1")}}, wire.CodeDuplicate, 1, -1},
		{"same message acked twice", wire.TxnCmd{Ops: []wire.TxnOp{ackOp(wire.QueueModeGroup, live, txns[0], true),
			ackOp(wire.QueueModeGroup, live, txns[0], false)}}, wire.CodeNoop, 1, -1},
		{"position in a missing queue", wire.TxnCmd{Ops: []wire.TxnOp{h.pushOp("out", "p", "n1"), pos("nope")}}, wire.CodeQueueNotFound, 1, -1},
		{"unknown operation", wire.TxnCmd{Ops: []wire.TxnOp{h.pushOp("out", "p", "n1"), {Kind: 99}}}, wire.CodeBadRequest, 1, -1},
	}
	for i, tc := range cases {
		before := h.dump()
		tc.c.ID = wire.ID{2, byte(i)}
		r := h.txn(tc.c)
		if r.Code != tc.code || r.FailedOp != tc.op || r.FailedLease != tc.lease || r.Ops != nil {
			t.Fatalf("%s: %+v", tc.name, r)
		}
		sameDump(t, before, h.dump())
	}
	// The position created with a push of the same transaction is fine.
	if r := h.txn(wire.TxnCmd{ID: wire.ID{3}, Ops: []wire.TxnOp{h.pushOp("new", "p", "n2"), pos("new")}}); r.Code != wire.CodeOK {
		t.Fatalf("push then position: %+v", r)
	}
}

func TestRetriedTransactionAnswersWhatItCommitted(t *testing.T) {
	h := newHarness(t)
	h.push("in", "p", "a")
	cl := h.pop("in", wire.QueueModeGroup, 1, 60000).Claims[0]
	_, txns := h.payloads(cl)
	// Transaction ids are UUIDv7: their first 48 bits are the time.
	id := wire.ID{6: 0x70, 15: 7}
	for i := 0; i < 6; i++ {
		id[i] = byte(uint64(h.now) >> (40 - 8*i))
	}
	c := wire.TxnCmd{Tenant: wire.DefaultTenant, ID: id, RequiredLeases: []wire.ID{cl.LeaseID},
		Ops: []wire.TxnOp{ackOp(wire.QueueModeGroup, cl, txns[0], true), h.pushOp("out", "p", "o")}}
	entry := wire.AppendEntry(nil, h.now, []wire.Command{{Kind: wire.KindTransaction, Body: c.Encode(nil)}})
	first := h.applyEntry(entry)
	// The ack released the lease the transaction requires: checked again,
	// the retry would fail. It must answer the committed result instead,
	// and store nothing twice.
	again := h.applyEntry(wire.MarkRetry(entry))
	if !bytes.Equal(first, again) {
		t.Fatalf("retry answered differently:\n%x\n%x", first, again)
	}
	if p, _ := h.s.PartitionByName(wire.DefaultTenant, "out", "p"); p.HighWatermark() != 1 {
		t.Fatalf("retry stored again: %d", p.HighWatermark())
	}
	// Results are forgotten after the window.
	h.now += txnDoneWindowMs + txnDoneIntervalMs + 1
	if !h.s.TickDue(h.now) {
		t.Fatal("transaction results should be due for deletion")
	}
	h.tick()
	if h.has(txnDoneKey(c.ID)) || h.s.hasTxnDone {
		t.Fatal("old transaction result kept")
	}
}
