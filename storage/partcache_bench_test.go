package storage

import (
	"fmt"
	"testing"
)

// What reading partitions back costs a drain: 50,000 one-message
// partitions drained by auto-ack pops of 64 partitions, with every
// partition in memory and with a cache of 1,000 (each pop reads its
// partitions back). Reported per message.
func BenchmarkDrainBeyondTheCache(b *testing.B) {
	for _, cache := range []int{0, 1000} {
		b.Run(fmt.Sprint("cache=", cache), func(b *testing.B) {
			verifyTotals = false
			defer func() { verifyTotals = true }()
			const n = 50_000
			for b.Loop() {
				b.StopTimer()
				h := newHarness(b)
				h.s.Close()
				h.cache = cache
				h.open()
				fillPartitions(h, "q", n)
				b.StartTimer()
				if got := drainAutoAck(h, "q", "consumers"); got != n {
					b.Fatalf("drained %d messages, want %d", got, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
		})
	}
}
