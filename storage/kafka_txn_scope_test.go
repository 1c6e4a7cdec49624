package storage

import (
	"fmt"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// A fenced transaction's end, arriving late in a partition where the next
// epoch's transaction already wrote, ends only its own batches: the next
// transaction's commit does not commit the fenced one's batches, and the
// fenced one's abort does not abort the next one's (review finding 1 of
// issue 32). Both orders of the two ends are checked.
func TestKafkaTxnEndEndsOnlyItsOwnBatches(t *testing.T) {
	for _, lateAbortFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("lateAbortFirst=%v", lateAbortFirst), func(t *testing.T) {
			h := newHarness(t)
			h.produce(h.produceCmd("t", 0, wire.NoProducer, 0, 0, 1)) // creates the topic
			ini := h.initProducer("tx", 1)
			begin := wire.TxnBeginCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, Groups: 1}
			if b := h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil)); b.Code != wire.CodeOK {
				t.Fatalf("begin: %+v", b)
			}
			x1 := wire.ID{0: 1, 15: 1}
			if r := h.stage(x1, wire.KafkaStageCmd{TxnID: "tx", Produce: h.produceCmd("t", 0, ini.ProducerID, ini.Epoch, 0, 2)}); r.Code != wire.CodeOK || r.BaseOffset != 1 {
				t.Fatalf("stage x1: %+v", r)
			}
			// The producer is fenced; x1's part here is not resolved yet
			// (the resolve the init proposed did not reach this group).
			next := h.initProducer("tx", 2)
			h.settle("tx")
			begin.Epoch = next.Epoch
			b := h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil))
			if b.Code != wire.CodeOK {
				t.Fatalf("begin at the new epoch: %+v", b)
			}
			x2 := wire.ID{0: 1, 15: 2}
			if r := h.stage(x2, wire.KafkaStageCmd{TxnID: "tx", Produce: h.produceCmd("t", 0, next.ProducerID, next.Epoch, 0, 3)}); r.Code != wire.CodeOK || r.BaseOffset != 3 {
				t.Fatalf("stage x2: %+v", r)
			}
			p, _ := h.s.PartitionByIndex(wire.DefaultTenant, "t", 0)
			abortX1 := func() {
				res := wire.XResolveCmd{ID: x1, Commit: false}
				h.apply(wire.KindXResolve, res.Encode(nil))
			}
			commitX2 := func() {
				end := wire.TxnEndCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: next.ProducerID, Epoch: next.Epoch, TxnSeq: b.TxnSeq, Commit: true}
				if r, committed := h.end(x2, end); r.Code != wire.CodeOK || !committed {
					t.Fatalf("commit x2: %+v %v", r, committed)
				}
			}
			if lateAbortFirst {
				abortX1()
				// x2 is still open: the last stable offset stays at its
				// first batch, and only x1's batch is skipped.
				v := h.s.Txns(p, 0, p.HighWatermark())
				if v.LastStable != 3 || fmt.Sprint(v.Skips) != "[{1 3}]" {
					t.Fatalf("after x1's abort: hwm %d, %+v", p.HighWatermark(), v)
				}
				commitX2()
			} else {
				commitX2()
				// x1 is still open: its batch holds the last stable offset.
				if v := h.s.Txns(p, 0, p.HighWatermark()); v.LastStable != 1 {
					t.Fatalf("x2's commit ended x1 too: hwm %d, %+v", p.HighWatermark(), v)
				}
				abortX1()
			}
			v := h.s.Txns(p, 0, p.HighWatermark())
			if p.HighWatermark() != 8 || v.LastStable != 8 || len(v.Aborted) != 1 || v.Aborted[0].First != 1 {
				t.Fatalf("after both ends: hwm %d, %+v", p.HighWatermark(), v)
			}
			for _, off := range []uint64{3, 4, 5} {
				if v.Skipped(off) {
					t.Fatalf("x2's committed record at %d is skipped: %+v", off, v)
				}
			}
			for _, off := range []uint64{1, 2} {
				if !v.Skipped(off) {
					t.Fatalf("x1's aborted record at %d is not skipped: %+v", off, v)
				}
			}
			var offs []uint64
			for range 10 { // a pop stops at a skipped range: pop until none is left
				got := h.popWith(wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "t", Group: "g", Partition: p.Name, Batch: 100,
					SubMode: wire.SubAll, CommitOnDelivery: true}).Claims
				if len(got) == 0 {
					break
				}
				for _, c := range got {
					for o := c.From; o < c.To; o++ {
						offs = append(offs, o)
					}
				}
			}
			if fmt.Sprint(offs) != "[0 3 4 5]" {
				t.Fatalf("an HTTP consumer got offsets %v, want the plain record and x2's", offs)
			}
		})
	}
}

