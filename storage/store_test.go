package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/queen-mq/queen/wire"
)

// harness drives a Store the way dragonboat does: entries with increasing
// indexes, each carrying one command, stamped with a test clock.
type harness struct {
	t     testing.TB
	s     *Store
	dir   string
	index uint64
	now   int64
	msgN  byte
	cache int // Config.PartitionCache
	// local adjusts the store's Config before each open: settings a
	// replica reads from its own environment.
	local func(*Config)
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	return newCachedHarness(t, 0)
}

// newCachedHarness is a harness whose store keeps cache partitions in
// memory (Config.PartitionCache; 0: every one).
func newCachedHarness(t testing.TB, cache int) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), now: 1_700_000_000_000, cache: cache}
	h.open()
	t.Cleanup(func() { h.s.Close() })
	h.raiseFormat()
	return h
}

// withoutTotalsCheck turns off the check of the totals after every batch
// for the rest of t: with partitions out of memory it reads every one of
// them back, minutes at the sizes memory tests and benchmarks use (the
// random workload tests keep it on).
func withoutTotalsCheck(t testing.TB) {
	verifyTotals = false
	t.Cleanup(func() { verifyTotals = true })
}

// raiseFormat raises the store to this build's newest format, as a
// cluster whose members all run it does first.
func (h *harness) raiseFormat() {
	h.t.Helper()
	c := wire.SetFormatCmd{Version: wire.NewestFormat}
	if r, err := wire.DecodeCodeResult(h.apply(wire.KindSetFormat, c.Encode(nil))); err != nil || r.Code != wire.CodeOK {
		h.t.Fatalf("set format: %+v %v", r, err)
	}
}

func (h *harness) open() {
	h.t.Helper()
	cfg := Config{Dir: h.dir, PartitionCache: h.cache}
	if h.local != nil {
		h.local(&cfg)
	}
	h.s = New(cfg)
	idx, err := h.s.Open(make(chan struct{}))
	if err != nil {
		h.t.Fatal(err)
	}
	h.index = idx
}

// restart closes the store and opens it again: from the load image Close
// writes, or, with walk, from the database alone, as after a crash.
func (h *harness) restart(walk bool) {
	h.t.Helper()
	dir := h.s.dbDir
	h.s.Close()
	if walk {
		if err := os.Remove(imagePath(dir)); err != nil {
			h.t.Fatal(err)
		}
	}
	h.open()
	if want := map[bool]string{true: "walk", false: "load image"}[walk]; h.s.loadedFrom != want {
		h.t.Fatalf("the store loaded from the %s, want the %s", h.s.loadedFrom, want)
	}
}

func (h *harness) apply(kind wire.Kind, body []byte) []byte {
	h.t.Helper()
	return h.applyEntry(wire.AppendEntry(nil, h.now, []wire.Command{{Kind: kind, Body: body}}))
}

func (h *harness) applyEntry(data []byte) []byte {
	h.t.Helper()
	h.index++
	out, err := h.s.Update([]sm.Entry{{Index: h.index, Cmd: data}})
	if err != nil {
		h.t.Fatal(err)
	}
	res, err := wire.SplitResults(out[0].Result.Data)
	if err != nil || len(res) != 1 {
		h.t.Fatalf("results: %v %d", err, len(res))
	}
	return res[0]
}

func (h *harness) nextID() wire.ID {
	h.msgN++
	return wire.ID{0: 0xAA, 15: h.msgN, 14: byte(h.index)}
}

func (h *harness) push(queue, partition string, payloads ...string) wire.PushResult {
	h.t.Helper()
	var recs []byte
	for _, p := range payloads {
		recs = wire.AppendRecord(recs, &wire.Record{Flags: wire.FlagJSON, MsgID: h.nextID(), Payload: []byte(p)})
	}
	return h.pushRaw(queue, partition, len(payloads), recs)
}

