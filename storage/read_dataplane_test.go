package storage

import (
	"fmt"
	"testing"

	"github.com/queen-mq/queen/wire"
)

func TestOffsetForTimeAndChangedPartitions(t *testing.T) {
	h := newHarness(t)
	start := h.now
	for i := 0; i < 20; i++ {
		h.push("t", "p", "a", "b") // chunk i holds offsets 2i, 2i+1 at start+100i
		h.now += 100
	}
	p, _ := h.s.PartitionByName(wire.DefaultTenant, "t", "p")
	for _, tc := range []struct {
		ms    int64
		off   uint64
		found bool
	}{{start - 1, 0, true}, {start, 0, true}, {start + 1, 2, true}, {start + 950, 20, true}, {start + 1900, 38, true}, {start + 1901, 40, false}} {
		off, at, found, err := h.s.OffsetForTime(p, tc.ms)
		if err != nil || off != tc.off || found != tc.found || (found && at != start+int64(off/2)*100) {
			t.Fatalf("time %d: offset %d at %d found %v (%v), want %d %v", tc.ms-start, off, at, found, err, tc.off, tc.found)
		}
	}

	h.push("c", "p0", "x")
	h.push("c", "p1", "x")
	mark := h.now + 1
	h.now += 10
	h.push("c", "p2", "x")
	h.push("c", "p3", "x")
	h.push("c", "p1", "x")
	var got []string
	after := int64(-1)
	for {
		parts, more, ok := h.s.ChangedPartitions(wire.DefaultTenant, "c", mark, after, 2)
		if !ok {
			t.Fatal("queue missing")
		}
		for _, p := range parts {
			got = append(got, p.Name)
			after = int64(p.Index)
		}
		if !more {
			break
		}
	}
	if fmt.Sprint(got) != "[p1 p2 p3]" {
		t.Fatalf("changed partitions: %v", got)
	}
	if _, _, ok := h.s.ChangedPartitions(wire.DefaultTenant, "nope", 0, -1, 1); ok {
		t.Fatal("missing queue reported")
	}

	for _, q := range [][3]string{{"billing.invoice.v1", "billing", "invoice"}, {"billing.charge", "billing", "charge"}, {"ops.invoice", "ops", "invoice"}} {
		c := wire.ConfigureCmd{Place: testPlace, Tenant: wire.DefaultTenant, Queue: q[0], Namespace: q[1], Task: q[2], Config: wire.DefaultQueueConfig()}
		h.apply(wire.KindConfigure, c.Encode(nil))
	}
	if got := h.s.QueuesLabelled(wire.DefaultTenant, "billing", ""); fmt.Sprint(got) != "[billing.charge billing.invoice.v1]" {
		t.Fatalf("by namespace: %v", got)
	}
	if got := h.s.QueuesLabelled(wire.DefaultTenant, "", "invoice"); fmt.Sprint(got) != "[billing.invoice.v1 ops.invoice]" {
		t.Fatalf("by task: %v", got)
	}
}
