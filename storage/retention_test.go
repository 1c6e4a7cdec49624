package storage

import (
	"fmt"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// dump is the store's whole key space except the keys every entry
// rewrites (applied index, clock): two dumps are equal when nothing else
// changed.
func (h *harness) dump() map[string]string {
	h.t.Helper()
	out := map[string]string{}
	it := h.s.db.NewIter(nil)
	for it.First(); it.Valid(); it.Next() {
		if k := it.Key(); k[0] != tagApplied && k[0] != tagClock {
			out[string(k)] = string(it.Value())
		}
	}
	if err := it.Close(); err != nil {
		h.t.Fatal(err)
	}
	return out
}

func (h *harness) has(key []byte) bool {
	_, ok := h.dump()[string(key)]
	return ok
}

func sameDump(t *testing.T, a, b map[string]string) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d keys before, %d after", len(a), len(b))
	}
	for k, v := range a {
		if b[k] != v {
			t.Fatalf("key %q changed", k)
		}
	}
}

func (h *harness) tick() {
	h.t.Helper()
	h.applyEntry(wire.AppendEntry(nil, h.now, []wire.Command{{Kind: wire.KindTick}}))
}

func (h *harness) pushOp(queue, partition string, txnIDs ...string) wire.TxnOp {
	var recs []byte
	for _, id := range txnIDs {
		recs = wire.AppendRecord(recs, &wire.Record{Flags: wire.FlagJSON | wire.FlagTxnID, MsgID: h.nextID(), TxnID: []byte(id), Payload: []byte(`1`)})
	}
	h.alloc(queue, partition)
	c := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: queue, Partition: partition, PartitionIndex: -1,
		Flags: wire.PushIndexTxn, Count: len(txnIDs), Records: recs}
	return wire.TxnOp{Kind: wire.TxnOpPush, Body: c.Encode(nil)}
}

func TestRetentionDeletesOldChunksAndMovesConsumers(t *testing.T) {
	h := newHarness(t)
	cfg := wire.DefaultQueueConfig()
	cfg.RetentionEnabled, cfg.CompletedRetentionSec = true, 60
	h.configure("r", wire.OptRetentionEnabled|wire.OptCompletedRetentionSeconds, cfg)
	h.push("r", "p", "1", "2")
	h.push("r", "p", "3")
	cl := h.pop("r", wire.QueueModeGroup, 2, 600000).Claims[0]
	_, txns := h.payloads(cl)
	h.ack(wire.QueueModeGroup, cl, txns[0], wire.AckCompleted)
	h.ack(wire.QueueModeGroup, cl, txns[1], wire.AckCompleted)
	h.now += 120_000
	h.tick()
	p, _ := h.s.PartitionByName(wire.DefaultTenant, "r", "p")
	if p.LogStart() != 2 || p.HighWatermark() != 3 {
		t.Fatalf("completed retention: start %d hwm %d", p.LogStart(), p.HighWatermark())
	}
	if h.has(txnKey(p.ID, false, mustID(t, txns[0]))) {
		t.Fatal("transaction index entry of a deleted message kept")
	}
	// Unconsumed messages stay until retentionSeconds applies to them; a
	// bus group that never consumed starts at the new log start.
	cfg.RetentionSec = 30
	h.configure("r", wire.OptRetentionSeconds, cfg)
	h.now += retentionIntervalMs
	h.tick()
	if p.LogStart() != 3 {
		t.Fatalf("pending retention: start %d", p.LogStart())
	}
	h.push("r", "p", "4")
	got := h.pop("r", "late", 10, 60000)
	if len(got.Claims) != 1 || got.Claims[0].From != 3 || got.Claims[0].To != 4 {
		t.Fatalf("consumer behind the log start: %+v", got)
	}
}

func mustID(t *testing.T, s string) []byte {
	id, err := wire.ParseID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id[:]
}

func TestMaxWaitExpiresToTheDLQ(t *testing.T) {
	h := newHarness(t)
	cfg := wire.DefaultQueueConfig()
	cfg.MaxWaitTimeSec = 10
	h.configure("w", wire.OptMaxWaitTimeSeconds, cfg)
	h.push("w", "p", "old-1", "old-2")
	if r := h.pop("w", wire.QueueModeGroup, 1, 60000); len(r.Claims) != 1 {
		t.Fatal("subscribe")
	}
	h.now += 5000
	h.push("w", "p", "new")
	h.now += 6000 // old-2 waited 11 s (old-1 is leased), new 6 s
	h.tick()
	rows := 0
	_ = h.s.scan([]byte{tagDLQ}, func(_, v []byte) error {
		row, err := decodeDLQRow(0, v)
		if err != nil || row.offset != 1 || row.errText != maxWaitError {
			t.Fatalf("dlq row: %v %+v", err, row)
		}
		rows++
		return nil
	})
	if rows != 0 {
		t.Fatalf("a leased partition's messages were expired: %d rows", rows)
	}
	h.now += 60000 // the lease expires; everything has waited too long
	h.tick()
	_ = h.s.scan([]byte{tagDLQ}, func(_, v []byte) error { rows++; return nil })
	if rows != 3 {
		t.Fatalf("%d messages dead-lettered, want 3", rows)
	}
	if r := h.pop("w", wire.QueueModeGroup, 10, 60000); len(r.Claims) != 0 {
		t.Fatalf("expired messages delivered: %+v", r)
	}
}

// A replica that restarts in the middle of a sweep pass (or of anything)
// must end with the same state as one that did not.
func TestSweepsAreReplicaDeterministic(t *testing.T) {
	defer func(r, m int) { retentionBudget, maxWaitBudget = r, m }(retentionBudget, maxWaitBudget)
	retentionBudget, maxWaitBudget = 100, 70
	run := func(restart bool) map[string]string {
		h := newHarness(t)
		cfg := wire.DefaultQueueConfig()
		cfg.RetentionEnabled, cfg.RetentionSec = true, 100
		for q := 0; q < 3; q++ {
			cfg.MaxWaitTimeSec = uint32(20 * (1 - min(q, 1))) // q0 only
			h.configure(fmt.Sprintf("q%d", q), wire.OptRetentionEnabled|wire.OptRetentionSeconds|wire.OptMaxWaitTimeSeconds, cfg)
			for p := 0; p < 40; p++ {
				for i := 0; i < 30; i++ {
					h.push(fmt.Sprintf("q%d", q), fmt.Sprintf("p%d", p), "x")
				}
				if p%3 == 0 {
					h.pop(fmt.Sprintf("q%d", q), "g", 5, 60000)
				}
			}
		}
		for i := 0; i < 120; i++ {
			h.now += 3000
			h.tick()
			if restart && i%7 == 3 {
				h.s.Close()
				h.open()
			}
		}
		return h.dump()
	}
	a := run(false)
	dlq, chunks := 0, 0
	for k := range a {
		switch k[0] {
		case tagDLQ:
			dlq++
		case tagChunk:
			chunks++
		}
	}
	// maxWait expired all of q0 (its group subscribed with mode all) and
	// retention deleted q1 and q2, both spread over many ticks by budget.
	if dlq != 40*30 || chunks != 0 {
		t.Fatalf("%d dead-lettered rows, %d chunks left", dlq, chunks)
	}
	sameDump(t, a, run(true))
}
