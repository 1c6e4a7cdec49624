package storage

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

// maxWaitTimeSeconds deletes what nobody consumed in time, as Queen
// evicts it: in a partition no group has read, and after dead-lettering
// for subscribed groups; never the messages a lease reaches into.
func TestMaxWaitEvictsWhatNobodyConsumed(t *testing.T) {
	h := newHarness(t)
	cfg := wire.DefaultQueueConfig()
	cfg.MaxWaitTimeSec = 10
	h.configure("w", wire.OptMaxWaitTimeSeconds, cfg)
	h.push("w", "unread", "a", "b")
	h.now += 5000
	h.push("w", "unread", "fresh")
	h.now += 6000 // a and b waited 11 s, fresh 6 s
	h.tick()
	unread, _ := h.s.PartitionByName(wire.DefaultTenant, "w", "unread")
	if unread.LogStart() != 2 || unread.HighWatermark() != 3 {
		t.Fatalf("unread partition: start %d hwm %d, want 2..3", unread.LogStart(), unread.HighWatermark())
	}

	// A lease on c keeps it and what follows it.
	h.push("w", "leased", "c")
	h.push("w", "leased", "d")
	if r := h.popWith(wire.PopCmd{Queue: "w", Partition: "leased", Group: wire.QueueModeGroup, Batch: 1, SubMode: wire.SubAll,
		LeaseIDs: []wire.ID{h.nextID()}, LeaseMs: 600_000}); len(r.Claims) != 1 || r.Claims[0].From != 0 {
		t.Fatalf("pop c: %+v", r)
	}
	h.now += 11_000
	h.tick()
	leased, _ := h.s.PartitionByName(wire.DefaultTenant, "w", "leased")
	if leased.LogStart() != 0 {
		t.Fatalf("a leased message was evicted: start %d", leased.LogStart())
	}
	h.now += 600_000 // the lease expires: c and d are dead-lettered, then deleted
	h.tick()
	h.now += 1000
	h.tick()
	if leased.LogStart() != 2 || leased.HighWatermark() != 2 {
		t.Fatalf("leased partition after expiry: start %d hwm %d", leased.LogStart(), leased.HighWatermark())
	}
	rows := 0
	_ = h.s.scan([]byte{tagDLQ}, func(_, _ []byte) error { rows++; return nil })
	if rows != 2+1 {
		t.Fatalf("%d dead-letter rows, want 3 (c, d; and fresh of the unread partition once the group subscribed)", rows)
	}
}

// Below FormatV5 the sweep only dead-letters for subscribed groups, as
// the builds before it do: a partition no group read keeps its messages.
func TestMaxWaitEvictionNeedsFormatV5(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir(), now: 1_700_000_000_000}
	h.open()
	t.Cleanup(func() { h.s.Close() })
	c := wire.SetFormatCmd{Version: wire.FormatV4}
	if r, err := wire.DecodeCodeResult(h.apply(wire.KindSetFormat, c.Encode(nil))); err != nil || r.Code != wire.CodeOK {
		t.Fatalf("set format: %+v %v", r, err)
	}
	cfg := wire.DefaultQueueConfig()
	cfg.MaxWaitTimeSec = 10
	h.configure("w", wire.OptMaxWaitTimeSeconds, cfg)
	h.push("w", "unread", "a")
	h.now += 11_000
	h.tick()
	p, _ := h.s.PartitionByName(wire.DefaultTenant, "w", "unread")
	if p.LogStart() != 0 {
		t.Fatalf("evicted at FormatV4: start %d", p.LogStart())
	}
	h.raiseFormat()
	h.now += 1000
	h.tick()
	if p.LogStart() != 1 {
		t.Fatalf("not evicted at FormatV5: start %d", p.LogStart())
	}
}
