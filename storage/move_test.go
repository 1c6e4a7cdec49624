package storage

import (
	"fmt"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// threeGroups spreads queue "q" over groups 0 (home), 1 and 2.
var threeGroups = wire.Placement{Groups: []uint16{0, 1, 2}, Start: 0}

// movingGroup is group g of a three-group node, at this build's format,
// opened again as group g after a restart.
func movingGroup(t *testing.T, g int) *harness {
	t.Helper()
	h := newGroupHarness(t, g)
	h.local = func(c *Config) { c.Group = g }
	h.raiseFormat()
	return h
}

func (h *harness) move(kind wire.Kind, body []byte) []byte {
	h.t.Helper()
	return h.apply(kind, body)
}

func (h *harness) moveRecord(op uint8, inc uint64, m wire.MoveInfo) wire.MoveRecordResult {
	h.t.Helper()
	c := wire.MoveRecordCmd{Op: op, Inc: inc, Move: m}
	r, err := wire.DecodeMoveRecordResult(h.move(wire.KindMoveRecord, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) moveCopy(c wire.MoveCopyCmd) wire.MoveCopyResult {
	h.t.Helper()
	r, err := wire.DecodeMoveCopyResult(h.move(wire.KindMoveCopy, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) moveSeal(inc uint64, index uint32, unseal bool) wire.MoveSealResult {
	h.t.Helper()
	c := wire.MoveSealCmd{Tenant: wire.DefaultTenant, Queue: "q", Inc: inc, Index: index, Unseal: unseal}
	r, err := wire.DecodeMoveSealResult(h.move(wire.KindMoveSeal, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) moveCode(kind wire.Kind, body []byte) wire.Code {
	h.t.Helper()
	code, _ := wire.ResultCode(h.move(kind, body))
	return code
}

// copyAll copies src's partition pid from offset from to to into dst, as
// the mover does, in pieces of at most max bytes, state keys included
// when keys is set; it returns the incoming partition's next offset.
func copyAll(t *testing.T, src, dst *harness, inc uint64, pid, from, to uint64, keys bool) uint64 {
	t.Helper()
	next := from
	for {
		chunks, err := src.s.MoveChunks(pid, next, to, 64)
		if err != nil {
			t.Fatal(err)
		}
		if len(chunks) == 0 {
			break
		}
		c := wire.MoveCopyCmd{Tenant: wire.DefaultTenant, Queue: "q", Inc: inc, Index: 1, Name: "b", CreatedMs: 5, Chunks: chunks}
		r := dst.moveCopy(c)
		if r.Code != wire.CodeOK || r.Next <= next {
			t.Fatalf("copy from %d: %+v", next, r)
		}
		if again := dst.moveCopy(c); again != r {
			t.Fatalf("a repeated copy changed the incoming partition: %+v, then %+v", r, again)
		}
		next = r.Next
	}
	if !keys {
		return next
	}
	kind, after := wire.MoveKeyCursor, []byte(nil)
	for {
		ks, more, err := src.s.MoveStateKeys(pid, kind, after, 16)
		if err != nil {
			t.Fatal(err)
		}
		if len(ks) > 0 {
			if r := dst.moveCopy(wire.MoveCopyCmd{Tenant: wire.DefaultTenant, Queue: "q", Inc: inc, Index: 1, Name: "b", Keys: ks}); r.Code != wire.CodeOK {
				t.Fatalf("copy keys: %+v", r)
			}
			last := ks[len(ks)-1]
			kind, after = last.Kind, last.Suffix
		}
		if !more {
			return next
		}
	}
}

// A partition moves from group 1 to group 2 while it holds messages, a
// consumer group's position and an in-flight lease: every step is
// idempotent, the sealed source refuses writes (CodePartitionMoved) and
// answers an ack of its lease as an expired lease's, the target serves the
// same offsets, records and positions (the lease's message delivered
// again), the home's directory names the target, and all of it survives
// restarts of every replica.
func TestMovePartitionToAnotherGroup(t *testing.T) {
	home, src, dst := movingGroup(t, 0), movingGroup(t, 1), movingGroup(t, 2)
	r := home.allocIn(threeGroups, "q", "a", "b")
	inc := r.Catalog.Inc
	if r.Parts[1].Group != 1 {
		t.Fatalf("placement: %+v", r.Parts)
	}
	if code := src.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: r.Catalog, Parts: r.Parts[1:]}); code != wire.CodeOK {
		t.Fatal(code)
	}
	if code := dst.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: r.Catalog}); code != wire.CodeOK {
		t.Fatal(code)
	}
	for _, p := range []string{"m0", "m1", "m2"} {
		if res := src.applyPush("q", "b", 0, 1, wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: src.nextID(), Payload: []byte(p)})); res.Code != wire.CodeOK {
			t.Fatal(res.Code)
		}
	}
	first := src.pop("q", "g", 1, 60000).Claims[0]
	if out := src.ack("g", first, mustTxn(t, src, first), wire.AckCompleted); out.Code != wire.CodeOK {
		t.Fatalf("ack: %+v", out)
	}
	inflight := src.pop("q", "g", 1, 60000).Claims[0] // offset 1, leased

	start := wire.MoveInfo{Tenant: wire.DefaultTenant, Queue: "q", Index: 1, To: 2}
	rec := home.moveRecord(wire.MoveOpStart, inc, start)
	if rec.Code != wire.CodeOK || rec.Move.From != 1 || rec.Move.State != wire.MoveCopying {
		t.Fatalf("start: %+v", rec)
	}
	if again := home.moveRecord(wire.MoveOpStart, inc, start); again.Code != wire.CodeOK || again.Move.StartedMs != rec.Move.StartedMs {
		t.Fatalf("a repeated start: %+v", again)
	}
	if other := home.moveRecord(wire.MoveOpStart, inc, wire.MoveInfo{Tenant: wire.DefaultTenant, Queue: "q", Index: 1, To: 0}); other.Code != wire.CodeExists {
		t.Fatalf("a second move of the partition: %+v", other)
	}

	srcPart, _ := src.s.PartitionByIndex(wire.DefaultTenant, "q", 1)
	copied := copyAll(t, src, dst, inc, srcPart.ID, 0, srcPart.HighWatermark(), false)
	if copied != 3 {
		t.Fatalf("copied to %d, want 3", copied)
	}
	if _, ok := dst.s.PartitionByIndex(wire.DefaultTenant, "q", 1); ok {
		t.Fatal("the incoming partition is visible before the finish")
	}
	// Writes go on while it copies.
	for _, p := range []string{"m3", "m4"} {
		src.applyPush("q", "b", 0, 1, wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: src.nextID(), Payload: []byte(p)}))
	}

	sealed := src.moveSeal(inc, 1, false)
	if sealed.Code != wire.CodeOK || sealed.Next != 5 || sealed.PID != srcPart.ID {
		t.Fatalf("seal: %+v", sealed)
	}
	if again := src.moveSeal(inc, 1, false); again != sealed {
		t.Fatalf("a repeated seal: %+v, first %+v", again, sealed)
	}
	if res := src.applyPush("q", "b", 0, 1, wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: src.nextID(), Payload: []byte("late")})); res.Code != wire.CodePartitionMoved {
		t.Fatalf("a push to the sealed partition: %v", res.Code)
	}
	if out := src.ack("g", inflight, "whatever", wire.AckCompleted); out.Code != wire.CodeLeaseMismatch {
		t.Fatalf("an ack of a lease the seal ended: %+v", out)
	}
	if res := src.pop("q", "g", 10, 60000); len(res.Claims) != 0 {
		t.Fatalf("a pop found the sealed partition: %+v", res.Claims)
	}
	home.moveRecord(wire.MoveOpProgress, inc, wire.MoveInfo{Tenant: wire.DefaultTenant, Queue: "q", Index: 1, State: wire.MoveSealed, End: sealed.Next})

	copyAll(t, src, dst, inc, sealed.PID, copied, sealed.Next, true)
	fin := wire.MoveFinishCmd{Tenant: wire.DefaultTenant, Queue: "q", Inc: inc, Index: 1, Start: sealed.Start, Next: sealed.Next, LastWriteMs: sealed.LastWriteMs}
	if code := dst.moveCode(wire.KindMoveFinish, fin.Encode(nil)); code != wire.CodeOK {
		t.Fatal("finish:", code)
	}
	if code := dst.moveCode(wire.KindMoveFinish, fin.Encode(nil)); code != wire.CodeOK {
		t.Fatal("a repeated finish:", code)
	}
	withBase := start
	withBase.EpochBase = 7
	if sw := home.moveRecord(wire.MoveOpSwitch, inc, withBase); sw.Code != wire.CodeOK || sw.Move.State != wire.MoveSwitched || sw.Move.EpochBase != 7 {
		t.Fatalf("switch: %+v", sw)
	}
	drop := wire.MoveDropCmd{Tenant: wire.DefaultTenant, Queue: "q", Index: 1}
	for range 2 {
		if code := src.moveCode(wire.KindMoveDrop, drop.Encode(nil)); code != wire.CodeOK {
			t.Fatal("drop:", code)
		}
	}
	if done := home.moveRecord(wire.MoveOpDone, inc, start); done.Code != wire.CodeOK || done.Move.State != wire.MoveDone {
		t.Fatalf("done: %+v", done)
	}

	check := func(when string) {
		t.Helper()
		if d, ok := home.s.DirByIndex(wire.DefaultTenant, "q", 1); !ok || d.Group != 2 || d.Name != "b" || d.EpochBase != 7 {
			t.Fatalf("%s: directory entry %+v %v", when, d, ok)
		}
		if m, ok := home.s.MoveOf(wire.DefaultTenant, "q", 1); !ok || m.State != wire.MoveDone || m.From != 1 || m.To != 2 {
			t.Fatalf("%s: move record %+v %v", when, m, ok)
		}
		if home.s.DirInGroup(wire.DefaultTenant, "q", 2) != 1 || home.s.DirInGroup(wire.DefaultTenant, "q", 1) != 0 {
			t.Fatalf("%s: directory counts by group", when)
		}
		p, ok := dst.s.PartitionByIndex(wire.DefaultTenant, "q", 1)
		if !ok || wire.GroupOfID(p.ID) != 2 || p.HighWatermark() != 5 || p.Name != "b" {
			t.Fatalf("%s: target partition %+v %v", when, p, ok)
		}
		if got := readPayloads(t, dst.s, p); got != "m0,m1,m2,m3,m4" {
			t.Fatalf("%s: target holds %q", when, got)
		}
		if _, ok := src.s.PartitionByIndex(wire.DefaultTenant, "q", 1); ok {
			t.Fatalf("%s: the source still holds the partition", when)
		}
		if code := src.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: r.Catalog, Parts: r.Parts[1:]}); code != wire.CodeOK {
			t.Fatal(code)
		}
		if _, ok := src.s.PartitionByIndex(wire.DefaultTenant, "q", 1); ok {
			t.Fatalf("%s: a stale directory made the moved partition again in the source", when)
		}
	}
	check("after the move")
	for _, h := range []*harness{home, src, dst} {
		h.restart(true)
	}
	check("after a restart from the store")
	for _, h := range []*harness{home, src, dst} {
		h.restart(false)
	}
	check("after a restart from the load image")

	// The group's position came along: offset 0 was acknowledged, offset 1
	// (leased when the source sealed) is delivered again.
	res := dst.pop("q", "g", 10, 60000)
	if len(res.Claims) != 1 || res.Claims[0].From != 1 || res.Claims[0].To != 5 || wire.GroupOfID(res.Claims[0].PartitionID) != 2 {
		t.Fatalf("pop at the target: %+v", res.Claims)
	}
	if res := dst.applyPush("q", "b", 0, 1, wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: dst.nextID(), Payload: []byte("m5")})); res.Code != wire.CodeOK || res.BaseOffset != 5 {
		t.Fatalf("a push to the moved partition: %+v", res)
	}
	// An ended move's record is forgotten when asked; then the partition
	// can move again.
	home.moveRecord(wire.MoveOpForget, inc, start)
	if _, ok := home.s.MoveOf(wire.DefaultTenant, "q", 1); ok {
		t.Fatal("the record survived its forget")
	}
	if again := home.moveRecord(wire.MoveOpStart, inc, wire.MoveInfo{Tenant: wire.DefaultTenant, Queue: "q", Index: 1, To: 1}); again.Code != wire.CodeOK || again.Move.From != 2 {
		t.Fatalf("a move back: %+v", again)
	}
	if forget := home.moveRecord(wire.MoveOpForget, inc, start); forget.Code != wire.CodeOK {
		t.Fatal(forget)
	}
	if m, ok := home.s.MoveOf(wire.DefaultTenant, "q", 1); !ok || m.State != wire.MoveCopying {
		t.Fatalf("a forget dropped an active move: %+v %v", m, ok)
	}
}

