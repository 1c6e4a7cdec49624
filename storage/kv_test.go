package storage

import (
	"fmt"
	"testing"

	"github.com/queen-mq/queen/wire"
)

func (h *harness) kv(ops ...wire.KVOp) wire.KVResult {
	h.t.Helper()
	c := wire.KVCmd{Tenant: wire.DefaultTenant, Ops: ops}
	r, err := wire.DecodeKVResult(h.apply(wire.KindKV, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func put(key, value string) wire.KVOp {
	return wire.KVOp{Op: wire.KVPut, NS: "app", Key: []byte(key), Value: []byte(value)}
}

func TestKVPutGetVersionsAndCAS(t *testing.T) {
	h := newHarness(t)
	r := h.kv(put("a", `{"x":1}`), put("b", `2`))
	if !r.OK || r.Ops[0].Item.Version != 1 || r.Ops[1].Item.Version != 2 {
		t.Fatalf("puts: %+v", r)
	}
	r = h.kv(put("a", `3`))
	if r.Ops[0].Item.Version != 3 {
		t.Fatalf("versions grow per group: %+v", r.Ops[0])
	}
	// Compare-and-set: only the current version wins.
	stale := put("a", `4`)
	stale.HasExpect, stale.Expect = true, 1
	if r := h.kv(stale); r.Ops[0].Applied || r.Ops[0].Reason != wire.KVReasonVersionMismatch {
		t.Fatalf("stale CAS applied: %+v", r.Ops[0])
	}
	fresh := put("a", `5`)
	fresh.HasExpect, fresh.Expect = true, 3
	if r := h.kv(fresh); !r.Ops[0].Applied || r.Ops[0].Item.Version != 4 {
		t.Fatalf("CAS: %+v", r.Ops[0])
	}
	absent := put("new", `1`)
	absent.HasExpect, absent.Expect = true, 0
	if r := h.kv(absent); !r.Ops[0].Applied {
		t.Fatalf("expect 0 means absent: %+v", r.Ops[0])
	}
	if r := h.kv(wire.KVOp{Op: wire.KVPutIfAbsent, NS: "app", Key: []byte("a"), Value: []byte("9")}); r.Ops[0].Applied || r.Ops[0].Reason != wire.KVReasonExists {
		t.Fatalf("putIfAbsent on an existing key: %+v", r.Ops[0])
	}
	got, found, err := h.s.KVGet(wire.DefaultTenant, "app", []byte("a"))
	if err != nil || !found || string(got.Value) != "5" || got.Version != 4 {
		t.Fatalf("get: %+v %v %v", got, found, err)
	}
	// Deleting and re-creating keeps versions growing.
	if r := h.kv(wire.KVOp{Op: wire.KVDelete, NS: "app", Key: []byte("a")}); !r.Ops[0].Applied {
		t.Fatalf("delete: %+v", r.Ops[0])
	}
	if r := h.kv(wire.KVOp{Op: wire.KVDelete, NS: "app", Key: []byte("a")}); r.Ops[0].Applied || r.Ops[0].Reason != wire.KVReasonNotFound {
		t.Fatalf("second delete: %+v", r.Ops[0])
	}
	if r := h.kv(put("a", `6`)); r.Ops[0].Item.Version <= 5 {
		t.Fatalf("version after re-create: %+v", r.Ops[0])
	}
}

func TestKVRequiredFailureAppliesNothing(t *testing.T) {
	h := newHarness(t)
	h.kv(put("k", `1`))
	check := wire.KVOp{Op: wire.KVCheck, NS: "app", Key: []byte("k"), HasExpect: true, Expect: 99, Required: true}
	r := h.kv(put("other", `x`), check, put("k", `2`))
	if r.OK || r.FailedIndex != 1 || r.Ops[0].Applied || r.Ops[1].Reason != wire.KVReasonVersionMismatch {
		t.Fatalf("aborted batch: %+v", r)
	}
	if _, found, _ := h.s.KVGet(wire.DefaultTenant, "app", []byte("other")); found {
		t.Fatal("an aborted batch wrote a key")
	}
	// The version counter did not move either: the next write gets 2.
	if r := h.kv(put("k", `3`)); r.Ops[0].Item.Version != 2 {
		t.Fatalf("version after an abort: %+v", r.Ops[0])
	}
}

func TestKVIncrAndBounds(t *testing.T) {
	h := newHarness(t)
	incr := func(delta int64, min, max *int64) wire.KVOpResult {
		op := wire.KVOp{Op: wire.KVIncr, NS: "c", Key: []byte("n"), Delta: delta}
		if min != nil {
			op.HasMin, op.Min = true, *min
		}
		if max != nil {
			op.HasMax, op.Max = true, *max
		}
		return h.kv(op).Ops[0]
	}
	ten := int64(10)
	if r := incr(7, nil, &ten); !r.Applied || string(r.Item.Value) != "7" {
		t.Fatalf("incr from absent: %+v", r)
	}
	if r := incr(5, nil, &ten); r.Applied || r.Reason != wire.KVReasonOutOfBounds {
		t.Fatalf("incr past max: %+v", r)
	}
	zero := int64(0)
	if r := incr(-7, &zero, nil); !r.Applied || string(r.Item.Value) != "0" {
		t.Fatalf("decr to min: %+v", r)
	}
	h.kv(wire.KVOp{Op: wire.KVPut, NS: "c", Key: []byte("s"), Value: []byte(`"text"`)})
	if r := h.kv(wire.KVOp{Op: wire.KVIncr, NS: "c", Key: []byte("s"), Delta: 1}).Ops[0]; r.Reason != wire.KVReasonNotANumber {
		t.Fatalf("incr of text: %+v", r)
	}
}

func TestKVTTLExpiresAtTheReplicatedClock(t *testing.T) {
	h := newHarness(t)
	op := put("session", `1`)
	op.TTLSec = 2
	h.kv(op, put("forever", `1`))
	if _, found, _ := h.s.KVGet(wire.DefaultTenant, "app", []byte("session")); !found {
		t.Fatal("fresh key missing")
	}
	if h.s.TickDue(h.now + 1000) {
		t.Fatal("sweep due before the expiry")
	}
	h.now += 2500
	if !h.s.TickDue(h.now) {
		t.Fatal("sweep not due after the expiry")
	}
	h.apply(wire.KindTick, nil)
	if _, found, _ := h.s.KVGet(wire.DefaultTenant, "app", []byte("session")); found {
		t.Fatal("expired key still readable")
	}
	if h.s.TickDue(h.now) {
		t.Fatal("sweep still due after sweeping")
	}
	if _, found, _ := h.s.KVGet(wire.DefaultTenant, "app", []byte("forever")); !found {
		t.Fatal("key without TTL expired")
	}
}

func TestKVPrefixPagingAndNamespaces(t *testing.T) {
	h := newHarness(t)
	var ops []wire.KVOp
	for i := 0; i < 5; i++ {
		ops = append(ops, put(fmt.Sprintf("user/%d", i), `1`))
	}
	ops = append(ops, put("zzz", `1`), wire.KVOp{Op: wire.KVPut, NS: "other", Key: []byte("k"), Value: []byte(`1`)})
	h.kv(ops...)
	page, _ := h.s.KVList(wire.DefaultTenant, "app", []byte("user/"), nil, 3)
	if len(page) != 3 || string(page[2].Key) != "user/2" {
		t.Fatalf("first page: %+v", page)
	}
	page, _ = h.s.KVList(wire.DefaultTenant, "app", []byte("user/"), page[2].Key, 3)
	if len(page) != 2 || string(page[0].Key) != "user/3" {
		t.Fatalf("second page: %+v", page)
	}
	ns, err := h.s.KVNamespaces(wire.DefaultTenant)
	if err != nil || fmt.Sprint(ns) != "[app other]" {
		t.Fatalf("namespaces: %v %v", ns, err)
	}
	r := h.kv(wire.KVOp{Op: wire.KVGetMany, NS: "app", Keys: [][]byte{[]byte("user/1"), []byte("nope")}})
	if items := r.Ops[0].Items; len(items) != 2 || items[0].Version == 0 || items[1].Version != 0 {
		t.Fatalf("getMany: %+v", items)
	}
	// The version counter survives a restart.
	h.s.Close()
	h.open()
	if r := h.kv(put("after", `1`)); r.Ops[0].Item.Version != 8 {
		t.Fatalf("version after reopen: %d", r.Ops[0].Item.Version)
	}
}
