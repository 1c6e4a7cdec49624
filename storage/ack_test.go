package storage

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/queen-mq/queen/wire"
)

// leaseOf pushes n records with distinct message ids to q/p and pops them
// all as one lease of group g. It returns the claim and an ack command
// completing every message of it.
func (h *harness) leaseOf(q, p, g string, n int) (wire.Claim, wire.AckCmd) {
	h.t.Helper()
	var recs []byte
	ids := make([]wire.ID, n)
	for i := range ids {
		ids[i] = wire.ID{0: 0xBB, 1: byte(h.index)}
		binary.BigEndian.PutUint32(ids[i][12:], uint32(i))
		recs = wire.AppendRecord(recs, &wire.Record{Flags: wire.FlagJSON, MsgID: ids[i], Payload: []byte(`{"n":1}`)})
	}
	if r := h.pushRaw(q, p, n, recs); r.Code != wire.CodeOK {
		h.t.Fatalf("push: %+v", r)
	}
	r := h.pop(q, g, uint32(n), 60_000)
	if len(r.Claims) != 1 || r.Claims[0].To-r.Claims[0].From != uint64(n) {
		h.t.Fatalf("pop: %+v", r)
	}
	cl := r.Claims[0]
	ack := wire.AckCmd{Tenant: wire.DefaultTenant, Group: g}
	for _, id := range ids {
		ack.Items = append(ack.Items, wire.AckItem{PartitionID: cl.PartitionID, TxnID: []byte(id.String()),
			LeaseID: cl.LeaseID, Status: wire.AckCompleted})
	}
	return cl, ack
}

// ackBatchBytes applies ack the way Update does and returns the bytes its
// batch would write, without committing it.
func (h *harness) ackBatchBytes(ack *wire.AckCmd) (int, wire.AckResult) {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	ctx := h.s.newApplyCtx()
	defer ctx.b.Close()
	res := h.s.applyAck(ctx, ack)
	ctx.finish(h.index + 1)
	return ctx.b.Len(), res
}

// Acknowledging every message of one large lease writes the cursor (whose
// encoding carries the lease's per-message states) once per batch, not
// once per acknowledged message: the latter grows with the square of the
// lease size (10,000 messages wrote 100 MB for one ack command).
func TestAckingALargeLeaseWritesItsCursorOnce(t *testing.T) {
	h := newHarness(t)
	const n = 4000
	_, ack := h.leaseOf("q", "p", "g", n)
	// All but the last: the lease stays open and its cursor is saved.
	ack.Items = ack.Items[:n-1]
	size, res := h.ackBatchBytes(&ack)
	for i, it := range res.Items {
		if it.Code != wire.CodeOK {
			t.Fatalf("item %d: %+v", i, it)
		}
	}
	if perItem := size / n; perItem > 64 {
		t.Fatalf("acking %d messages of one lease wrote %d bytes (%d per message): the cursor is re-encoded per ack",
			n-1, size, perItem)
	}
}

// A cursor saved several times in a batch and then deleted in the same
// batch stays deleted: the deferred save must not bring it back.
func TestCursorSavedThenDeletedInOneBatchStaysDeleted(t *testing.T) {
	h := newHarness(t)
	cl, ack := h.leaseOf("q", "p", "g", 3)
	del := wire.DeleteGroupCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g"}
	e := wire.AppendEntry(nil, h.now, []wire.Command{
		{Kind: wire.KindAck, Body: (&wire.AckCmd{Tenant: ack.Tenant, Group: ack.Group, Items: ack.Items[:1]}).Encode(nil)},
		{Kind: wire.KindDeleteGroup, Body: del.Encode(nil)},
	})
	h.index++
	if _, err := h.s.Update([]sm.Entry{{Index: h.index, Cmd: e}}); err != nil {
		t.Fatal(err)
	}
	if h.has(cursorKey(cl.PartitionID, "g")) {
		t.Fatal("the cursor of a deleted group was written back by the batch that deleted it")
	}
}

// BenchmarkAckLargeLease acknowledges every message of one lease in one
// command: the time per message must not grow with the lease size.
func BenchmarkAckLargeLease(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			h := newHarness(b)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				_, ack := h.leaseOf(fmt.Sprint("q", i), "p", "g", n)
				b.StartTimer()
				h.apply(wire.KindAck, ack.Encode(nil))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
		})
	}
}