func mustTxn(t *testing.T, h *harness, cl wire.Claim) string {
	t.Helper()
	_, txns := h.payloads(cl)
	return txns[0]
}

// A move cancelled or failed before the switch gives the partition back:
// the source unseals it with everything it held, the target drops what it
// received.
func TestMoveUnsealAndDropIncoming(t *testing.T) {
	home, src, dst := movingGroup(t, 0), movingGroup(t, 1), movingGroup(t, 2)
	r := home.allocIn(threeGroups, "q", "a", "b")
	inc := r.Catalog.Inc
	src.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: r.Catalog, Parts: r.Parts[1:]})
	dst.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: r.Catalog})
	src.applyPush("q", "b", 0, 1, wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: src.nextID(), Payload: []byte("m0")}))
	p, _ := src.s.PartitionByIndex(wire.DefaultTenant, "q", 1)
	copyAll(t, src, dst, inc, p.ID, 0, 1, false)
	if s := src.moveSeal(inc, 1, false); s.Code != wire.CodeOK {
		t.Fatal(s)
	}
	// Sealed, and incoming: both survive restarts and a snapshot.
	src.restart(false)
	src.restart(true)
	dst.restart(true)
	if _, next, ok := dst.s.Incoming(wire.DefaultTenant, "q", 1); !ok || next != 1 {
		t.Fatalf("the incoming partition after a restart: %d %v", next, ok)
	}
	if _, ok := dst.s.PartitionByIndex(wire.DefaultTenant, "q", 1); ok {
		t.Fatal("the incoming partition is visible after a restart")
	}
	other := movingGroup(t, 1)
	src.snapshotTo(other)
	if _, sealed, ok := other.s.MovedOut(wire.DefaultTenant, "q", 1); !ok || !sealed {
		t.Fatal("a snapshot lost the seal")
	}
	if res := other.applyPush("q", "b", 0, 1, wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: other.nextID(), Payload: []byte("x")})); res.Code != wire.CodePartitionMoved {
		t.Fatalf("a push to the sealed partition after a snapshot: %v", res.Code)
	}
	if s := src.moveSeal(inc, 1, true); s.Code != wire.CodeOK || s.Next != 1 {
		t.Fatalf("unseal: %+v", s)
	}
	if res := src.applyPush("q", "b", 0, 1, wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: src.nextID(), Payload: []byte("m1")})); res.Code != wire.CodeOK || res.BaseOffset != 1 {
		t.Fatalf("a push after the unseal: %+v", res)
	}
	drop := wire.MoveDropCmd{Tenant: wire.DefaultTenant, Queue: "q", Index: 1, Incoming: true}
	if code := dst.moveCode(wire.KindMoveDrop, drop.Encode(nil)); code != wire.CodeOK {
		t.Fatal(code)
	}
	if _, _, ok := dst.s.Incoming(wire.DefaultTenant, "q", 1); ok {
		t.Fatal("the incoming partition survived its drop")
	}
	if chunks, _ := dst.s.MoveChunks(p.ID, 0, 10, 1<<20); len(chunks) != 0 {
		t.Fatal("chunks left")
	}
}

