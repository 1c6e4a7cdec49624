package storage

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

func (h *harness) prepare(xid wire.ID, coord uint16, sub wire.TxnCmd) wire.XResolveResult {
	h.t.Helper()
	sub.Tenant, sub.ID = wire.DefaultTenant, xid
	c := wire.XPrepareCmd{ID: xid, Coord: coord, DeadlineMs: h.now + 5000, Sub: wire.Command{Kind: wire.KindTransaction, Body: sub.Encode(nil)}}
	r, err := wire.DecodeXResolveResult(h.apply(wire.KindXPrepare, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) resolve(xid wire.ID, commit bool) wire.XResolveResult {
	h.t.Helper()
	c := wire.XResolveCmd{ID: xid, Commit: commit}
	r, err := wire.DecodeXResolveResult(h.apply(wire.KindXResolve, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) decide(xid wire.ID, commit bool, own *wire.TxnCmd) wire.XDecideResult {
	h.t.Helper()
	c := wire.XDecideCmd{ID: xid, Commit: commit, Participants: []uint16{1}}
	if own != nil {
		own.Tenant, own.ID = wire.DefaultTenant, xid
		c.Own = wire.Command{Kind: wire.KindTransaction, Body: own.Encode(nil)}
	}
	r, err := wire.DecodeXDecideResult(h.apply(wire.KindXDecide, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// A prepared part pins the cursor its ack names: the lease neither expires
// nor can be acknowledged, re-leased or popped around until the part is
// resolved; a commit then applies the ack even though the lease's time is
// up, and the pin goes.
func TestPreparedPartPinsItsLeaseUntilResolved(t *testing.T) {
	h := newHarness(t)
	h.push("in", "p", "a", "b")
	cl := h.pop("in", wire.QueueModeGroup, 1, 1000).Claims[0]
	_, txns := h.payloads(cl)
	xid := wire.ID{0: 1, 15: 1}
	part := wire.TxnCmd{RequiredLeases: []wire.ID{cl.LeaseID}, Ops: []wire.TxnOp{ackOp(wire.QueueModeGroup, cl, txns[0], false)}}
	if r := h.prepare(xid, 1, part); r.Code != wire.CodeOK {
		t.Fatalf("prepare: %+v", r)
	}
	if r := h.prepare(xid, 1, part); r.Code != wire.CodeOK {
		t.Fatalf("a repeated prepare: %+v", r)
	}
	if got := h.ack(wire.QueueModeGroup, cl, txns[0], wire.AckCompleted); got.Code != wire.CodeConflict {
		t.Fatalf("an ack around the prepared part: %+v", got)
	}
	h.now += 5000 // past the lease
	if r := h.pop("in", wire.QueueModeGroup, 5, 1000); len(r.Claims) != 0 {
		t.Fatalf("a pop took the pinned partition: %+v", r)
	}
	other := wire.ID{0: 1, 15: 2}
	if r := h.prepare(other, 1, part); r.Code != wire.CodeLeaseNotFound {
		t.Fatalf("a second transaction prepared on the same lease: %+v", r)
	}
	// The pin survives a restart.
	h.s.Close()
	h.open()
	if got := h.ack(wire.QueueModeGroup, cl, txns[0], wire.AckCompleted); got.Code != wire.CodeConflict {
		t.Fatalf("pin lost across a restart: %+v", got)
	}
	r := h.resolve(xid, true)
	res, err := wire.DecodeTxnResult(r.Sub)
	if r.Code != wire.CodeOK || err != nil || res.Code != wire.CodeOK {
		t.Fatalf("commit: %+v %+v %v", r, res, err)
	}
	if a, _ := wire.DecodeAckResult(res.Ops[0]); a.Items[0].Code != wire.CodeOK || !a.Items[0].LeaseReleased {
		t.Fatalf("the committed ack: %+v", a)
	}
	if next := h.pop("in", wire.QueueModeGroup, 5, 1000); len(next.Claims) != 1 || next.Claims[0].From != 1 {
		t.Fatalf("after the commit: %+v", next)
	}
	if again := h.resolve(xid, true); again.Code != wire.CodeOK {
		t.Fatalf("a repeated resolve: %+v", again)
	}
	if late := h.prepare(xid, 1, part); late.Code != wire.CodeConflict {
		t.Fatalf("a prepare after the resolve: %+v", late)
	}
}

// A part that requires a lease without acknowledging through it pins that
// lease's cursor as well, and a restart keeps the pin: a replica that
// restarted must refuse the pop its peers refuse. Load reads prepared
// parts before the partitions whose cursors hold the leases, so the pin
// is made again once those are read.
func TestARequiredLeasePinSurvivesARestart(t *testing.T) {
	h := newHarness(t)
	h.push("in", "p", "a")
	cl := h.pop("in", wire.QueueModeGroup, 1, 1000).Claims[0]
	xid := wire.ID{0: 1, 15: 3}
	part := wire.TxnCmd{RequiredLeases: []wire.ID{cl.LeaseID}, Ops: []wire.TxnOp{h.pushOp("out", "p", "x1")}}
	if r := h.prepare(xid, 1, part); r.Code != wire.CodeOK {
		t.Fatalf("prepare: %+v", r)
	}
	h.now += 5000 // past the lease
	if r := h.pop("in", wire.QueueModeGroup, 5, 1000); len(r.Claims) != 0 {
		t.Fatalf("a pop took the pinned partition: %+v", r)
	}
	h.s.Close()
	h.open()
	if r := h.pop("in", wire.QueueModeGroup, 5, 1000); len(r.Claims) != 0 {
		t.Fatalf("after a restart a pop took the pinned partition: %+v", r)
	}
}

// An aborted part changes nothing and lets go of what it pinned.
func TestAbortedPartReleasesItsPins(t *testing.T) {
	h := newHarness(t)
	h.push("in", "p", "a")
	cl := h.pop("in", wire.QueueModeGroup, 1, 60000).Claims[0]
	_, txns := h.payloads(cl)
	xid := wire.ID{0: 1, 15: 3}
	kv := wire.KVCmd{Tenant: wire.DefaultTenant, Ops: []wire.KVOp{{Op: wire.KVPut, NS: "app", Key: []byte("k"), Value: []byte(`1`)}}}
	part := wire.TxnCmd{Ops: []wire.TxnOp{ackOp(wire.QueueModeGroup, cl, txns[0], false), {Kind: wire.TxnOpKV, Body: kv.Encode(nil)}}}
	if r := h.prepare(xid, 1, part); r.Code != wire.CodeOK {
		t.Fatalf("prepare: %+v", r)
	}
	put := wire.KVCmd{Tenant: wire.DefaultTenant, Ops: []wire.KVOp{{Op: wire.KVPut, NS: "app", Key: []byte("k"), Value: []byte(`2`)}}}
	if r, _ := wire.DecodeKVResult(h.apply(wire.KindKV, put.Encode(nil))); r.Ops[0].Applied || r.Ops[0].Reason != wire.KVReasonBusy {
		t.Fatalf("a write to a pinned key: %+v", r)
	}
	if r := h.resolve(xid, false); r.Code != wire.CodeConflict {
		t.Fatalf("abort: %+v", r)
	}
	if got := h.ack(wire.QueueModeGroup, cl, txns[0], wire.AckCompleted); got.Code != wire.CodeOK {
		t.Fatalf("the lease after the abort: %+v", got)
	}
	if r, _ := wire.DecodeKVResult(h.apply(wire.KindKV, put.Encode(nil))); !r.Ops[0].Applied {
		t.Fatalf("the key after the abort: %+v", r)
	}
}

// The first decision recorded stands: a commit whose own part cannot apply
// records abort, and an abort recorded first (a participant that gave up
// waiting) turns a later commit into an abort without applying anything.
func TestFirstDecisionStands(t *testing.T) {
	h := newHarness(t)
	h.push("in", "p", "a")
	cl := h.pop("in", wire.QueueModeGroup, 1, 60000).Claims[0]
	_, txns := h.payloads(cl)

	late := wire.ID{0: 1, 15: 4}
	if d := h.decide(late, false, nil); d.Commit {
		t.Fatalf("abort recorded as %+v", d)
	}
	own := wire.TxnCmd{Ops: []wire.TxnOp{ackOp(wire.QueueModeGroup, cl, txns[0], false)}}
	if d := h.decide(late, true, &own); d.Commit {
		t.Fatalf("a commit after a recorded abort: %+v", d)
	}
	if got := h.ack(wire.QueueModeGroup, cl, txns[0], wire.AckCompleted); got.Code != wire.CodeOK {
		t.Fatalf("the aborted commit applied its part: %+v", got)
	}

	bad := wire.ID{0: 1, 15: 5}
	stale := wire.TxnCmd{Ops: []wire.TxnOp{ackOp(wire.QueueModeGroup, cl, txns[0], false)}}
	d := h.decide(bad, true, &stale)
	if d.Commit {
		t.Fatalf("a commit whose own part fails: %+v", d)
	}
	if r, _ := wire.DecodeTxnResult(d.Own); r.Code == wire.CodeOK {
		t.Fatalf("own part result: %+v", r)
	}
	if dec, ok := h.s.XDecision(bad); !ok || dec.Commit || len(dec.Participants) != 1 {
		t.Fatalf("recorded: %+v %v", dec, ok)
	}
	forget := wire.XForgetCmd{IDs: []wire.ID{bad}}
	h.apply(wire.KindXForget, forget.Encode(nil))
	if _, ok := h.s.XDecision(bad); ok {
		t.Fatal("decision not forgotten")
	}
}
