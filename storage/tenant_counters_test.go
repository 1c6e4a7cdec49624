package storage

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/queen-mq/queen/wire"
)

var (
	otherTenant = wire.ID{0: 0x7c, 15: 0x01}
	deadN       atomic.Int64 // transaction ids of deadLetterFor's messages
)

// tenantActivity makes tenant do one of each thing a shared counter
// numbered: n KV puts, n traces and one dead-lettered message.
func (h *harness) tenantActivity(tenant wire.ID, n int) {
	h.t.Helper()
	for range n {
		c := wire.KVCmd{Tenant: tenant, Ops: []wire.KVOp{{Op: wire.KVPut, NS: "app", Key: []byte("k"), Value: []byte("1")}}}
		h.apply(wire.KindKV, c.Encode(nil))
		tc := wire.TraceCmd{Tenant: tenant, PartitionID: 1, TxnID: "t", EventType: "seen", Names: []string{"n"}}
		h.apply(wire.KindTrace, tc.Encode(nil))
	}
	h.deadLetterFor(tenant)
}

// deadLetterFor pushes a message to tenant's queue "dq" and fails it until
// it is dead-lettered.
func (h *harness) deadLetterFor(tenant wire.ID) {
	h.t.Helper()
	if _, ok := h.s.PartitionByIndex(tenant, "dq", 0); !ok {
		ac := wire.AllocCmd{Tenant: tenant, Queue: "dq", Flags: wire.AllocCreate, Place: testPlace, Names: []string{"p"}}
		h.apply(wire.KindAlloc, ac.Encode(nil))
	}
	txn := fmt.Sprintf("dead-%d", deadN.Add(1))
	recs := wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON | wire.FlagTxnID, MsgID: h.nextID(), TxnID: []byte(txn), Payload: []byte("1")})
	pc := wire.PushCmd{Tenant: tenant, Queue: "dq", Partition: "p", PartitionIndex: -1, Flags: wire.PushIndexTxn, Count: 1, Records: recs}
	h.apply(wire.KindPush, pc.Encode(nil))
	for range 10 {
		pop := wire.PopCmd{Tenant: tenant, Queue: "dq", Group: "g", Batch: 1, LeaseMs: 60000, SubMode: wire.SubAll, LeaseIDs: []wire.ID{h.nextID()}}
		r, err := wire.DecodePopResult(h.apply(wire.KindPop, pop.Encode(nil)))
		if err != nil || len(r.Claims) == 0 {
			return // dead-lettered: nothing left
		}
		cl := r.Claims[0]
		ack := wire.AckCmd{Tenant: tenant, Group: "g", Items: []wire.AckItem{{PartitionID: cl.PartitionID, TxnID: []byte(txn), LeaseID: cl.LeaseID, Status: wire.AckFailed}}}
		h.apply(wire.KindAck, ack.Encode(nil))
	}
	h.t.Fatal("the message was never dead-lettered")
}

// lastIDs are the newest KV version, trace id and DLQ id tenant was given.
func (h *harness) lastIDs(tenant wire.ID) (kv, trace, dlq uint64) {
	h.t.Helper()
	c := wire.KVCmd{Tenant: tenant, Ops: []wire.KVOp{{Op: wire.KVPut, NS: "app", Key: []byte("probe"), Value: []byte("1")}}}
	r, err := wire.DecodeKVResult(h.apply(wire.KindKV, c.Encode(nil)))
	if err != nil || !r.OK {
		h.t.Fatalf("kv: %v %+v", err, r)
	}
	tc := wire.TraceCmd{Tenant: tenant, PartitionID: 1, TxnID: "probe", EventType: "seen"}
	tr, err := wire.DecodeTraceResult(h.apply(wire.KindTrace, tc.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	h.deadLetterFor(tenant)
	rows, _, err := h.s.DLQ(tenant, DLQFilter{Offset: -1}, 0, 1000)
	if err != nil || len(rows) == 0 {
		h.t.Fatalf("dlq: %v %d", err, len(rows))
	}
	for _, row := range rows {
		dlq = max(dlq, row.ID)
	}
	return r.Ops[0].Item.Version, tr.Seq, dlq
}

// TestCountersDoNotShowOtherTenantsActivity (issue 33 item 12): KV
// versions, trace ids and DLQ ids came from counters every tenant of a
// raft group shares, so the gap between two of one tenant's ids counted
// the others' writes. From FormatV5 each tenant has its own.
func TestCountersDoNotShowOtherTenantsActivity(t *testing.T) {
	h := newHarness(t)
	kv1, tr1, dlq1 := h.lastIDs(wire.DefaultTenant)
	h.tenantActivity(otherTenant, 5)
	kv2, tr2, dlq2 := h.lastIDs(wire.DefaultTenant)
	if kv2 != kv1+1 || tr2 != tr1+1 || wire.GroupID(1, 0)+dlq1 != dlq2 {
		t.Fatalf("another tenant's activity moved this one's ids: kv %d→%d, trace %d→%d, dlq %d→%d", kv1, kv2, tr1, tr2, dlq1, dlq2)
	}
}

// TestTenantCountersWaitForTheFormat: below FormatV5 the shared counters
// go on as older builds apply them, so replicas of either build agree;
// after the raise every tenant's ids continue above all those handed out
// before (a KV version is never handed out twice, or a compare-and-set
// could succeed against a value it never saw).
func TestTenantCountersWaitForTheFormat(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir(), now: 1_700_000_000_000}
	h.open()
	t.Cleanup(func() { h.s.Close() })
	kv1, tr1, _ := h.lastIDs(wire.DefaultTenant)
	h.tenantActivity(otherTenant, 5)
	kv2, tr2, _ := h.lastIDs(wire.DefaultTenant)
	if kv2 != kv1+6 || tr2 != tr1+6 {
		t.Fatalf("below FormatV5 the counters are shared: kv %d→%d, trace %d→%d", kv1, kv2, tr1, tr2)
	}
	_, otherTr, _ := h.lastIDs(otherTenant)
	h.raiseFormat()
	kv3, tr3, dlq3 := h.lastIDs(otherTenant)
	if kv3 <= kv2 || tr3 <= max(tr2, otherTr) {
		t.Fatalf("after the raise ids went back: kv %d after %d, trace %d after %d", kv3, kv2, tr3, tr2)
	}
	h.tenantActivity(wire.DefaultTenant, 3)
	kv4, tr4, dlq4 := h.lastIDs(otherTenant)
	if kv4 != kv3+1 || tr4 != tr3+1 || dlq4 != dlq3+wire.GroupID(1, 0) {
		t.Fatalf("after the raise a tenant's ids moved with another's: kv %d→%d, trace %d→%d, dlq %d→%d", kv3, kv4, tr3, tr4, dlq3, dlq4)
	}
	h.restart(true)
	kv5, tr5, dlq5 := h.lastIDs(otherTenant)
	if kv5 != kv4+1 || tr5 != tr4+1 || dlq5 != dlq4+wire.GroupID(1, 0) {
		t.Fatalf("after a restart: kv %d→%d, trace %d→%d, dlq %d→%d", kv4, kv5, tr4, tr5, dlq4, dlq5)
	}
}