// Below FormatV9 no member may know the move kinds: each is refused and
// changes nothing.
func TestMoveCommandsNeedFormatV9(t *testing.T) {
	home := newGroupHarness(t, 0)
	c := wire.SetFormatCmd{Version: wire.FormatV8}
	home.apply(wire.KindSetFormat, c.Encode(nil))
	r := home.allocIn(threeGroups, "q", "a", "b")
	rec := home.moveRecord(wire.MoveOpStart, r.Catalog.Inc, wire.MoveInfo{Tenant: wire.DefaultTenant, Queue: "q", Index: 1, To: 2})
	if rec.Code != wire.CodeBadRequest {
		t.Fatalf("a move record at FormatV8: %+v", rec)
	}
	if len(home.s.Moves(wire.ID{})) != 0 {
		t.Fatal("a move was recorded below FormatV9")
	}
	for _, body := range []struct {
		kind wire.Kind
		b    []byte
	}{
		{wire.KindMoveCopy, (&wire.MoveCopyCmd{Tenant: wire.DefaultTenant, Queue: "q", Index: 1, Name: "b"}).Encode(nil)},
		{wire.KindMoveSeal, (&wire.MoveSealCmd{Tenant: wire.DefaultTenant, Queue: "q", Index: 0}).Encode(nil)},
		{wire.KindMoveFinish, (&wire.MoveFinishCmd{Tenant: wire.DefaultTenant, Queue: "q", Index: 1}).Encode(nil)},
		{wire.KindMoveDrop, (&wire.MoveDropCmd{Tenant: wire.DefaultTenant, Queue: "q", Index: 0}).Encode(nil)},
	} {
		if code := home.moveCode(body.kind, body.b); code != wire.CodeBadRequest {
			t.Fatalf("kind %d at FormatV8: %v", body.kind, code)
		}
	}
	if _, ok := home.s.PartitionByIndex(wire.DefaultTenant, "q", 0); !ok {
		t.Fatal("a seal below FormatV9 took the partition")
	}
}