// testPlace puts every queue of a test store in it: the store is group 0
// of a one-group node, so it is every queue's home.
var testPlace = wire.Placement{Groups: []uint16{0}}

// alloc creates a queue and its named partitions, as the engine does before
// a push (pushes never create).
func (h *harness) alloc(queue string, names ...string) wire.AllocResult {
	h.t.Helper()
	c := wire.AllocCmd{Tenant: wire.DefaultTenant, Queue: queue, Flags: wire.AllocCreate, Place: testPlace, Names: names}
	r, err := wire.DecodeAllocResult(h.apply(wire.KindAlloc, c.Encode(nil)))
	if err != nil || r.Code != wire.CodeOK {
		h.t.Fatalf("alloc %s %v: %v %+v", queue, names, err, r)
	}
	return r
}

// allocTopic creates a Kafka topic with at least n partitions.
func (h *harness) allocTopic(topic string, n uint32) {
	h.t.Helper()
	c := wire.AllocCmd{Tenant: wire.DefaultTenant, Queue: topic, Flags: wire.AllocCreate | wire.AllocKafka, Place: testPlace, Count: n}
	if r, err := wire.DecodeAllocResult(h.apply(wire.KindAlloc, c.Encode(nil))); err != nil || r.Code != wire.CodeOK {
		h.t.Fatalf("alloc topic %s: %v %+v", topic, err, r)
	}
}

func (h *harness) pushRaw(queue, partition string, n int, recs []byte) wire.PushResult {
	h.t.Helper()
	h.alloc(queue, partition)
	return h.applyPush(queue, partition, 0, n, recs)
}

