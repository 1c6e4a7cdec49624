package storage

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

func streamAckOp(cl wire.Claim, txn string, release bool, lease wire.ID) wire.TxnOp {
	o := wire.StreamAckOp{Tenant: wire.DefaultTenant, Group: wire.QueueModeGroup, PartitionID: cl.PartitionID,
		TxnID: []byte(txn), LeaseID: lease, Count: 1, Release: release}
	return wire.TxnOp{Kind: wire.TxnOpStreamAck, Body: o.Encode(nil)}
}

func skipDups(op wire.TxnOp) wire.TxnOp {
	c, _ := wire.DecodePushCmd(op.Body)
	c.Flags |= wire.PushSkipDups
	return wire.TxnOp{Kind: op.Kind, Body: c.Encode(nil)}
}

// A cumulative acknowledgment moves the cursor past the message it names;
// kept, the lease holds the rest until it expires, then they come back in
// order; released, at once. A lease id not the group's refuses the whole
// transaction.
func TestStreamAckKeepsOrReleasesTheLease(t *testing.T) {
	h := newHarness(t)
	h.push("src", "p", "a", "b", "c", "d", "e")
	cl := h.pop("src", wire.QueueModeGroup, 5, 1000).Claims[0]
	_, txns := h.payloads(cl)

	r := h.txn(wire.TxnCmd{ID: wire.ID{1}, Ops: []wire.TxnOp{h.pushOp("sink", "p", "s-1"), streamAckOp(cl, txns[1], false, wire.ID{9})}})
	if r.Code != wire.CodeLeaseMismatch {
		t.Fatalf("another lease: %+v", r)
	}
	if p, ok := h.s.PartitionByName(wire.DefaultTenant, "sink", "p"); ok && p.HighWatermark() != 0 {
		t.Fatalf("a refused cycle pushed %d", p.HighWatermark())
	}
	r = h.txn(wire.TxnCmd{ID: wire.ID{2}, Ops: []wire.TxnOp{h.pushOp("sink", "p", "s-1"), streamAckOp(cl, txns[1], false, cl.LeaseID)}})
	if r.Code != wire.CodeOK {
		t.Fatalf("kept: %+v", r)
	}
	if a, _ := wire.DecodeStreamAckResult(r.Ops[1]); a.Code != wire.CodeOK || a.LeaseReleased || a.Offset != 1 {
		t.Fatalf("kept result: %+v", a)
	}
	if got := h.pop("src", wire.QueueModeGroup, 5, 1000); len(got.Claims) != 0 {
		t.Fatalf("the kept lease let a pop in: %+v", got)
	}
	h.restart(true) // the kept lease and the moved cursor are stored, not held in memory
	if got := h.pop("src", wire.QueueModeGroup, 5, 1000); len(got.Claims) != 0 {
		t.Fatalf("the kept lease let a pop in after a restart: %+v", got)
	}
	// A repeat of the cycle names a message behind the cursor now.
	if r := h.txn(wire.TxnCmd{ID: wire.ID{3}, Ops: []wire.TxnOp{streamAckOp(cl, txns[1], false, cl.LeaseID)}}); r.Code != wire.CodeNoop {
		t.Fatalf("repeat: %+v", r)
	}
	h.now += 2000
	again := h.pop("src", wire.QueueModeGroup, 5, 60000).Claims[0]
	if again.From != 2 || again.To != 5 {
		t.Fatalf("after expiry: %+v", again)
	}
	r = h.txn(wire.TxnCmd{ID: wire.ID{4}, Ops: []wire.TxnOp{streamAckOp(again, txns[2], true, again.LeaseID)}})
	if a, _ := wire.DecodeStreamAckResult(r.Ops[0]); r.Code != wire.CodeOK || !a.LeaseReleased {
		t.Fatalf("released: %+v %+v", r, a)
	}
	if next := h.pop("src", wire.QueueModeGroup, 5, 60000).Claims[0]; next.From != 3 {
		t.Fatalf("after release: %+v", next)
	}
}

