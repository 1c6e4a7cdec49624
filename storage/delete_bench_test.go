package storage

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

// Deleting a queue of many partitions is one apply of its group: every
// other write to the group waits for it. 20,000 one-message partitions took
// 100 s when each partition's chunks were listed through an iterator opened
// after the previous partitions' range deletes; ~70 ms with one iterator.
func BenchmarkDeleteQueueOfManyPartitions(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		h := newHarness(b)
		fillPartitions(h, "q", 20_000)
		b.StartTimer()
		c := wire.DeleteQueueCmd{Tenant: wire.DefaultTenant, Queue: "q"}
		if r, err := wire.DecodeDeleteQueueResult(h.apply(wire.KindDeleteQueue, c.Encode(nil))); err != nil || r.Code != wire.CodeOK {
			b.Fatalf("delete: %v %+v", err, r)
		}
		b.StopTimer()
		if len(h.dump()) > 16 {
			b.Fatalf("%d keys left after the delete", len(h.dump()))
		}
		b.StartTimer()
	}
}
