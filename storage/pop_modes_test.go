package storage

import (
	"fmt"
	"testing"

	"github.com/queen-mq/queen/wire"
)

func (h *harness) popWith(c wire.PopCmd) wire.PopResult {
	h.t.Helper()
	c.Tenant = wire.DefaultTenant
	if len(c.LeaseIDs) == 0 && !c.CommitOnDelivery {
		c.LeaseIDs = []wire.ID{h.nextID()}
	}
	r, err := wire.DecodePopResult(h.apply(wire.KindPop, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) configure(queue string, set uint32, cfg wire.QueueConfig) {
	h.t.Helper()
	c := wire.ConfigureCmd{Place: testPlace, Tenant: wire.DefaultTenant, Queue: queue, Set: set, Config: cfg}
	if r, err := wire.DecodeConfigureResult(h.apply(wire.KindConfigure, c.Encode(nil))); err != nil || r.Code != wire.CodeOK {
		h.t.Fatalf("configure: %v %+v", err, r)
	}
}

func span(r wire.PopResult) [][2]uint64 {
	var out [][2]uint64
	for _, c := range r.Claims {
		out = append(out, [2]uint64{c.From, c.To})
	}
	return out
}

func TestSubscriptionModes(t *testing.T) {
	h := newHarness(t)
	h.push("s", "p", "1", "2")
	h.now += 1000
	pop := func(group string, mode uint8, fromMs int64) wire.PopResult {
		return h.popWith(wire.PopCmd{Queue: "s", Group: group, Batch: 10, SubMode: mode, SubFromMs: fromMs})
	}
	if r := pop("news", wire.SubNew, 0); len(r.Claims) != 0 {
		t.Fatalf("mode new delivered old messages: %+v", r)
	}
	if r := pop("from", wire.SubFrom, h.now+500); len(r.Claims) != 0 {
		t.Fatalf("subscriptionFrom in the future delivered old messages: %+v", r)
	}
	if r := pop("alls", wire.SubAll, 0); len(r.Claims) != 1 || r.Claims[0].From != 0 || r.Claims[0].To != 2 {
		t.Fatalf("mode all: %+v", r)
	}
	h.now += 1000
	h.push("s", "p", "3")
	h.push("s", "q", "4") // a partition created after the subscription
	if r := h.popWith(wire.PopCmd{Queue: "s", Group: "news", Batch: 10, SubMode: wire.SubNew, LeaseIDs: []wire.ID{h.nextID(), h.nextID()}}); len(r.Claims) != 2 ||
		r.Claims[0].From != 2 || r.Claims[1].From != 0 {
		t.Fatalf("mode new gets what came after it subscribed: %+v", span(r))
	}
	if r := pop("from", wire.SubFrom, 0); len(r.Claims) != 1 || r.Claims[0].From != 2 {
		t.Fatalf("subscriptionFrom: %+v", span(r))
	}
	// The queue-mode group always starts at the beginning.
	if r := pop(wire.QueueModeGroup, wire.SubNew, 0); len(r.Claims) != 1 || r.Claims[0].From != 0 {
		t.Fatalf("queue mode: %+v", span(r))
	}
}

func TestQueueModeCompetingConsumersTakeOtherPartitions(t *testing.T) {
	h := newHarness(t)
	h.push("c", "a", "1", "2")
	h.push("c", "b", "3")
	first := h.pop("c", wire.QueueModeGroup, 10, 60000)
	second := h.pop("c", wire.QueueModeGroup, 10, 60000)
	third := h.pop("c", wire.QueueModeGroup, 10, 60000)
	if len(first.Claims) != 1 || len(second.Claims) != 1 || first.Claims[0].PartitionID == second.Claims[0].PartitionID || len(third.Claims) != 0 {
		t.Fatalf("competing consumers: %+v / %+v / %+v", first, second, third)
	}
}

func TestOrderHoldsAcrossRedeliveries(t *testing.T) {
	h := newHarness(t)
	h.push("o", "p", "1", "2", "3", "4")
	cl := h.pop("o", wire.QueueModeGroup, 4, 60000).Claims[0]
	_, txns := h.payloads(cl)
	// 1 completes, 2 fails, 3 and 4 complete: 2 comes back with what
	// follows it, never after it.
	h.ack(wire.QueueModeGroup, cl, txns[0], wire.AckCompleted)
	h.ack(wire.QueueModeGroup, cl, txns[1], wire.AckFailed)
	h.ack(wire.QueueModeGroup, cl, txns[2], wire.AckCompleted)
	h.ack(wire.QueueModeGroup, cl, txns[3], wire.AckCompleted)
	again := h.pop("o", wire.QueueModeGroup, 4, 60000)
	if len(again.Claims) != 1 || again.Claims[0].From != 1 || again.Claims[0].DeliveryAttempt(1) != 2 {
		t.Fatalf("redelivery: %+v", again)
	}
}

func TestCommitOnDeliveryLeavesNoLease(t *testing.T) {
	h := newHarness(t)
	h.push("a", "p", "1", "2", "3")
	r := h.popWith(wire.PopCmd{Queue: "a", Group: "g", Batch: 2, SubMode: wire.SubAll, CommitOnDelivery: true})
	if len(r.Claims) != 1 || !r.Claims[0].LeaseID.IsZero() || r.Claims[0].To != 2 {
		t.Fatalf("commitOnDelivery: %+v", r)
	}
	// The position moved at delivery: the next pop continues at once.
	r = h.popWith(wire.PopCmd{Queue: "a", Group: "g", Batch: 2, SubMode: wire.SubAll, CommitOnDelivery: true})
	if len(r.Claims) != 1 || r.Claims[0].From != 2 {
		t.Fatalf("second commitOnDelivery pop: %+v", r)
	}
}

func TestDelayedProcessingAndWindowBuffer(t *testing.T) {
	h := newHarness(t)
	cfg := wire.DefaultQueueConfig()
	cfg.DelayedProcessingSec, cfg.WindowBufferSec = 10, 0
	h.configure("d", wire.OptDelayedProcessing, cfg)
	h.push("d", "p", "1")
	h.now += 5000
	h.push("d", "p", "2")
	h.now += 6000 // "1" is 11 s old, "2" 6 s
	if r := h.pop("d", wire.QueueModeGroup, 10, 60000); len(r.Claims) != 1 || r.Claims[0].To != 1 {
		t.Fatalf("delayedProcessing: %+v", span(r))
	}
	if ok, at := h.s.PopReadiness(wire.DefaultTenant, "d", "other", "", h.now); !ok || at != 0 {
		t.Fatalf("readiness with a visible message: %v %d", ok, at)
	}

	cfg.WindowBufferSec = 3
	h.configure("w", wire.OptWindowBuffer, cfg)
	h.push("w", "p", "1")
	h.now += 2000
	h.push("w", "p", "2")
	h.now += 2000 // the partition has been quiet for 2 s only
	if ok, at := h.s.PopReadiness(wire.DefaultTenant, "w", wire.QueueModeGroup, "", h.now); ok || at != h.now+1000 {
		t.Fatalf("readiness inside the window: %v %d (now %d)", ok, at, h.now)
	}
	if r := h.pop("w", wire.QueueModeGroup, 10, 60000); len(r.Claims) != 0 {
		t.Fatalf("windowBuffer: %+v", span(r))
	}
	h.now += 1000
	if r := h.pop("w", wire.QueueModeGroup, 10, 60000); len(r.Claims) != 1 || r.Claims[0].To != 2 {
		t.Fatalf("after the window: %+v", span(r))
	}
}

// An auto-ack pop takes messages from up to MaxPartitions partitions, each
// a different one, and never more messages than its batch.
func TestCommitOnDeliveryHonoursPartitions(t *testing.T) {
	h := newHarness(t)
	for i := range 20 {
		h.push("a", fmt.Sprintf("p%02d", i), "m")
	}
	r := h.popWith(wire.PopCmd{Queue: "a", Group: "g", Batch: 100, SubMode: wire.SubAll, CommitOnDelivery: true, MaxPartitions: 8})
	seen := map[uint64]bool{}
	for _, cl := range r.Claims {
		seen[cl.PartitionID] = true
	}
	if len(r.Claims) != 8 || len(seen) != 8 {
		t.Fatalf("want 8 claims from 8 partitions, got %+v", r.Claims)
	}
	r = h.popWith(wire.PopCmd{Queue: "a", Group: "g", Batch: 5, SubMode: wire.SubAll, CommitOnDelivery: true, MaxPartitions: 64})
	if len(r.Claims) != 5 {
		t.Fatalf("batch 5 over one-message partitions: %d claims, want 5", len(r.Claims))
	}
	// Without MaxPartitions (entries written before it existed) one partition.
	r = h.popWith(wire.PopCmd{Queue: "a", Group: "g", Batch: 100, SubMode: wire.SubAll, CommitOnDelivery: true})
	if len(r.Claims) != 1 {
		t.Fatalf("default: %d claims, want 1", len(r.Claims))
	}
}

// A pop that finds nothing in a partition still makes the group's cursor
// there, and where a cursor starts depends on when it is made (a
// subscription from a time in the future starts at the head it finds). A
// cursor kept only in memory is gone after a restart and made again later,
// somewhere else: a replica that restarted in between then answers the
// next pop differently from its peers. Two stores apply the same entries,
// one reopened in the middle; their answers must not differ.
func TestACursorMadeByAnEmptyPopSurvivesARestart(t *testing.T) {
	stores := []*harness{newHarness(t), newHarness(t)}
	each := func(f func(h *harness)) {
		for _, h := range stores {
			f(h)
		}
	}
	from := stores[0].now + 1000
	popP := func(h *harness) wire.PopResult {
		return h.popWith(wire.PopCmd{Queue: "q", Partition: "p", Group: "g", Batch: 10, SubMode: wire.SubFrom, SubFromMs: from})
	}
	each(func(h *harness) { h.alloc("q", "p"); h.push("q", "p", `"before"`) })
	each(func(h *harness) {
		if r := popP(h); len(r.Claims) != 0 {
			t.Fatalf("the group starts after its first message, got %+v", r.Claims)
		}
	})
	each(func(h *harness) { h.now += 500; h.push("q", "p", `"still before"`) })
	stores[1].s.Close()
	stores[1].open()
	each(func(h *harness) { h.now += 1000 })
	got := [2]int{}
	for i, h := range stores {
		for _, cl := range popP(h).Claims {
			got[i] += int(cl.To - cl.From)
		}
	}
	if got[0] != got[1] {
		t.Fatalf("the store that kept running claims %d messages, the restarted one %d", got[0], got[1])
	}
}
