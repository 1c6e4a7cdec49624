package storage

import (
	"fmt"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// sharedID is a lease id as the engine makes for a pop over several
// partitions (wire.SharedLeaseID); the store needs only its sameness.
func sharedID(n byte) wire.ID {
	return wire.SharedLeaseID(wire.ID{10: n, 11: 0x5a}, 1, 0)
}

// popShared pops queue for group over up to n partitions under one lease.
func (h *harness) popShared(queue, group string, id wire.ID, n int, batch, leaseMs uint32) wire.PopResult {
	h.t.Helper()
	ids := make([]wire.ID, n)
	for i := range ids {
		ids[i] = id
	}
	return h.popWith(wire.PopCmd{Queue: queue, Group: group, Batch: batch, LeaseMs: leaseMs, SubMode: wire.SubAll, LeaseIDs: ids})
}

func (h *harness) extend(id wire.ID, ms uint32) wire.ExtendLeaseResult {
	h.t.Helper()
	c := wire.ExtendLeaseCmd{Tenant: wire.DefaultTenant, LeaseID: id, Ms: ms}
	r, err := wire.DecodeExtendLeaseResult(h.apply(wire.KindExtendLease, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// threeParts pushes two messages to each of partitions a, b and c of q.
func (h *harness) threeParts(q string) {
	h.t.Helper()
	for _, p := range []string{"a", "b", "c"} {
		h.push(q, p, p+"1", p+"2")
	}
}

// claimed describes a pop's claims as partition:payloads@attempt.
func (h *harness) claimed(r wire.PopResult) string {
	h.t.Helper()
	out := ""
	for _, cl := range r.Claims {
		pl, _ := h.payloads(cl)
		out += fmt.Sprintf("%s:%v@%d ", cl.Partition, pl, cl.DeliveryAttempt(cl.From))
	}
	return out
}

func TestSharedLeasePopClaimsEveryPartitionUnderOneID(t *testing.T) {
	h := newHarness(t)
	h.threeParts("q")
	id := sharedID(1)
	r := h.popShared("q", "g", id, 3, 10, 1000)
	if len(r.Claims) != 3 {
		t.Fatalf("claims: %s", h.claimed(r))
	}
	for _, cl := range r.Claims {
		if cl.LeaseID != id || cl.To-cl.From != 2 {
			t.Fatalf("claim %+v: want lease %s over 2 messages", cl, id)
		}
	}
	if again := h.popShared("q", "g", sharedID(2), 3, 10, 1000); len(again.Claims) != 0 {
		t.Fatalf("every partition is leased, yet: %s", h.claimed(again))
	}
	// A retried proposal answers the same claims and takes nothing new.
	if retry := h.popShared("q", "g", id, 3, 10, 1000); fmt.Sprint(retry.Claims) != fmt.Sprint(r.Claims) {
		t.Fatalf("retried shared pop: %+v vs %+v", retry.Claims, r.Claims)
	}
	// Another consumer group is not held by the lease.
	if other := h.popShared("q", "h", sharedID(3), 3, 10, 1000); len(other.Claims) != 3 {
		t.Fatalf("other group: %s", h.claimed(other))
	}
}

func TestSharedLeaseExtendRenewsEveryPartition(t *testing.T) {
	h := newHarness(t)
	h.threeParts("q")
	id := sharedID(1)
	r := h.popShared("q", "g", id, 3, 10, 1000)
	h.now += 500
	if e := h.extend(id, 5000); e.Code != wire.CodeOK || e.Renewed != 3 || e.ExpiresMs != h.now+5000 {
		t.Fatalf("extend: %+v", e)
	}
	h.now += 2000 // past the lease's first expiry, within the extended one
	if again := h.popShared("q", "g", sharedID(2), 3, 10, 1000); len(again.Claims) != 0 {
		t.Fatalf("extended lease let go of: %s", h.claimed(again))
	}
	// Its acks still hold: the lease is live in every partition.
	for _, cl := range r.Claims {
		_, txns := h.payloads(cl)
		if o := h.ack("g", cl, txns[0], wire.AckCompleted); o.Code != wire.CodeOK || o.LeaseReleased {
			t.Fatalf("ack in %s: %+v", cl.Partition, o)
		}
	}
}

func TestSharedLeaseAckReleasesEachPartitionThenAll(t *testing.T) {
	h := newHarness(t)
	h.threeParts("q")
	id := sharedID(1)
	r := h.popShared("q", "g", id, 3, 10, 60_000)
	// Acking one partition's messages releases that partition only.
	first := r.Claims[0]
	_, txns := h.payloads(first)
	for i, txn := range txns {
		if o := h.ack("g", first, txn, wire.AckCompleted); o.Code != wire.CodeOK || o.LeaseReleased != (i == len(txns)-1) {
			t.Fatalf("ack %d: %+v", i, o)
		}
	}
	if e := h.extend(id, 60_000); e.Code != wire.CodeOK || e.Renewed != 2 {
		t.Fatalf("extend after one partition's release: %+v", e)
	}
	// One ack batch over the rest releases the rest.
	ack := wire.AckCmd{Tenant: wire.DefaultTenant, Group: "g"}
	for _, cl := range r.Claims[1:] {
		_, txns := h.payloads(cl)
		for _, txn := range txns {
			ack.Items = append(ack.Items, wire.AckItem{PartitionID: cl.PartitionID, TxnID: []byte(txn), LeaseID: id, Status: wire.AckCompleted})
		}
	}
	released := 0
	for i, o := range h.applyAcks(ack) {
		if o.Code != wire.CodeOK {
			t.Fatalf("batch ack %d: %+v", i, o)
		}
		if o.LeaseReleased {
			released++
		}
	}
	if released != 2 {
		t.Fatalf("the batch released %d partitions, want 2", released)
	}
	if _, ok := h.s.leases[id]; ok {
		t.Fatal("a released shared lease is still indexed")
	}
	if e := h.extend(id, 60_000); e.Code != wire.CodeLeaseNotFound || e.Renewed != 0 {
		t.Fatalf("extend of a released lease: %+v", e)
	}
	h.threeParts("q")
	next := h.popShared("q", "g", sharedID(2), 3, 10, 60_000)
	if len(next.Claims) != 3 {
		t.Fatalf("after the release: %s", h.claimed(next))
	}
	for _, cl := range next.Claims {
		if cl.From != 2 || cl.DeliveryAttempt(cl.From) != 1 {
			t.Fatalf("after the release, %s from %d attempt %d", cl.Partition, cl.From, cl.DeliveryAttempt(cl.From))
		}
	}
}

func TestSharedLeaseExpiryRedeliversEachPartitionInOrder(t *testing.T) {
	h := newHarness(t)
	h.threeParts("q")
	id := sharedID(1)
	r := h.popShared("q", "g", id, 3, 10, 1000)
	// One message of b is acknowledged before the lease expires: b's
	// redelivery starts after it, the others from their first.
	var b wire.Claim
	for _, cl := range r.Claims {
		if cl.Partition == "b" {
			b = cl
		}
	}
	_, txns := h.payloads(b)
	if o := h.ack("g", b, txns[0], wire.AckCompleted); o.Code != wire.CodeOK {
		t.Fatalf("ack: %+v", o)
	}
	h.now += 1001
	if e := h.extend(id, 5000); e.Code != wire.CodeLeaseNotFound {
		t.Fatalf("extend of an expired lease: %+v", e)
	}
	again := h.popShared("q", "g", sharedID(2), 3, 10, 1000)
	got := map[string]string{}
	for _, cl := range again.Claims {
		pl, _ := h.payloads(cl)
		got[cl.Partition] = fmt.Sprintf("%v@%d", pl, cl.DeliveryAttempt(cl.From))
		if cl.LeaseID != sharedID(2) {
			t.Fatalf("redelivery under lease %s", cl.LeaseID)
		}
	}
	want := map[string]string{"a": "[a1 a2]@2", "b": "[b2]@2", "c": "[c1 c2]@2"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("redelivered %v, want %v", got, want)
	}
	// The stale lease's acks are fenced.
	stale := r.Claims[0]
	_, txns = h.payloads(stale)
	if o := h.ack("g", stale, txns[len(txns)-1], wire.AckCompleted); o.Code != wire.CodeLeaseMismatch {
		t.Fatalf("ack under the expired lease: %+v", o)
	}
}

// The index of a shared lease is rebuilt from the cursors when the store
// opens, from its load image or from the database alone, and when it
// recovers from a snapshot: an extend then still renews every partition.
func TestSharedLeaseSurvivesRestartAndSnapshot(t *testing.T) {
	for _, walk := range []bool{false, true} {
		h := newHarness(t)
		h.threeParts("q")
		id := sharedID(1)
		h.popShared("q", "g", id, 3, 10, 60_000)
		h.restart(walk)
		if e := h.extend(id, 60_000); e.Code != wire.CodeOK || e.Renewed != 3 {
			t.Fatalf("walk %v: extend after restart: %+v", walk, e)
		}
		other := newHarness(t)
		h.snapshotTo(other)
		other.now, other.index = h.now, h.index
		if e := other.extend(id, 60_000); e.Code != wire.CodeOK || e.Renewed != 3 {
			t.Fatalf("walk %v: extend after snapshot: %+v", walk, e)
		}
	}
}

// Below FormatV4 a shared pop is refused by every replica alike: a build
// that predates it would index the id as one partition's.
func TestSharedLeaseNeedsFormatV4(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir(), now: 1_700_000_000_000}
	h.open()
	t.Cleanup(func() { h.s.Close() })
	c := wire.SetFormatCmd{Version: wire.FormatV3}
	if r, err := wire.DecodeCodeResult(h.apply(wire.KindSetFormat, c.Encode(nil))); err != nil || r.Code != wire.CodeOK {
		t.Fatalf("set format: %+v %v", r, err)
	}
	h.threeParts("q")
	if r := h.popShared("q", "g", sharedID(1), 3, 10, 1000); r.Code != wire.CodeBadRequest || len(r.Claims) != 0 {
		t.Fatalf("shared pop at FormatV3: %+v", r)
	}
	if r := h.popWith(wire.PopCmd{Queue: "q", Group: "g", Batch: 10, SubMode: wire.SubAll, LeaseIDs: []wire.ID{{1}, {2}, {3}}}); len(r.Claims) != 3 {
		t.Fatalf("per-partition pop at FormatV3: %+v", r)
	}
	h.raiseFormat()
	if r := h.popShared("q", "h", sharedID(1), 3, 10, 1000); len(r.Claims) != 3 {
		t.Fatalf("shared pop at FormatV4: %+v", r)
	}
}

// A transaction requiring a shared lease holds while any partition here
// still holds it live: acknowledging the pop's second partition after the
// first was released commits; once the lease expired it is refused.
func TestSharedLeaseRequiredByATransaction(t *testing.T) {
	h := newHarness(t)
	h.threeParts("q")
	id := sharedID(1)
	r := h.popShared("q", "g", id, 3, 10, 1000)
	for i, cl := range r.Claims[:2] {
		_, txns := h.payloads(cl)
		res := h.txn(wire.TxnCmd{ID: wire.ID{byte(i + 1)}, RequiredLeases: []wire.ID{id}, Ops: []wire.TxnOp{
			ackOp("g", cl, txns[0], true), ackOp("g", cl, txns[1], true)}})
		if res.Code != wire.CodeOK {
			t.Fatalf("transaction over %s: %+v", cl.Partition, res)
		}
	}
	if e := h.extend(id, 1000); e.Code != wire.CodeOK || e.Renewed != 1 {
		t.Fatalf("extend with one partition left: %+v", e)
	}
	h.now += 1001
	last := r.Claims[2]
	_, txns := h.payloads(last)
	if res := h.txn(wire.TxnCmd{ID: wire.ID{9}, RequiredLeases: []wire.ID{id}, Ops: []wire.TxnOp{
		ackOp("g", last, txns[0], true)}}); res.Code != wire.CodeLeaseNotFound {
		t.Fatalf("transaction under an expired shared lease: %+v", res)
	}
}

// The proposer resolves the acks of every partition of a shared lease,
// answered or read, each from its own partition's records: one id names
// several partitions' leases, in the answer cache as in the resolve.
func TestSharedLeaseAcksResolvePerPartition(t *testing.T) {
	h := newHarness(t)
	h.threeParts("q")
	id := sharedID(1)
	r := h.popShared("q", "g", id, 3, 10, 60_000)
	rr, err := h.s.NewRangeReader()
	if err != nil {
		t.Fatal(err)
	}
	c := wire.AckCmd{Tenant: wire.DefaultTenant, Group: "g"}
	want := map[int]uint64{}
	for i, cl := range r.Claims {
		p, _ := h.s.PartitionByID(wire.DefaultTenant, cl.PartitionID)
		read := func(off uint64, _ int64, body []byte) bool {
			rec, _ := wire.ParseRecord(body)
			want[len(c.Items)] = off
			c.Items = append(c.Items, wire.AckItem{PartitionID: cl.PartitionID, TxnID: []byte(rec.MsgID.String()), LeaseID: id})
			return true
		}
		if i < 2 { // the answer read two of them; the third is read by the resolve
			err = rr.ReadLease(p, id, cl.From, cl.To, read)
		} else {
			err = rr.Read(p, cl.From, cl.To, read)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rr.Close()
	for _, cl := range r.Claims[:2] {
		if h.s.answered.get(id, cl.PartitionID, cl.From, cl.To) == nil {
			t.Fatalf("the answer of %s under the shared lease was not remembered", cl.Partition)
		}
	}
	h.s.ResolveAckOffsets(&c)
	for i, it := range c.Items {
		if !it.Resolved || it.Offset != want[i] {
			t.Fatalf("item %d: %+v, want offset %d", i, it, want[i])
		}
	}
	for i, o := range h.applyAcks(c) {
		if o.Code != wire.CodeOK {
			t.Fatalf("ack %d: %+v", i, o)
		}
	}
	if _, ok := h.s.leases[id]; ok {
		t.Fatal("the shared lease is still indexed after every message was acknowledged")
	}
}