// applyAcks applies c as one command and answers its outcomes.
func (h *harness) applyAcks(c wire.AckCmd) []wire.AckOutcome {
	h.t.Helper()
	r, err := wire.DecodeAckResult(h.apply(wire.KindAck, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r.Items
}

// An ack its proposer resolved (ResolveAckOffsets) is applied as the same
// ack unresolved would be; one resolved against a lease that is no longer
// live is looked up again, as if it were not resolved.
func TestResolvedAcksActAsTheirLookup(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "a", "b", "c", "d")
	first := h.pop("q", "g", 3, 60_000).Claims[0]
	_, txns := h.payloads(first)
	c := wire.AckCmd{Tenant: wire.DefaultTenant, Group: "g"}
	for _, txn := range []string{txns[1], txns[0], "not-in-the-lease"} {
		c.Items = append(c.Items, wire.AckItem{PartitionID: first.PartitionID, TxnID: []byte(txn), LeaseID: first.LeaseID})
	}
	h.s.ResolveAckOffsets(&c)
	for i, want := range []struct {
		resolved bool
		off      uint64
	}{{true, 1}, {true, 0}, {false, 0}} {
		it := c.Items[i]
		if it.Resolved != want.resolved || it.Resolved && (it.Offset != want.off || it.LeaseFrom != first.From || it.LeaseTo != first.To) {
			t.Fatalf("item %d: %+v, want resolved %v at %d in [%d, %d)", i, it, want.resolved, want.off, first.From, first.To)
		}
	}
	out := h.applyAcks(c)
	if out[0].Code != wire.CodeOK || out[1].Code != wire.CodeOK || out[2].Code != wire.CodeMessageNotFound {
		t.Fatalf("outcomes %+v", out)
	}
	// The third message is still leased: the lease stays until it is acked.
	c3 := wire.AckCmd{Tenant: wire.DefaultTenant, Group: "g", Items: []wire.AckItem{{PartitionID: first.PartitionID, TxnID: []byte(txns[2]), LeaseID: first.LeaseID}}}
	h.s.ResolveAckOffsets(&c3)
	stale := c3
	stale.Items = append([]wire.AckItem(nil), c3.Items...)
	if out := h.applyAcks(c3); out[0].Code != wire.CodeOK || !out[0].LeaseReleased {
		t.Fatalf("last ack of the lease: %+v", out[0])
	}
	// The same resolved item again, its lease gone: looked up, a no-op as
	// an unresolved repeat would be.
	if out := h.applyAcks(stale); out[0].Code != wire.CodeNoop {
		t.Fatalf("a repeated resolved ack: %+v, want a no-op", out[0])
	}
	// A new lease over the rest: an item resolved against another range
	// is looked up again (here it names no message of the lease, so a
	// trusted offset would have acknowledged the wrong one).
	next := h.pop("q", "g", 3, 60_000).Claims[0]
	bad := wire.AckCmd{Tenant: wire.DefaultTenant, Group: "g", Items: []wire.AckItem{{PartitionID: next.PartitionID,
		TxnID: []byte("another"), LeaseID: next.LeaseID, Resolved: true, Offset: next.From, LeaseFrom: next.From - 1, LeaseTo: next.To}}}
	if out := h.applyAcks(bad); out[0].Code != wire.CodeMessageNotFound {
		t.Fatalf("an item resolved against another range: %+v, want it looked up (not found)", out[0])
	}
}

// A lease read for its pop's answer is remembered, and its acks are
// resolved from it; a lease range that changed since is not.
func TestAnsweredLeaseResolvesItsAcks(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "a", "b")
	cl := h.pop("q", "g", 2, 60_000).Claims[0]
	p, _ := h.s.PartitionByID(wire.DefaultTenant, cl.PartitionID)
	var txns []string
	r, err := h.s.NewRangeReader()
	if err != nil {
		t.Fatal(err)
	}
	err = r.ReadLease(p, cl.LeaseID, cl.From, cl.To, func(_ uint64, _ int64, body []byte) bool {
		rec, _ := wire.ParseRecord(body)
		txns = append(txns, rec.MsgID.String())
		return true
	})
	r.Close()
	if err != nil || len(txns) != 2 {
		t.Fatalf("read %v %v", txns, err)
	}
	if idx := h.s.answered.get(cl.LeaseID, cl.PartitionID, cl.From, cl.To); idx[txns[1]] != cl.From+1 || len(idx) != 2 {
		t.Fatalf("remembered %v", idx)
	}
	if h.s.answered.get(cl.LeaseID, cl.PartitionID, cl.From, cl.To+1) != nil {
		t.Fatal("a lease over another range was answered from the cache")
	}
	c := wire.AckCmd{Tenant: wire.DefaultTenant, Group: "g", Items: []wire.AckItem{{PartitionID: cl.PartitionID, TxnID: []byte(txns[1]), LeaseID: cl.LeaseID}}}
	h.s.ResolveAckOffsets(&c)
	if it := c.Items[0]; !it.Resolved || it.Offset != cl.From+1 {
		t.Fatalf("resolved %+v", it)
	}
}