// settle lets a transactional id begin its next transaction, as the
// engine does once every group resolved the last one.
func (h *harness) settle(txnID string) {
	h.t.Helper()
	info, _ := h.s.KafkaTxn(wire.DefaultTenant, txnID)
	c := wire.TxnSettledCmd{Tenant: wire.DefaultTenant, TxnID: txnID, XID: info.Unsettled}
	if r, err := wire.DecodeCodeResult(h.apply(wire.KindKafkaTxnSettled, c.Encode(nil))); err != nil || r.Code != wire.CodeOK {
		h.t.Fatalf("settled: %+v %v", r, err)
	}
}

// A transactional id begins no transaction while its last one is ended
// but not known resolved in every group: the engine's settle comes first,
// so no partition gets the next transaction's batches before the last
// one's marker. An init that aborts an open transaction leaves it
// unsettled the same way.
func TestKafkaNextTxnWaitsForTheLastToSettle(t *testing.T) {
	h := newHarness(t)
	ini := h.initProducer("tx", 1)
	begin := wire.TxnBeginCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, Groups: 1}
	b := h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil))
	end := wire.TxnEndCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, TxnSeq: b.TxnSeq, Commit: true}
	d := wire.XDecideCmd{ID: wire.ID{1}, Commit: true, Participants: []uint16{0}, Own: wire.Command{Kind: wire.KindKafkaTxnEnd, Body: end.Encode(nil)}}
	h.apply(wire.KindXDecide, d.Encode(nil))
	info, _ := h.s.KafkaTxn(wire.DefaultTenant, "tx")
	if info.Ongoing || info.Unsettled != KafkaTxnXID(TxnInfo{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID,
		Epoch: ini.Epoch, TxnSeq: b.TxnSeq, BeganMs: info.BeganMs}) {
		t.Fatalf("ended: %+v", info)
	}
	if got := h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil)); got.Code != wire.CodeTxnUnsettled {
		t.Fatalf("a begin before the last transaction settled: %+v", got)
	}
	if n := len(h.s.KafkaUnsettledTxns(h.now + 1)); n != 1 {
		t.Fatalf("%d unsettled listed", n)
	}
	other := wire.TxnSettledCmd{Tenant: wire.DefaultTenant, TxnID: "tx", XID: wire.ID{2}}
	h.apply(wire.KindKafkaTxnSettled, other.Encode(nil))
	if got := h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil)); got.Code != wire.CodeTxnUnsettled {
		t.Fatalf("another transaction's settle let it begin: %+v", got)
	}
	h.settle("tx")
	if got := h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil)); got.Code != wire.CodeOK || got.TxnSeq != b.TxnSeq+1 {
		t.Fatalf("a begin after the settle: %+v", got)
	}
	// The state survives a restart, unsettled included.
	next := h.initProducer("tx", 2)
	h.restart(true)
	info, _ = h.s.KafkaTxn(wire.DefaultTenant, "tx")
	if info.Ongoing || info.Unsettled.IsZero() || info.Epoch != next.Epoch || info.LastCommitted {
		t.Fatalf("after an init aborted the open transaction and a restart: %+v", info)
	}
	begin.Epoch = next.Epoch
	if got := h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil)); got.Code != wire.CodeTxnUnsettled {
		t.Fatalf("a begin at the new epoch before the abort settled: %+v", got)
	}
	h.settle("tx")
	if len(h.s.KafkaUnsettledTxns(h.now+1)) != 0 {
		t.Fatal("listed after the settle")
	}
}

// Open transactions and transactional ids stored by a build before xids
// and settling still read: the open one is ended by its producer, and the
// id is settled.
func TestKafkaTxnStateFromAnEarlierBuild(t *testing.T) {
	w := wire.Writer{}
	w.Uvarint(1) // count, the old form's first field
	w.Varint(7)  // producer
	w.Varint(2)  // epoch
	w.Uvarint(1)
	w.Uvarint(10)
	w.Uvarint(12)
	open, err := decodeOpenTxns(w.B)
	if err != nil || len(open) != 1 || !open[0].xid.IsZero() || !open[0].owns(wire.ID{5}, 7) || open[0].owns(wire.ID{5}, 8) {
		t.Fatalf("%+v %v", open, err)
	}
	again, err := decodeOpenTxns(encodeOpenTxns([]openTxn{{xid: wire.ID{5}, producer: 7, epoch: 2, batches: open[0].batches}}))
	if err != nil || again[0].xid != (wire.ID{5}) || !again[0].owns(wire.ID{5}, 9) || again[0].owns(wire.ID{6}, 7) {
		t.Fatalf("%+v %v", again, err)
	}
	st := txnState{producerID: 7, epoch: 2, txnSeq: 3, groups: 1}
	old := st.encode() // settled: no tail, the form earlier builds wrote
	if got, err := decodeTxnState(old); err != nil || !got.unsettled.IsZero() || got.groups != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	st.unsettled, st.endedMs = wire.ID{9}, 42
	if got, err := decodeTxnState(st.encode()); err != nil || got.unsettled != st.unsettled || got.endedMs != 42 {
		t.Fatalf("%+v %v", got, err)
	}
}