// applyPush applies a push of n records to an existing partition, with
// flags besides PushIndexTxn.
func (h *harness) applyPush(queue, partition string, flags uint8, n int, recs []byte) wire.PushResult {
	h.t.Helper()
	c := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: queue, Partition: partition, PartitionIndex: -1,
		Flags: wire.PushIndexTxn | flags, Count: n, Records: recs}
	r, err := wire.DecodePushResult(h.apply(wire.KindPush, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) pop(queue, group string, batch uint32, leaseMs uint32) wire.PopResult {
	h.t.Helper()
	c := wire.PopCmd{Tenant: wire.DefaultTenant, Queue: queue, Group: group, Batch: batch, LeaseMs: leaseMs,
		SubMode: wire.SubAll, LeaseIDs: []wire.ID{h.nextID()}}
	r, err := wire.DecodePopResult(h.apply(wire.KindPop, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) ack(group string, cl wire.Claim, txn string, status uint8) wire.AckOutcome {
	h.t.Helper()
	c := wire.AckCmd{Tenant: wire.DefaultTenant, Group: group, Items: []wire.AckItem{{
		PartitionID: cl.PartitionID, TxnID: []byte(txn), LeaseID: cl.LeaseID, Status: status}}}
	r, err := wire.DecodeAckResult(h.apply(wire.KindAck, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r.Items[0]
}

// payloads reads the records of a claim.
func (h *harness) payloads(cl wire.Claim) (out []string, txns []string) {
	h.t.Helper()
	p, ok := h.s.PartitionByID(wire.DefaultTenant, cl.PartitionID)
	if !ok {
		h.t.Fatal("partition missing")
	}
	err := h.s.ReadRange(p, cl.From, cl.To, func(off uint64, _ int64, body []byte) bool {
		r, err := wire.ParseRecord(body)
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, string(r.Payload))
		txns = append(txns, r.MsgID.String())
		return true
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out, txns
}

func TestPushAssignsOffsetsAndSurvivesReopen(t *testing.T) {
	h := newHarness(t)
	r := h.push("orders", "Default", `{"a":1}`, `{"a":2}`)
	if r.Code != wire.CodeOK || r.BaseOffset != 0 {
		t.Fatalf("first push: %+v", r)
	}
	r = h.push("orders", "Default", `{"a":3}`)
	if r.BaseOffset != 2 || r.PartitionIndex != 0 {
		t.Fatalf("second push: %+v", r)
	}
	r2 := h.push("orders", "other", `1`)
	if r2.PartitionIndex != 1 || r2.BaseOffset != 0 {
		t.Fatalf("second partition: %+v", r2)
	}
	h.s.Close()
	h.open()
	p, ok := h.s.PartitionByIndex(wire.DefaultTenant, "orders", 0)
	if !ok || p.HighWatermark() != 3 {
		t.Fatalf("after reopen: %+v %v", p, ok)
	}
	var got []string
	if _, err := h.s.Read(p, 1, func(off uint64, _ int64, body []byte) bool {
		rec, _ := wire.ParseRecord(body)
		got = append(got, fmt.Sprintf("%d=%s", off, rec.Payload))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{`1={"a":2}`, `2={"a":3}`}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %v want %v", got, want)
	}
}

func TestPushDedupByTransactionID(t *testing.T) {
	h := newHarness(t)
	rec := func(txn string) []byte {
		return wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON | wire.FlagTxnID, MsgID: h.nextID(), TxnID: []byte(txn), Payload: []byte("1")})
	}
	first := h.pushRaw("q", "p", 1, rec("t-1"))
	batch := append(append(rec("t-2"), rec("t-1")...), rec("t-2")...)
	r := h.pushRaw("q", "p", 3, batch)
	if len(r.Dups) != 2 {
		t.Fatalf("dups: %+v", r)
	}
	if off, d := r.Offset(1); d == nil || off != 0 || d.MsgID != mustFirstMsgID(t, h, first) {
		t.Fatalf("t-1 should be the original offset 0: %d %+v", off, d)
	}
	if off, d := r.Offset(0); d != nil || off != 1 {
		t.Fatalf("t-2 stored at 1: %d %+v", off, d)
	}
	if off, d := r.Offset(2); d == nil || off != 1 {
		t.Fatalf("repeated t-2 is a dup of offset 1: %d %+v", off, d)
	}
	p, _ := h.s.PartitionByName(wire.DefaultTenant, "q", "p")
	if p.HighWatermark() != 2 {
		t.Fatalf("hwm %d want 2", p.HighWatermark())
	}
}

// firstMsgID is the message id stored at r's base offset.
func (h *harness) firstMsgID(t *testing.T, r wire.PushResult) wire.ID { return mustFirstMsgID(t, h, r) }

func mustFirstMsgID(t *testing.T, h *harness, r wire.PushResult) wire.ID {
	p, _ := h.s.PartitionByID(wire.DefaultTenant, r.PartitionID)
	var id wire.ID
	h.s.ReadRange(p, r.BaseOffset, r.BaseOffset+1, func(_ uint64, _ int64, body []byte) bool {
		rec, _ := wire.ParseRecord(body)
		id = rec.MsgID
		return false
	})
	return id
}

func TestRetriedPushIsIdempotent(t *testing.T) {
	h := newHarness(t)
	recs := wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: h.nextID(), Payload: []byte("x")})
	h.alloc("q", "p")
	c := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "q", Partition: "p", PartitionIndex: -1,
		Flags: wire.PushIndexTxn, Count: 1, Records: recs}
	entry := wire.AppendEntry(nil, h.now, []wire.Command{{Kind: wire.KindPush, Body: c.Encode(nil)}})
	a, _ := wire.DecodePushResult(h.applyEntry(entry))
	b, _ := wire.DecodePushResult(h.applyEntry(wire.MarkRetry(entry)))
	if len(b.Dups) != 1 || b.Dups[0].Offset != a.BaseOffset || b.Dups[0].MsgID != h.firstMsgID(t, a) {
		t.Fatalf("retry not deduplicated: %+v", b)
	}
}

func TestPopLeasesOnePartitionPerGroupAndKeepsOrder(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "1", "2", "3")
	first := h.pop("q", wire.QueueModeGroup, 2, 60000)
	if len(first.Claims) != 1 || first.Claims[0].From != 0 || first.Claims[0].To != 2 {
		t.Fatalf("first pop: %+v", first)
	}
	if second := h.pop("q", wire.QueueModeGroup, 2, 60000); len(second.Claims) != 0 {
		t.Fatalf("partition is leased, second pop should find nothing: %+v", second)
	}
	// Another group sees every message.
	if other := h.pop("q", "analytics", 10, 60000); len(other.Claims) != 1 || other.Claims[0].To != 3 {
		t.Fatalf("bus group: %+v", other)
	}
	cl := first.Claims[0]
	_, txns := h.payloads(cl)
	if o := h.ack(wire.QueueModeGroup, cl, txns[0], wire.AckCompleted); o.Code != wire.CodeOK || o.LeaseReleased {
		t.Fatalf("ack 1: %+v", o)
	}
	if o := h.ack(wire.QueueModeGroup, cl, txns[0], wire.AckCompleted); o.Code != wire.CodeNoop {
		t.Fatalf("repeated ack should be a noop: %+v", o)
	}
	if o := h.ack(wire.QueueModeGroup, cl, txns[1], wire.AckCompleted); !o.LeaseReleased {
		t.Fatalf("last ack releases the lease: %+v", o)
	}
	next := h.pop("q", wire.QueueModeGroup, 10, 60000)
	if len(next.Claims) != 1 || next.Claims[0].From != 2 || next.Claims[0].To != 3 {
		t.Fatalf("next pop continues in order: %+v", next)
	}
}

func TestLeaseExpiryRedeliversWithoutSpendingRetries(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "1")
	cl := h.pop("q", "g", 1, 1000).Claims[0]
	h.now += 1500
	again := h.pop("q", "g", 1, 1000)
	if len(again.Claims) != 1 || again.Claims[0].From != 0 {
		t.Fatalf("expired lease should redeliver: %+v", again)
	}
	if att := again.Claims[0].DeliveryAttempt(0); att != 2 {
		t.Fatalf("delivery attempt %d want 2", att)
	}
	_, txns := h.payloads(cl)
	if o := h.ack("g", cl, txns[0], wire.AckCompleted); o.Code != wire.CodeLeaseMismatch {
		t.Fatalf("stale lease ack must be rejected: %+v", o)
	}
	// Expiry spent no retry: three failures are still allowed before DLQ.
	for i := 0; i < 3; i++ {
		c := again.Claims[0]
		if o := h.ack("g", c, txns[0], wire.AckFailed); o.Code != wire.CodeOK || o.DLQ {
			t.Fatalf("failure %d: %+v", i, o)
		}
		again = h.pop("q", "g", 1, 1000)
	}
	o := h.ack("g", again.Claims[0], txns[0], wire.AckFailed)
	if !o.DLQ || !o.LeaseReleased {
		t.Fatalf("fourth failure goes to DLQ: %+v", o)
	}
	if r := h.pop("q", "g", 1, 1000); len(r.Claims) != 0 {
		t.Fatalf("partition moved on past the DLQ'd message: %+v", r)
	}
}