// The cache forgets the oldest leases past its bound.
func TestLeaseTxnCacheIsBounded(t *testing.T) {
	var c leaseTxnCache
	for i := range 100_000 {
		id := wire.ID{0: 1}
		binary.BigEndian.PutUint64(id[8:], uint64(i))
		c.put(id, 1, uint64(i), uint64(i+1), txnOffsets{fmt.Sprint(i): uint64(i)})
	}
	if c.held > leaseCacheBytes || len(c.byID) == 0 || len(c.byID) == 100_000 || len(c.order) != len(c.byID) {
		t.Fatalf("held %d bytes in %d leases (order %d)", c.held, len(c.byID), len(c.order))
	}
	if c.get(wire.ID{0: 1}, 1, 0, 1) != nil {
		t.Fatal("the oldest lease is still held")
	}
}

// One RangeReader reads ranges of several partitions, each exactly its own
// records, in any order, as ReadRange does.
func TestRangeReaderReadsEachPartitionsOwnRange(t *testing.T) {
	h := newHarness(t)
	want := map[string][]string{}
	for i, name := range []string{"a", "b", "c"} {
		for j := range 3 + i {
			payload := fmt.Sprintf(`"%s%d"`, name, j)
			h.push("q", name, payload)
			want[name] = append(want[name], payload)
		}
	}
	r, err := h.s.NewRangeReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, name := range []string{"c", "a", "b", "a"} {
		p, _ := h.s.PartitionByName(wire.DefaultTenant, "q", name)
		var got []string
		err := r.ReadLease(p, wire.ID{}, 1, 100, func(off uint64, _ int64, body []byte) bool {
			rec, err := wire.ParseRecord(body)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(rec.Payload))
			return true
		})
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want[name][1:]) {
			t.Fatalf("%s: read %v, %v; want %v", name, got, err, want[name][1:])
		}
	}
}

// An ack that consumes a partition to its head takes the partition out of
// the group's ready set: a long poll's readiness check walks that set, and
// reads back every partition out of memory it finds there.
func TestAnAckToTheHeadLeavesThePartitionUnready(t *testing.T) {
	h := newHarness(t)
	h.push("q", "a", `1`)
	h.push("q", "b", `1`, `2`)
	r := h.popWith(wire.PopCmd{Queue: "q", Group: "g", Batch: 10, SubMode: wire.SubAll, MaxPartitions: 2,
		LeaseIDs: []wire.ID{h.nextID(), h.nextID()}})
	if len(r.Claims) != 2 {
		t.Fatalf("claims %+v", r.Claims)
	}
	for _, cl := range r.Claims {
		_, txns := h.payloads(cl)
		for _, id := range txns[:1] { // a: its only message; b: the first of two
			h.ack("g", cl, id, wire.AckCompleted)
		}
	}
	q := h.s.queue(wire.DefaultTenant, "q")
	sub := q.subs["g"]
	a, _ := q.partNames.get("a", func(i uint32) string { return q.parts[i].name })
	b, _ := q.partNames.get("b", func(i uint32) string { return q.parts[i].name })
	if sub.ready.has(a) || !sub.ready.has(b) {
		t.Fatalf("ready after the acks: a %v (consumed), b %v (one left)", sub.ready.has(a), sub.ready.has(b))
	}
	// b's lease is live: nothing to pop until a push marks a again.
	if ok, _ := h.s.PopReadiness(wire.DefaultTenant, "q", "g", "", h.now); ok {
		t.Fatal("ready with a consumed and a leased partition")
	}
	h.push("q", "a", `2`)
	if ok, _ := h.s.PopReadiness(wire.DefaultTenant, "q", "g", "", h.now); !ok || !sub.ready.has(a) {
		t.Fatal("a push did not mark the partition again")
	}
}

// A lease lives in its cursor's record and nowhere else: a pop and its ack
// write no record of their own for it (earlier builds wrote one per lease
// and a tombstone per ack, read by nothing), and a store that still holds
// such records loses them at open, its leases intact.
func TestALeaseWritesNoRecordOfItsOwn(t *testing.T) {
	h := newHarness(t)
	cl, ack := h.leaseOf("q", "p", "g", 3)
	if h.hasTagged(tagLease) {
		t.Fatal("a pop wrote a lease record")
	}
	old := append([]byte{tagLease}, cl.LeaseID[:]...)
	if err := h.s.db.Set(old, []byte("pid and group"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	h.restart(false)
	if h.hasTagged(tagLease) {
		t.Fatal("the open kept a lease record of an earlier build")
	}
	for i, o := range h.applyAcks(ack) {
		if o.Code != wire.CodeOK {
			t.Fatalf("ack %d after the restart: %+v", i, o)
		}
	}
	if h.hasTagged(tagLease) {
		t.Fatal("an ack wrote a lease record")
	}
}
