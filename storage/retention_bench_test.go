package storage

import (
	"fmt"
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

// What a pop answer's reads cost at many partitions: each of 50,000
// one-message partitions, read from tables, has its record read through
// one RangeReader, 64 partitions a reader as a pop answer does. Reported
// per partition.
func BenchmarkReadOneMessageEach(b *testing.B) {
	const n = 50_000
	h := newHarness(b)
	fillPartitions(h, "q", n)
	if err := h.s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	parts := make([]Partition, 0, n)
	for i := range n {
		p, ok := h.s.PartitionByName(wire.DefaultTenant, "q", fmt.Sprintf("p%d", i))
		if !ok {
			b.Fatalf("partition p%d missing", i)
		}
		parts = append(parts, p)
	}
	read := 0
	for b.Loop() {
		for from := 0; from < n; from += 64 {
			r, err := h.s.NewRangeReader()
			if err != nil {
				b.Fatal(err)
			}
			for _, p := range parts[from:min(from+64, n)] {
				if err := r.Read(p, 0, 1, func(uint64, int64, []byte) bool { read++; return true }); err != nil {
					b.Fatal(err)
				}
			}
			r.Close()
		}
	}
	if read != b.N*n {
		b.Fatalf("read %d records, want %d", read, b.N*n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/partition")
}
