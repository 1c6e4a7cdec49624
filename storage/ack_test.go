package storage

import (
	"encoding/binary"
	"fmt"
	"testing"

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
