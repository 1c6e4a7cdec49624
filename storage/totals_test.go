package storage

import (
	"fmt"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// Every test of this package checks, after each apply batch, that the
// queue totals kept as partitions change equal a full recount.
func init() { verifyTotals = true }

// A view's totals at any time equal the partitions' counts added up at
// that time: leases of different lengths expire one by one between apply
// batches, and the view takes out exactly those expired by its time.
func TestQueueTotalsFollowLeasesExpiring(t *testing.T) {
	h := newHarness(t)
	const parts = 12
	for i := 0; i < parts; i++ {
		h.push("q", fmt.Sprintf("p%d", i), "a", "b", "c")
	}
	// One pop per partition, leases of 1 s to 12 s; a partial ack in some.
	for i := 0; i < parts; i++ {
		r := h.popWith(wire.PopCmd{Queue: "q", Partition: fmt.Sprintf("p%d", i), Group: "g", Batch: uint32(1 + i%3), LeaseMs: uint32(1000 * (i + 1))})
		if len(r.Claims) != 1 {
			t.Fatalf("pop %d: %+v", i, r)
		}
	}
	base := h.now
	for _, at := range []int64{0, 999, 1000, 1001, 4500, 6000, 11999, 12000, 60000} {
		now := base + at
		h.s.mu.RLock()
		q := h.s.queue(wire.DefaultTenant, "q")
		var want Counts
		for _, p := range q.parts {
			want.Add(partCounts(p, p.hwm.Load(), p.logStart.Load(), now))
		}
		got := queueTotals(q, now)
		h.s.mu.RUnlock()
		if got != want {
			t.Fatalf("at +%d ms: totals %+v, partitions add up to %+v", at, got, want)
		}
		if at == 0 && got.Processing == 0 {
			t.Fatalf("no lease counted as processing: %+v", got)
		}
		if at == 60000 && got.Processing != 0 {
			t.Fatalf("expired leases still processing: %+v", got)
		}
	}
}
