package storage

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

// TestInitProducerAfterAnEndIsRecordedFromFormatV8: an InitProducerId
// after a transaction ended marks the id reinit (DescribeTransactions'
// Empty) only once the group is at FormatV8, stored as an optional tail
// that survives a restart either way (walked or loaded); below it the
// state is stored as a build before FormatV8 stores it. The next begin
// clears the mark.
func TestInitProducerAfterAnEndIsRecordedFromFormatV8(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir(), now: 1_700_000_000_000}
	h.open()
	t.Cleanup(func() { h.s.Close() })
	setFormat := func(v uint32) {
		t.Helper()
		c := wire.SetFormatCmd{Version: v}
		if r, err := wire.DecodeCodeResult(h.apply(wire.KindSetFormat, c.Encode(nil))); err != nil || r.Code != wire.CodeOK {
			t.Fatalf("set format %d: %+v %v", v, r, err)
		}
	}
	req := byte(0)
	cycle := func() {
		t.Helper()
		req++
		ini := h.initProducer("tx", req)
		begin := wire.TxnBeginCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, Groups: 1}
		b := h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil))
		if info, _ := h.s.KafkaTxn(wire.DefaultTenant, "tx"); info.Reinit || !info.Ongoing {
			t.Fatalf("begun: %+v", info)
		}
		end := wire.TxnEndCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, TxnSeq: b.TxnSeq, Commit: true}
		if r := h.kafkaTxn(wire.KindKafkaTxnEnd, end.Encode(nil)); r.Code != wire.CodeOK {
			t.Fatalf("end: %+v", r)
		}
		if info, _ := h.s.KafkaTxn(wire.DefaultTenant, "tx"); !info.Unsettled.IsZero() {
			settled := wire.TxnSettledCmd{Tenant: wire.DefaultTenant, TxnID: "tx", XID: info.Unsettled}
			h.apply(wire.KindKafkaTxnSettled, settled.Encode(nil))
		}
	}
	reinitAfterInit := func() bool {
		t.Helper()
		req++
		h.initProducer("tx", req)
		info, _ := h.s.KafkaTxn(wire.DefaultTenant, "tx")
		for _, walk := range []bool{true, false} {
			h.restart(walk)
			if again, _ := h.s.KafkaTxn(wire.DefaultTenant, "tx"); again != info {
				t.Fatalf("restarted (walk %v): %+v, was %+v", walk, again, info)
			}
		}
		return info.Reinit
	}

	setFormat(wire.FormatV7)
	cycle()
	if reinitAfterInit() {
		t.Fatal("an init below FormatV8 recorded reinit")
	}
	v := h.dump()[string(txnStateKey(wire.DefaultTenant, "tx"))]
	if st, err := decodeTxnState([]byte(v)); err != nil || st.reinit || len(v) != len(st.encode()) {
		t.Fatalf("below FormatV8 the state is stored with a tail: %x %v", v, err)
	}

	setFormat(wire.FormatV8)
	cycle()
	if !reinitAfterInit() {
		t.Fatal("an init at FormatV8 after an end did not record reinit")
	}
	cycle() // begins (clearing it) and ends again
	if info, _ := h.s.KafkaTxn(wire.DefaultTenant, "tx"); info.Reinit {
		t.Fatalf("a transaction begun after the init kept reinit: %+v", info)
	}
}

// TestTxnStateTails: each optional tail round-trips alone and together,
// and a state without them decodes settled and not reinit.
func TestTxnStateTails(t *testing.T) {
	for _, st := range []txnState{
		{producerID: 7, epoch: 2, txnSeq: 3},
		{producerID: 7, epoch: 2, txnSeq: 3, unsettled: wire.ID{1}, endedMs: 9},
		{producerID: 7, epoch: 2, txnSeq: 3, reinit: true},
		{producerID: 7, epoch: 2, txnSeq: 3, unsettled: wire.ID{1}, endedMs: 9, reinit: true},
	} {
		got, err := decodeTxnState(st.encode())
		if err != nil || *got != st {
			t.Errorf("%+v decoded as %+v %v", st, got, err)
		}
	}
}