// moveAll moves topic t's partition 0 from src to dst as the mover does:
// seal, copy everything, finish.
func moveAll(t *testing.T, src, dst *harness, topic string, sealed func()) wire.MoveSealResult {
	t.Helper()
	cat, _, _ := src.s.Catalog(wire.DefaultTenant, topic)
	if code := dst.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: topic, Catalog: cat}); code != wire.CodeOK {
		t.Fatal(code)
	}
	c := wire.MoveSealCmd{Tenant: wire.DefaultTenant, Queue: topic, Inc: cat.Inc}
	res, err := wire.DecodeMoveSealResult(src.apply(wire.KindMoveSeal, c.Encode(nil)))
	if err != nil || res.Code != wire.CodeOK {
		t.Fatalf("seal: %+v %v", res, err)
	}
	if sealed != nil {
		sealed()
	}
	chunks, err := src.s.MoveChunks(res.PID, res.Start, res.Next, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	keys, more, err := src.s.MoveStateKeys(res.PID, wire.MoveKeyCursor, nil, 1<<20)
	if err != nil || more {
		t.Fatal(err, more)
	}
	cp := wire.MoveCopyCmd{Tenant: wire.DefaultTenant, Queue: topic, Inc: cat.Inc, Name: "0", Start: res.Start, Chunks: chunks, Keys: keys}
	if r := dst.moveCopy(cp); r.Code != wire.CodeOK || r.Next != res.Next {
		t.Fatalf("copy: %+v", r)
	}
	fin := wire.MoveFinishCmd{Tenant: wire.DefaultTenant, Queue: topic, Inc: cat.Inc, Start: res.Start, Next: res.Next, LastWriteMs: res.LastWriteMs}
	if code := dst.moveCode(wire.KindMoveFinish, fin.Encode(nil)); code != wire.CodeOK {
		t.Fatal("finish:", code)
	}
	return res
}

