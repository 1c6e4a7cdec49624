package storage

import (
	"strings"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/queen-mq/queen/wire"
)

// loseSegments makes every stored record unreadable, as a failing disk
// would: the segment files are cut to nothing under the open store.
func (h *harness) loseSegments() {
	h.t.Helper()
	h.s.segs.mu.RLock()
	defer h.s.segs.mu.RUnlock()
	for _, f := range h.s.segs.files {
		if err := f.f.Truncate(0); err != nil {
			h.t.Fatal(err)
		}
	}
}

// updateMustFail applies one entry that must read records the disk lost:
// Update has to fail (dragonboat then stops the replica) and leave the
// store as it was, never commit a different outcome than the replicas
// that could read.
func (h *harness) updateMustFail(what string, e []byte) {
	h.t.Helper()
	before := h.dump()
	h.index++
	_, err := h.s.Update([]sm.Entry{{Index: h.index, Cmd: e}})
	if err == nil {
		h.t.Fatalf("%s: applied although the records it reads could not be read", what)
	}
	if !strings.Contains(err.Error(), "segment") {
		h.t.Fatalf("%s: the error does not say what failed: %v", what, err)
	}
	if after := h.dump(); len(after) != len(before) {
		h.t.Fatalf("%s: a failed apply changed the store", what)
	}
}

func entryOf(now int64, kind wire.Kind, body []byte) []byte {
	return wire.AppendEntry(nil, now, []wire.Command{{Kind: kind, Body: body}})
}

// Every read the apply loop depends on fails the batch instead of being
// skipped: retention, the max-wait sweep, acks and dead-lettering, dedup of
// a repeated transaction id, a retried Kafka produce and relocation.
func TestApplyStopsWhenItCannotReadRecords(t *testing.T) {
	t.Run("retention", func(t *testing.T) {
		h := newHarness(t)
		cfg := wire.DefaultQueueConfig()
		cfg.RetentionEnabled, cfg.RetentionSec = true, 30
		h.configure("r", wire.OptRetentionEnabled|wire.OptRetentionSeconds, cfg)
		h.push("r", "p", "1", "2")
		h.now += 60_000
		h.loseSegments()
		h.updateMustFail("retention", entryOf(h.now, wire.KindTick, nil))
	})
	t.Run("max wait", func(t *testing.T) {
		h := newHarness(t)
		cfg := wire.DefaultQueueConfig()
		cfg.MaxWaitTimeSec = 10
		h.configure("w", wire.OptMaxWaitTimeSeconds, cfg)
		h.push("w", "p", "1", "2")
		h.pop("w", wire.QueueModeGroup, 1, 1000)
		h.now += 20_000
		h.loseSegments()
		h.updateMustFail("max wait", entryOf(h.now, wire.KindTick, nil))
	})
	t.Run("ack to the dead-letter queue", func(t *testing.T) {
		h := newHarness(t)
		h.push("d", "p", "1")
		cl := h.pop("d", wire.QueueModeGroup, 1, 60_000).Claims[0]
		_, txns := h.payloads(cl)
		h.loseSegments()
		ack := wire.AckCmd{Tenant: wire.DefaultTenant, Group: wire.QueueModeGroup, Items: []wire.AckItem{{
			PartitionID: cl.PartitionID, TxnID: []byte(txns[0]), LeaseID: cl.LeaseID, Status: wire.AckDLQ}}}
		h.updateMustFail("ack", entryOf(h.now, wire.KindAck, ack.Encode(nil)))
	})
	t.Run("repeated transaction id", func(t *testing.T) {
		h := newHarness(t)
		h.apply(wire.KindPush, h.pushOp("x", "p", "txn-1").Body)
		h.loseSegments()
		h.updateMustFail("duplicate push", entryOf(h.now, wire.KindPush, h.pushOp("x", "p", "txn-1").Body))
	})
	t.Run("retried kafka produce", func(t *testing.T) {
		h := newHarness(t)
		c := h.produceCmd("t", 0, wire.NoProducer, 0, 0, 3)
		entry := entryOf(h.now, wire.KindKafkaProduce, c.Encode(nil))
		h.applyEntry(entry)
		h.loseSegments()
		h.updateMustFail("retried produce", wire.MarkRetry(entry))
	})
	t.Run("relocation", func(t *testing.T) {
		h := newHarness(t)
		h.push("k", "p", "1")
		h.loseSegments()
		c := wire.RelocateChunksCmd{From: 0, To: 1 << 20, MaxBytes: 1 << 20}
		h.updateMustFail("relocation", entryOf(h.now, wire.KindRelocateChunks, c.Encode(nil)))
	})
}