func TestRetriedPopReturnsTheSameClaim(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "1", "2")
	c := wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g", Batch: 5, SubMode: wire.SubAll, LeaseIDs: []wire.ID{{1}}}
	a, _ := wire.DecodePopResult(h.apply(wire.KindPop, c.Encode(nil)))
	b, _ := wire.DecodePopResult(h.apply(wire.KindPop, c.Encode(nil)))
	if len(a.Claims) != 1 || fmt.Sprint(a.Claims) != fmt.Sprint(b.Claims) {
		t.Fatalf("retried pop: %+v vs %+v", a, b)
	}
}

// snapshotTo saves a snapshot of h's store and recovers other's from it.
func (h *harness) snapshotTo(other *harness) {
	h.t.Helper()
	ctx, err := h.s.PrepareSnapshot()
	if err != nil {
		h.t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := h.s.SaveSnapshot(ctx, &buf, make(chan struct{})); err != nil {
		h.t.Fatal(err)
	}
	if err := other.s.RecoverFromSnapshot(&buf, make(chan struct{})); err != nil {
		h.t.Fatal(err)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "1", "2", "3")
	cl := h.pop("q", "g", 1, 60000).Claims[0]
	other := newHarness(t)
	other.push("junk", "x", "old")
	h.snapshotTo(other)
	if _, ok := other.s.Queue(wire.DefaultTenant, "junk"); ok {
		t.Fatal("recovered store kept state the snapshot does not have")
	}
	p, ok := other.s.PartitionByName(wire.DefaultTenant, "q", "p")
	if !ok || p.HighWatermark() != 3 {
		t.Fatalf("recovered partition: %v %+v", ok, p)
	}
	// The records came along too, into the recovering store's own segments.
	if got := readPayloads(t, other.s, p); got != "1,2,3" {
		t.Fatalf("recovered records %q", got)
	}
	if other.s.Applied() != h.s.Applied() {
		t.Fatalf("applied %d want %d", other.s.Applied(), h.s.Applied())
	}
	// The lease came along: the same group cannot take the partition.
	other.index, other.now = h.index, h.now
	if r := other.pop("q", "g", 1, 60000); len(r.Claims) != 0 || cl.LeaseID.IsZero() {
		t.Fatalf("lease lost in snapshot: %+v", r)
	}
	// And the store reopens from the recovered directory.
	other.s.Close()
	other.open()
	if p, ok := other.s.PartitionByName(wire.DefaultTenant, "q", "p"); !ok || p.HighWatermark() != 3 || readPayloads(t, other.s, p) != "1,2,3" {
		t.Fatal("reopen after recovery lost data")
	}
}

// readPayloads is every record payload of p, comma-joined.
func readPayloads(t *testing.T, s *Store, p Partition) string {
	t.Helper()
	var out []string
	if _, err := s.Read(p, 0, func(_ uint64, _ int64, body []byte) bool {
		rec, err := wire.ParseRecord(body)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(rec.Payload))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, ",")
}

func TestMalformedCommandChangesNothing(t *testing.T) {
	h := newHarness(t)
	res := h.apply(wire.KindPush, []byte{1, 2, 3})
	if c, bare := wire.ResultCode(res); c != wire.CodeBadRequest || !bare {
		t.Fatalf("want bare bad request, got %v %v", c, bare)
	}
	// Records that do not parse: the command is refused whole.
	c := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "q", Partition: "p", PartitionIndex: -1,
		Count: 1, Records: []byte{5, 1, 2}}
	r, _ := wire.DecodePushResult(h.apply(wire.KindPush, c.Encode(nil)))
	if r.Code != wire.CodeBadRequest {
		t.Fatalf("bad records: %+v", r)
	}
	if _, ok := h.s.Queue(wire.DefaultTenant, "q"); ok {
		t.Fatal("a refused push created its queue")
	}
}

// A crash during snapshot recovery leaves a store generation behind: the
// new one when it came before CURRENT was switched, the old one when it
// came after. Open removes every generation but CURRENT's (and a
// half-written CURRENT.tmp), and nothing else.
func TestOpenRemovesGenerationsLeftByACrash(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", `{"a":1}`)
	h.s.Close()
	for _, d := range []string{"sm-0", "sm-2", "sm-7/segments"} {
		if err := os.MkdirAll(filepath.Join(h.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"CURRENT.tmp", "sm-2/000001.sst", "operator-notes"} {
		if err := os.WriteFile(filepath.Join(h.dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.open()
	entries, err := os.ReadDir(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "CURRENT,operator-notes,sm-1" {
		t.Fatalf("store directory holds %v", names)
	}
	p, ok := h.s.PartitionByName(wire.DefaultTenant, "q", "p")
	if !ok || readPayloads(t, h.s, p) != `{"a":1}` {
		t.Fatal("the current generation's records")
	}
}
