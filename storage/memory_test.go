package storage

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/queen-mq/queen/wire"
)

// heapNow is the live heap after a full collection.
func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// heapOfReopen closes and opens h's store and answers the live heap with
// it closed and reopened: their difference is what load rebuilds.
func heapOfReopen(h *harness) (closed, reopened uint64) {
	h.s.Close()
	h.s = nil
	closed = heapNow()
	h.open()
	return closed, heapNow()
}

// perPartition is the heap growth from b to a spread over n partitions.
func perPartition(a, b uint64, n int) float64 { return float64(int64(a)-int64(b)) / float64(n) }

// fillPartitions gives each of n partitions of queue one message, many
// commands per entry as the engine batches them.
func fillPartitions(h *harness, queue string, n int) {
	const perEntry = 1000
	for from := 0; from < n; from += perEntry {
		var names []string
		for i := from; i < min(from+perEntry, n); i++ {
			names = append(names, fmt.Sprintf("p%d", i))
		}
		h.alloc(queue, names...)
		var cmds []wire.Command
		for _, name := range names {
			id := wire.ID{0: 0xBB}
			binary.BigEndian.PutUint64(id[8:], uint64(from)<<20|uint64(len(cmds)))
			rec := wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: id, Payload: []byte(`"m"`)})
			c := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: queue, Partition: name, PartitionIndex: -1,
				Flags: wire.PushIndexTxn, Count: 1, Records: rec}
			cmds = append(cmds, wire.Command{Kind: wire.KindPush, Body: c.Encode(nil)})
		}
		h.index++
		if _, err := h.s.Update([]sm.Entry{{Index: h.index, Cmd: wire.AppendEntry(nil, h.now, cmds)}}); err != nil {
			h.t.Fatal(err)
		}
	}
}

// drainAutoAck pops every message of queue for group, 64 partitions a pop.
func drainAutoAck(h *harness, queue, group string) int {
	got := 0
	for {
		r := h.popWith(wire.PopCmd{Queue: queue, Group: group, Batch: 64, SubMode: wire.SubAll, CommitOnDelivery: true, MaxPartitions: 64})
		if len(r.Claims) == 0 {
			return got
		}
		for _, cl := range r.Claims {
			got += int(cl.To - cl.From)
		}
	}
}

// drainLeased pops every message of queue for group with leases, 64
// partitions a pop, and completes each pop's messages with one ack its
// proposer resolved, as the HTTP API does.
func drainLeased(h *harness, queue, group string) int {
	got := 0
	leaseIDs := make([]wire.ID, 64)
	for pop := 0; ; pop++ {
		for i := range leaseIDs {
			leaseIDs[i] = wire.ID{0: 0x1E}
			binary.BigEndian.PutUint64(leaseIDs[i][8:], uint64(pop)<<8|uint64(i))
		}
		r := h.popWith(wire.PopCmd{Queue: queue, Group: group, Batch: 64, SubMode: wire.SubAll, LeaseMs: 60_000,
			LeaseIDs: leaseIDs, MaxPartitions: 64})
		if len(r.Claims) == 0 {
			return got
		}
		ack := wire.AckCmd{Tenant: wire.DefaultTenant, Group: group}
		rr, err := h.s.NewRangeReader() // the answer's reads, as the engine makes them
		if err != nil {
			h.t.Fatal(err)
		}
		for _, cl := range r.Claims {
			got += int(cl.To - cl.From)
			p, ok := h.s.PartitionByID(wire.DefaultTenant, cl.PartitionID)
			if !ok {
				h.t.Fatalf("partition %d missing", cl.PartitionID)
			}
			err := rr.ReadLease(p, cl.LeaseID, cl.From, cl.To, func(_ uint64, _ int64, body []byte) bool {
				rec, err := wire.ParseRecord(body)
				if err != nil {
					h.t.Fatal(err)
				}
				ack.Items = append(ack.Items, wire.AckItem{PartitionID: cl.PartitionID, TxnID: []byte(rec.MsgID.String()),
					LeaseID: cl.LeaseID, Status: wire.AckCompleted})
				return true
			})
			if err != nil {
				h.t.Fatal(err)
			}
		}
		rr.Close()
		h.s.ResolveAckOffsets(&ack)
		for i, o := range h.applyAcks(ack) {
			if o.Code != wire.CodeOK {
				h.t.Fatalf("ack %d: %+v", i, o)
			}
		}
	}
}

// What a partition costs in memory: the live heap per partition holding
// one message, then with one consumer group's cursor on it, then after a
// reopen. Logged for the benchmarks page; bounded so a change that makes
// every partition dearer is seen.
func TestPartitionMemoryCost(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 50,000 partitions")
	}
	filled, drained, reopened := partitionHeapCost(t, newHarness(t), 50_000)
	t.Logf("live heap per partition: %.0f B with one message, %.0f B with a cursor, %.0f B after a reopen",
		filled, drained, reopened)
	// About 420 B today (docs/benchmarks.md); the bound leaves room for
	// the collector's timing, not for a new per-partition structure.
	const most = 520
	if drained > most || reopened > most {
		t.Fatalf("a partition with a cursor costs more than %d B of heap", most)
	}
}