// A Kafka partition moves with what Kafka clients depend on: kept batches
// byte for byte at their offsets, an idempotent producer's sequences (a
// retried batch is recognised at the target, the next one continues) and
// a consumer group's committed offset; a partition with a transaction
// open is not sealed (CodeConflict), and is once it ended. The moved
// state survives a snapshot of the target installed elsewhere.
func TestMoveCarriesKafkaState(t *testing.T) {
	src, dst := newHarness(t), movingGroup(t, 1)
	first := src.produceCmd("t", 0, 7, 0, 0, 3)
	if r := src.produce(first); r.Code != wire.CodeOK || r.BaseOffset != 0 {
		t.Fatalf("produce: %+v", r)
	}
	kept, _ := src.keptProduce("t", 4)
	if r := src.produce(kept); r.Code != wire.CodeOK || r.BaseOffset != 3 {
		t.Fatalf("kept produce: %+v", r)
	}
	if code := src.commit("t", "cg", 0, 5, "meta"); code != wire.CodeOK {
		t.Fatal(code)
	}

	ini := src.initProducer("tx", 1)
	begin := wire.TxnBeginCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, Groups: 1}
	b := src.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil))
	x := wire.ID{0: 1, 15: 1}
	if r := src.stage(x, wire.KafkaStageCmd{TxnID: "tx", Produce: src.produceCmd("t", 0, ini.ProducerID, ini.Epoch, 0, 2)}); r.Code != wire.CodeOK {
		t.Fatalf("stage: %+v", r)
	}
	cat, _, _ := src.s.Catalog(wire.DefaultTenant, "t")
	seal := wire.MoveSealCmd{Tenant: wire.DefaultTenant, Queue: "t", Inc: cat.Inc}
	if r, _ := wire.DecodeMoveSealResult(src.apply(wire.KindMoveSeal, seal.Encode(nil))); r.Code != wire.CodeConflict {
		t.Fatalf("a seal with a transaction open: %+v", r)
	}
	end := wire.TxnEndCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, TxnSeq: b.TxnSeq, Commit: false}
	if r, _ := src.end(x, end); r.Code != wire.CodeOK {
		t.Fatalf("abort: %+v", r)
	}
	srcPart, _ := src.s.PartitionByIndex(wire.DefaultTenant, "t", 0)
	srcTxns := src.s.Txns(srcPart, 0, srcPart.HighWatermark())
	srcKept := keptBatches(t, src.s, "t")

	sealed := moveAll(t, src, dst, "t", func() {
		// Sealed, with Kafka state kept for the copy: a restart from the
		// load image and one from the store keep it sealed and whole.
		src.restart(false)
		src.restart(true)
		if _, ok := src.s.PartitionByIndex(wire.DefaultTenant, "t", 0); ok {
			t.Fatal("a restart gave the sealed partition back")
		}
	})
	if sealed.Next != 10 { // 3 + 4 + 2 staged + the abort marker
		t.Fatalf("sealed at %d", sealed.Next)
	}
	check := func(h *harness, when string) {
		t.Helper()
		p, ok := h.s.PartitionByIndex(wire.DefaultTenant, "t", 0)
		if !ok || p.HighWatermark() != 10 {
			t.Fatalf("%s: partition %+v %v", when, p, ok)
		}
		if got := keptBatches(t, h.s, "t"); fmt.Sprintf("%x", got) != fmt.Sprintf("%x", srcKept) {
			t.Fatalf("%s: the chunks did not move byte for byte:\n%x\nsource:\n%x", when, got, srcKept)
		}
		if v := h.s.Txns(p, 0, p.HighWatermark()); fmt.Sprint(v.Skips) != fmt.Sprint(srcTxns.Skips) || v.LastStable != 10 {
			t.Fatalf("%s: transaction ranges %+v, the source had %+v", when, v, srcTxns)
		}
		if pos, ok := h.s.GroupPosition(p, "cg"); !ok || pos != 5 {
			t.Fatalf("%s: committed offset %d %v", when, pos, ok)
		}
	}
	check(dst, "after the move")
	// The producer's retry of its first batch is a duplicate at its
	// offset; its next batch follows on.
	if r := dst.produce(first); r.Code != wire.CodeDuplicate || r.BaseOffset != 0 {
		t.Fatalf("a retried batch at the target: %+v", r)
	}
	next := src.produceCmd("t", 0, 7, 0, 3, 1) // src is the home: it allocates
	next.Push.Inc = 0
	if r := dst.produce(next); r.Code != wire.CodeOK || r.BaseOffset != 10 {
		t.Fatalf("the producer's next batch at the target: %+v", r)
	}
	other := movingGroup(t, 1)
	dst.snapshotTo(other)
	if p, ok := other.s.PartitionByIndex(wire.DefaultTenant, "t", 0); !ok || p.HighWatermark() != 11 {
		t.Fatalf("after a snapshot: %+v %v", p, ok)
	}
	if r := other.produce(next); r.Code != wire.CodeDuplicate || r.BaseOffset != 10 {
		t.Fatalf("a retried batch after a snapshot: %+v", r)
	}
}
