package storage

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

func (h *harness) timers(ops ...wire.TimerOp) []wire.TimerOpResult {
	h.t.Helper()
	c := wire.TimersCmd{Tenant: wire.DefaultTenant, Ops: ops}
	r, err := wire.DecodeTimersResult(h.apply(wire.KindTimers, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r.Ops
}

func TestTimerFiresOnceAtItsDueTime(t *testing.T) {
	h := newHarness(t)
	sched := wire.TimerOp{Op: wire.TimerSchedule, Queue: "reminders", TimerKey: "campaign-42", DelayMs: 5000,
		Payload: []byte(`{"send":true}`), PayloadFlags: wire.FlagJSON}
	if r := h.timers(sched)[0]; !r.OK || r.Status != wire.TimerScheduled || r.DueMs != h.now+5000 {
		t.Fatalf("schedule: %+v", r)
	}
	// A retried schedule changes nothing.
	if r := h.timers(sched)[0]; r.DueMs != h.now+5000 {
		t.Fatalf("second schedule moved the timer: %+v", r)
	}
	if n, _ := h.s.TimerCount(wire.DefaultTenant, "reminders", ""); n != 1 {
		t.Fatalf("count %d", n)
	}
	if h.s.TickDue(h.now + 4000) {
		t.Fatal("due too early")
	}
	h.now += 5000
	if !h.s.TickDue(h.now) {
		t.Fatal("not due at its time")
	}
	h.apply(wire.KindTick, nil)
	h.apply(wire.KindTick, nil) // a second tick at the same time fires nothing more
	p, ok := h.s.PartitionByName(wire.DefaultTenant, "reminders", "Default")
	if !ok || p.HighWatermark() != 1 {
		t.Fatalf("fired pushes: %v %d", ok, p.HighWatermark())
	}
	if r := h.timers(sched)[0]; r.Status != wire.TimerTooLate {
		t.Fatalf("schedule after firing: %+v", r)
	}
	if n, _ := h.s.TimerCount(wire.DefaultTenant, "reminders", ""); n != 0 {
		t.Fatalf("pending after firing: %d", n)
	}
}

func TestTimerRescheduleAndCancel(t *testing.T) {
	h := newHarness(t)
	h.timers(wire.TimerOp{Op: wire.TimerSchedule, Queue: "q", TimerKey: "a", DelayMs: 1000, Payload: []byte("1")},
		wire.TimerOp{Op: wire.TimerSchedule, Queue: "q", TimerKey: "b", DelayMs: 1000, Payload: []byte("2")})
	if r := h.timers(wire.TimerOp{Op: wire.TimerReschedule, Queue: "q", TimerKey: "a", DelayMs: 60000})[0]; r.Status != wire.TimerRescheduled {
		t.Fatalf("reschedule: %+v", r)
	}
	if r := h.timers(wire.TimerOp{Op: wire.TimerCancel, Queue: "q", TimerKey: "b"})[0]; r.Status != wire.TimerCancelled {
		t.Fatalf("cancel: %+v", r)
	}
	if r := h.timers(wire.TimerOp{Op: wire.TimerCancel, Queue: "q", TimerKey: "nope"})[0]; r.OK || r.Status != wire.TimerAbsent {
		t.Fatalf("cancel of an absent timer: %+v", r)
	}
	h.now += 2000
	h.apply(wire.KindTick, nil)
	if _, ok := h.s.PartitionByName(wire.DefaultTenant, "q", "Default"); ok {
		t.Fatal("a rescheduled or cancelled timer fired")
	}
	list, truncated, err := h.s.Timers(wire.DefaultTenant, "q", "", "", 10)
	if err != nil || truncated || len(list) != 1 || list[0].Key != "a" || list[0].DueMs != h.now-2000+60000 {
		t.Fatalf("list: %+v %v %v", list, truncated, err)
	}
	// The timer survives a restart.
	h.s.Close()
	h.open()
	h.now += 60000
	h.apply(wire.KindTick, nil)
	if p, ok := h.s.PartitionByName(wire.DefaultTenant, "q", "Default"); !ok || p.HighWatermark() != 1 {
		t.Fatal("timer lost across a restart")
	}
}