// partitionHeapCost fills n partitions of h's store with one message each,
// drains them with one consumer group and reopens the store, and answers
// the live heap per partition after each step.
func partitionHeapCost(t *testing.T, h *harness, n int) (filled, drained, reopened float64) {
	base := heapNow()
	fillPartitions(h, "q", n)
	afterFill := heapNow()
	if got := drainAutoAck(h, "q", "consumers"); got != n {
		t.Fatalf("drained %d messages, want %d", got, n)
	}
	afterDrain := heapNow()
	closed, open := heapOfReopen(h)
	return perPartition(afterFill, base, n), perPartition(afterDrain, base, n), perPartition(open, closed, n)
}

// What a removed partition still costs: partitions emptied by retention and
// removed as idle leave their index's slots (the home's directory and the
// group's partition table) and a gone bit. Logged for the benchmarks page.
func TestRemovedPartitionMemoryCost(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 50,000 partitions")
	}
	const n = 50_000
	h := newHarness(t)
	h.retainCompleted("q", 1)
	base := heapNow()
	fillPartitions(h, "q", n)
	if got := drainAutoAck(h, "q", "consumers"); got != n {
		t.Fatalf("drained %d messages, want %d", got, n)
	}
	drained := heapNow()
	h.now += 10_000
	for range n/retentionBudget + 2 {
		h.tick()
		h.now += 10
	}
	h.now += testCleanupMs
	for range n/cleanupBudget + 2 {
		h.cleanTick(testCleanupMs)
		h.now += 10
	}
	qv := h.s.Queues(wire.DefaultTenant, QueueFilter{Name: "q"}, h.now)[0]
	if qv.QueueInfo.Partitions != 0 || qv.Totals.Partitions != 0 {
		t.Fatalf("left after the cleanup: %d partitions, totals %+v", qv.QueueInfo.Partitions, qv.Totals)
	}
	removed := heapNow()
	closed, reopened := heapOfReopen(h)
	per := func(a, b uint64) float64 { return perPartition(a, b, n) }
	t.Logf("live heap per partition: %.0f B with a cursor, %.0f B once removed, %.0f B removed after a reopen",
		per(drained, base), per(removed, base), per(reopened, closed))
	// About 60 B today: its index's empty slots in the directory and the
	// partition id table, and what the store's write path keeps of the
	// removal; after a reopen the slots (the id table keeps its length: a
	// pop's start depends on it).
	if per(removed, base) > 96 || per(reopened, closed) > 96 {
		t.Fatal("a removed partition costs more than 96 B of heap")
	}
}

// What a partition costs beyond the partition cache: its id and slot by
// index, its name's slot, and at the home its directory entry; its state
// and cursors stay on disk. Logged for the benchmarks page.
func TestPartitionMemoryCostBeyondTheCache(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 50,000 partitions")
	}
	const cache = 1000
	withoutTotalsCheck(t)
	h := newCachedHarness(t, cache)
	filled, drained, reopened := partitionHeapCost(t, h, 50_000)
	t.Logf("live heap per partition beyond a cache of %d: %.0f B with one message, %.0f B with a cursor, %.0f B after a reopen",
		cache, filled, drained, reopened)
	// About 64 B today at this size (its id, its names' slots in the
	// shard's and the directory's name tables, which grow by doubling,
	// and its directory slot; docs/benchmarks.md), against about 400 B
	// in memory.
	const most = 100
	if drained > most || reopened > most {
		t.Fatalf("a partition out of memory costs more than %d B of heap", most)
	}
}

// What a boot without a load image (after a crash) allocates and keeps
// per partition: it reads every partition and cursor back to count them,
// and lets go at once of each it need not keep. The garbage is what takes
// a boot of millions of partitions past its memory budget, so it is kept
// small: the partition and cursor just let go are reused for the next.
func TestTheWalkAllocatesLittlePerPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 50,000 partitions")
	}
	const n = 50_000
	withoutTotalsCheck(t)
	h := newCachedHarness(t, 1000)
	fillPartitions(h, "q", n)
	if got := drainAutoAck(h, "q", "consumers"); got != n {
		t.Fatalf("drained %d messages, want %d", got, n)
	}
	dir := h.s.dbDir
	h.s.Close()
	h.s = nil
	if err := os.Remove(imagePath(dir)); err != nil {
		t.Fatal(err)
	}
	closed := heapNow()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h.open()
	runtime.ReadMemStats(&after)
	if h.s.loadedFrom != "walk" {
		t.Fatalf("loaded from the %s", h.s.loadedFrom)
	}
	allocated := float64(after.TotalAlloc-before.TotalAlloc) / n
	kept := perPartition(heapNow(), closed, n)
	t.Logf("the walk allocated %.0f B per partition and kept %.0f B", allocated, kept)
	// About 150 B today (459 B before the walk reused what it let go):
	// its name, the tables' growth by doubling, the iterators' blocks.
	if allocated > 250 || kept > 100 {
		t.Fatalf("the walk allocated %.0f B per partition and kept %.0f B, want at most 250 and 100", allocated, kept)
	}
}
