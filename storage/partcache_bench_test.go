package storage

import (
	"fmt"
	"os"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// What reading partitions back costs a drain: 50,000 one-message
// partitions drained by auto-ack pops of 64 partitions, with every
// partition in memory and with a cache of 1,000 (each pop reads its
// partitions back). Reported per message.
func BenchmarkDrainBeyondTheCache(b *testing.B) {
	for _, cache := range []int{0, 1000} {
		b.Run(fmt.Sprint("cache=", cache), func(b *testing.B) {
			withoutTotalsCheck(b)
			const n = 50_000
			for b.Loop() {
				b.StopTimer()
				h := newCachedHarness(b, cache)
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

// The same drain with leases, as bench/partitions' leased consumers do it:
// each pop leases one message in each of 64 partitions, and one ack
// command, resolved by its proposer (ResolveAckOffsets), completes them.
func BenchmarkLeasedDrainBeyondTheCache(b *testing.B) {
	withoutTotalsCheck(b)
	const n = 50_000
	for b.Loop() {
		b.StopTimer()
		h := newCachedHarness(b, 1000)
		fillPartitions(h, "q", n)
		b.StartTimer()
		if got := drainLeased(h, "q", "consumers"); got != n {
			b.Fatalf("drained %d messages, want %d", got, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
}

// What a boot costs per partition: reopening a store of 100,000
// one-message partitions read by one consumer group, with a cache of
// 1,000, from its load image (a clean stop) and by the walk (a crash:
// load reads every partition and its cursors to count them and keeps the
// cache's share). Reported per partition.
func BenchmarkOpenManyPartitions(b *testing.B) {
	withoutTotalsCheck(b)
	const n = 100_000
	h := newCachedHarness(b, 1000)
	fillPartitions(h, "q", n)
	if got := drainAutoAck(h, "q", "consumers"); got != n {
		b.Fatalf("drained %d messages, want %d", got, n)
	}
	for _, from := range []string{"walk", "image"} {
		b.Run("from="+from, func(b *testing.B) {
			h.t = b
			for b.Loop() {
				b.StopTimer() // Close (a flush, and the image) is the stop's cost, not the boot's
				dir := h.s.dbDir
				h.s.Close()
				if from == "walk" {
					if err := os.Remove(imagePath(dir)); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				h.open()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/partition")
		})
	}
}

// What a long poll's readiness check costs in the middle of a drain with
// leases and acks, partitions out of memory: 20,000 one-message
// partitions, a cache of 1,000, the first half consumed (each popped by
// name and acknowledged), then PopReadiness for the group, which finds
// the second half. Reported per check.
func BenchmarkPopReadinessMidDrain(b *testing.B) {
	withoutTotalsCheck(b)
	const n = 20_000
	h := newCachedHarness(b, 1000)
	fillPartitions(h, "q", n)
	for i := range n / 2 {
		r := h.popWith(wire.PopCmd{Queue: "q", Partition: fmt.Sprintf("p%d", i), Group: "g", Batch: 1, SubMode: wire.SubAll})
		if len(r.Claims) != 1 {
			b.Fatalf("pop of p%d: %+v", i, r)
		}
		_, txns := h.payloads(r.Claims[0])
		h.ack("g", r.Claims[0], txns[0], wire.AckCompleted)
	}
	for b.Loop() {
		if ok, _ := h.s.PopReadiness(wire.DefaultTenant, "q", "g", "", h.now); !ok {
			b.Fatal("not ready with half the partitions left")
		}
	}
}
