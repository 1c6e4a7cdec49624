package storage

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

// What retention costs at many partitions: every tick is one apply of its
// group, so a tick that takes seconds stalls every write to the group. The
// benchmark times the ticks that drop 50,000 consumed one-message
// partitions (about 4,000 a tick at the spec's budget), read from tables
// rather than the memtable, and reports the time per partition.
func BenchmarkRetentionOfManyPartitions(b *testing.B) {
	const n = 50_000
	for b.Loop() {
		b.StopTimer()
		h := newHarness(b)
		h.retainCompleted("q", 1)
		fillPartitions(h, "q", n)
		if got := drainAutoAck(h, "q", "consumers"); got != n {
			b.Fatalf("drained %d messages, want %d", got, n)
		}
		// From tables, as at millions of partitions, not the memtable.
		if err := h.s.db.Flush(); err != nil {
			b.Fatal(err)
		}
		h.now += 10_000
		b.StartTimer()
		for range n/(retentionBudget/2) + 2 {
			h.tick()
			h.now += 10
		}
		b.StopTimer()
		qv := h.s.Queues(wire.DefaultTenant, QueueFilter{Name: "q"}, h.now)[0]
		if qv.Totals.Total != 0 {
			b.Fatalf("left after the retention ticks: %+v", qv.Totals)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/partition")
}
