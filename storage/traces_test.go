package storage

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

func (h *harness) trace(pid uint64, txn, event string, names ...string) wire.TraceResult {
	h.t.Helper()
	c := wire.TraceCmd{Tenant: wire.DefaultTenant, PartitionID: pid, TxnID: txn, EventType: event, Data: []byte(`{"n":1}`), Names: names}
	r, err := wire.DecodeTraceResult(h.apply(wire.KindTrace, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func TestTracesByMessageByNameAndRetention(t *testing.T) {
	h := newHarness(t)
	h.trace(1, "t-1", "received", "order-7")
	h.trace(1, "t-1", "processed", "order-7", "batch-3")
	h.trace(1, "t-10", "received")
	evs, err := h.s.TracesOf(wire.DefaultTenant, 1, "t-1")
	if err != nil || len(evs) != 2 || evs[0].EventType != "received" || evs[1].EventType != "processed" || evs[0].TxnID != "t-1" {
		t.Fatalf("by message: %+v %v", evs, err)
	}
	byName, _ := h.s.TracesByName(wire.DefaultTenant, "order-7", 10)
	if len(byName) != 2 || byName[0].EventType != "processed" {
		t.Fatalf("by name, newest first: %+v", byName)
	}
	names, _ := h.s.TraceNames(wire.DefaultTenant, 100)
	if len(names) != 2 || names[0] != "batch-3" || names[1] != "order-7" {
		t.Fatalf("names: %v", names)
	}
	h.now += DefaultTraceRetentionMs + 1
	if !h.s.TickDue(h.now) {
		t.Fatal("retention not due after seven days")
	}
	h.apply(wire.KindTick, nil)
	if evs, _ := h.s.TracesOf(wire.DefaultTenant, 1, "t-1"); len(evs) != 0 {
		t.Fatalf("old traces kept: %+v", evs)
	}
	if names, _ := h.s.TraceNames(wire.DefaultTenant, 100); len(names) != 0 {
		t.Fatalf("old names kept: %v", names)
	}
}
