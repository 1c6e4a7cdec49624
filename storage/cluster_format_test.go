package storage

import (
	"errors"
	"strings"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/queen-mq/queen/wire"
)

// A group applies at its active format, raised by a replicated entry and
// never lowered: before the raise it applies as builds before the format
// gate did (here: a Kafka transaction's end closes every open batch of its
// producer, and ticks carry no trace retention), after it the new way.
func TestAGroupAppliesAtItsActiveFormat(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir(), now: 1_700_000_000_000}
	h.open()
	t.Cleanup(func() { h.s.Close() })
	if f := h.s.ActiveFormat(); f != wire.FormatV1 {
		t.Fatalf("a new store is at format %d, want %d until its group raises it", f, wire.FormatV1)
	}
	if c, _ := wire.DecodeTickCmd(h.s.TickCommand().Body); c.TraceRetentionMs != 0 {
		t.Fatalf("a tick at FormatV1 carries a retention: %+v", c)
	}
	// Open transactions are stored as builds before FormatV2 stored them.
	h.produce(h.produceCmd("t", 0, wire.NoProducer, 0, 0, 1))
	ini := h.initProducer("tx", 1)
	begin := wire.TxnBeginCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, Groups: 1}
	h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil))
	if r := h.stage(wire.ID{0: 1, 15: 1}, wire.KafkaStageCmd{TxnID: "tx", Produce: h.produceCmd("t", 0, ini.ProducerID, ini.Epoch, 0, 1)}); r.Code != wire.CodeOK {
		t.Fatalf("stage: %+v", r)
	}
	p, _ := h.s.PartitionByIndex(wire.DefaultTenant, "t", 0)
	if v, ok := h.dump()[string(partOpenTxnsKey(p.ID))]; !ok || v[0] == openTxnsWithXIDs {
		t.Fatalf("open transactions at FormatV1 stored in the newer form: %x", v)
	}
	next := h.initProducer("tx", 2)
	if info, _ := h.s.KafkaTxn(wire.DefaultTenant, "tx"); !info.Unsettled.IsZero() || info.Epoch != next.Epoch {
		t.Fatalf("an init at FormatV1 left the transaction unsettled: %+v", info)
	}

	h.raiseFormat()
	if f := h.s.ActiveFormat(); f != wire.NewestFormat {
		t.Fatalf("raised to %d", f)
	}
	lower := wire.SetFormatCmd{Version: wire.FormatV1}
	h.apply(wire.KindSetFormat, lower.Encode(nil))
	h.restart(true)
	if f := h.s.ActiveFormat(); f != wire.NewestFormat {
		t.Fatalf("after a lower set and a restart the format is %d", f)
	}
	if c, _ := wire.DecodeTickCmd(h.s.TickCommand().Body); c.TraceRetentionMs == 0 {
		t.Fatalf("a tick at the newest format carries no retention: %+v", c)
	}
}

// A build too old for its group's format stops where the format is raised
// past it, and will not open a store already there, each with a line that
// says to run a newer build.
func TestABuildTooOldForItsGroupsFormatStops(t *testing.T) {
	old := &harness{t: t, dir: t.TempDir(), now: 1_700_000_000_000, local: func(c *Config) { c.NewestFormat = wire.FormatV1 }}
	old.open()
	before := old.dump()
	raise := wire.SetFormatCmd{Version: wire.FormatV2}
	old.index++
	_, err := old.s.Update([]sm.Entry{{Index: old.index, Cmd: wire.AppendEntry(nil, old.now, []wire.Command{{Kind: wire.KindSetFormat, Body: raise.Encode(nil)}})}})
	if !errors.Is(err, ErrFormatTooNew) || !strings.Contains(err.Error(), "run a newer build") {
		t.Fatalf("an old build applied a raise past it: %v", err)
	}
	if after := old.dump(); len(after) != len(before) {
		t.Fatal("the refused raise changed the store")
	}
	old.s.Close()

	h := newHarness(t) // raised to this build's newest
	dir := h.dir
	h.s.Close()
	s := New(Config{Dir: dir, NewestFormat: wire.FormatV1})
	if _, err := s.Open(make(chan struct{})); !errors.Is(err, ErrFormatTooNew) || !strings.Contains(err.Error(), "run a newer build") {
		t.Fatalf("an old build opened a store at a newer format: %v", err)
	}
	h.open() // reopened by this build for the harness's cleanup
}

// A Kafka transaction that began before its group was raised to FormatV2
// and staged more after it has batches kept by producer and by xid: its
// end takes both with one marker, and the partition's last stable offset
// moves past them.
func TestATransactionAcrossTheRaiseEndsWhole(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir(), now: 1_700_000_000_000}
	h.open()
	t.Cleanup(func() { h.s.Close() })
	h.produce(h.produceCmd("t", 0, wire.NoProducer, 0, 0, 1))
	ini := h.initProducer("tx", 1)
	begin := wire.TxnBeginCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, Groups: 1}
	b := h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil))
	xid := wire.ID{0: 1, 15: 1}
	if r := h.stage(xid, wire.KafkaStageCmd{TxnID: "tx", Produce: h.produceCmd("t", 0, ini.ProducerID, ini.Epoch, 0, 2)}); r.Code != wire.CodeOK {
		t.Fatalf("stage before the raise: %+v", r)
	}
	h.raiseFormat()
	if r := h.stage(xid, wire.KafkaStageCmd{TxnID: "tx", Produce: h.produceCmd("t", 0, ini.ProducerID, ini.Epoch, 2, 2)}); r.Code != wire.CodeOK {
		t.Fatalf("stage after the raise: %+v", r)
	}
	p, _ := h.s.PartitionByIndex(wire.DefaultTenant, "t", 0)
	if v := h.s.Txns(p, 0, p.HighWatermark()); v.LastStable != 1 {
		t.Fatalf("open: %+v", v)
	}
	end := wire.TxnEndCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, TxnSeq: b.TxnSeq, Commit: false}
	if r, committed := h.end(xid, end); r.Code != wire.CodeOK || committed {
		t.Fatalf("abort: %+v %v", r, committed)
	}
	v := h.s.Txns(p, 0, p.HighWatermark())
	if p.HighWatermark() != 6 || v.LastStable != 6 || len(v.Aborted) != 1 || v.Aborted[0].First != 1 || !v.Skipped(1) || !v.Skipped(4) {
		t.Fatalf("after the abort: hwm %d, %+v", p.HighWatermark(), v)
	}
}
