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

// settle is where the engine lets the id begin its next transaction.
func (h *harness) settle(string) {}