// A sink push flagged PushSkipDups skips a stored transaction id instead of
// rolling the transaction back, from FormatV3 on; below it a store refuses
// the stream acknowledgment and rolls the duplicate back, as builds before
// it do.
func TestStreamCycleNeedsFormatV3(t *testing.T) {
	h := newHarness(t)
	h.push("src", "p", "a")
	h.txn(wire.TxnCmd{ID: wire.ID{1}, Ops: []wire.TxnOp{h.pushOp("sink", "p", "dup")}})
	cl := h.pop("src", wire.QueueModeGroup, 1, 60000).Claims[0]
	_, txns := h.payloads(cl)
	r := h.txn(wire.TxnCmd{ID: wire.ID{2}, Ops: []wire.TxnOp{skipDups(h.pushOp("sink", "p", "dup", "new")), streamAckOp(cl, txns[0], true, cl.LeaseID)}})
	if r.Code != wire.CodeOK {
		t.Fatalf("at the newest format: %+v", r)
	}
	if push, _ := wire.DecodePushResult(r.Ops[0]); len(push.Dups) != 1 {
		t.Fatalf("dups: %+v", push)
	}

	old := &harness{t: t, dir: t.TempDir(), now: 1_700_000_000_000}
	old.open()
	t.Cleanup(func() { old.s.Close() })
	old.push("src", "p", "a")
	old.txn(wire.TxnCmd{ID: wire.ID{1}, Ops: []wire.TxnOp{old.pushOp("sink", "p", "dup")}})
	cl = old.pop("src", wire.QueueModeGroup, 1, 60000).Claims[0]
	_, txns = old.payloads(cl)
	if r := old.txn(wire.TxnCmd{ID: wire.ID{2}, Ops: []wire.TxnOp{streamAckOp(cl, txns[0], true, cl.LeaseID)}}); r.Code != wire.CodeBadRequest {
		t.Fatalf("stream ack below FormatV3: %+v", r)
	}
	if r := old.txn(wire.TxnCmd{ID: wire.ID{3}, Ops: []wire.TxnOp{skipDups(old.pushOp("sink", "p", "dup"))}}); r.Code != wire.CodeDuplicate {
		t.Fatalf("skip-dups below FormatV3: %+v", r)
	}
}

// Streams queries and rows are KV entries: a snapshot carries them (and
// StreamsUsage counts them alike), and a lease a cycle kept.
func TestStreamsStateTravelsInSnapshots(t *testing.T) {
	h := newHarness(t)
	ns := wire.StreamsNamespace
	h.kv(wire.KVOp{Op: wire.KVPut, NS: ns, Key: []byte("q/id1"), Value: []byte(`{}`)},
		wire.KVOp{Op: wire.KVPut, NS: ns, Key: []byte("s/id1/0/7/a"), Value: []byte(`{"v":1,"u":1}`)},
		wire.KVOp{Op: wire.KVPut, NS: ns, Key: []byte("s/id1/0/7/b"), Value: []byte(`{"v":2,"u":1}`)},
		wire.KVOp{Op: wire.KVPut, NS: "app", Key: []byte("s/not-streams"), Value: []byte(`1`)})
	h.push("src", "p", "a", "b", "c")
	cl := h.pop("src", wire.QueueModeGroup, 3, 60000).Claims[0]
	_, txns := h.payloads(cl)
	if r := h.txn(wire.TxnCmd{ID: wire.ID{1}, Ops: []wire.TxnOp{streamAckOp(cl, txns[0], false, cl.LeaseID)}}); r.Code != wire.CodeOK {
		t.Fatalf("cycle: %+v", r)
	}
	q, rows, size, err := h.s.StreamsUsage()
	if err != nil || q != 1 || rows != 2 || size == 0 {
		t.Fatalf("usage: %d %d %d %v", q, rows, size, err)
	}
	other := newHarness(t)
	h.snapshotTo(other)
	if q2, rows2, size2, err := other.s.StreamsUsage(); err != nil || q2 != q || rows2 != rows || size2 != size {
		t.Fatalf("usage after the snapshot: %d %d %d %v", q2, rows2, size2, err)
	}
	other.index, other.now = h.index, h.now
	if r := other.pop("src", wire.QueueModeGroup, 3, 60000); len(r.Claims) != 0 {
		t.Fatalf("the kept lease was lost in the snapshot: %+v", r)
	}
	other.now += 61000
	if r := other.pop("src", wire.QueueModeGroup, 3, 60000); len(r.Claims) != 1 || r.Claims[0].From != 1 {
		t.Fatalf("after the lease: %+v", r)
	}
}
