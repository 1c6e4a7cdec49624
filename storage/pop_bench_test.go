package storage

import (
	"fmt"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// What applying a pop over several partitions costs: 16 partitions of 50
// messages, each pop claiming 8 of them, all 50 of each, after the
// previous pop's leases expired (so each pop also closes 8 leases).
// Per-partition lease ids against one shared id. Reported per pop.
func BenchmarkApplyPopPartitions(b *testing.B) {
	withoutTotalsCheck(b)
	for _, shared := range []bool{false, true} {
		b.Run(fmt.Sprintf("shared=%v", shared), func(b *testing.B) {
			h := newHarness(b)
			for i := range 16 {
				var recs []byte
				for j := range 50 {
					recs = wire.AppendRecord(recs, &wire.Record{Flags: wire.FlagJSON, MsgID: wire.ID{0: byte(i), 1: byte(j >> 8), 2: byte(j)}, Payload: []byte(`{"n":1}`)})
				}
				h.pushRaw("q", fmt.Sprintf("p%d", i), 50, recs)
			}
			c := wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g", Batch: 400, LeaseMs: 1000, SubMode: wire.SubAll,
				LeaseIDs: make([]wire.ID, 8)}
			n := uint32(0)
			for b.Loop() {
				n++
				for i := range c.LeaseIDs {
					c.LeaseIDs[i] = wire.ID{0: 0xCC, 1: byte(n >> 16), 2: byte(n >> 8), 3: byte(n), 4: byte(i)}
					if shared {
						c.LeaseIDs[i] = wire.SharedLeaseID(wire.ID{10: byte(n >> 16), 11: byte(n >> 8), 12: byte(n)}, 1, 0)
					}
				}
				c.StartHint = n
				h.now += 1001
				if r, err := wire.DecodePopResult(h.apply(wire.KindPop, c.Encode(nil))); err != nil || len(r.Claims) != 8 {
					b.Fatalf("pop: %v %+v", err, r)
				}
			}
		})
	}
}
