package storage

import (
	"testing"

	"github.com/cockroachdb/pebble"

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

// A fire whose push fails backs off (1 s, 2 s, 4 s, 8 s) and after
// wire.TimerMaxFireAttempts goes to the DLQ under __timer__ with its
// payload, and the timer is gone. Timers create their queue and partition
// on demand, so no schedule reaches this path; the test forges a timer
// with an empty partition name, which no push accepts.
func TestTimerFireFailuresBackOffThenDeadLetter(t *testing.T) {
	h := newHarness(t)
	h.timers(wire.TimerOp{Op: wire.TimerSchedule, Queue: "q", TimerKey: "broken", DelayMs: 1000, Payload: []byte(`{"x":1}`), PayloadFlags: wire.FlagJSON})
	tk := timerKey(wire.DefaultTenant, "q", "broken")
	stored := func() (timerRec, bool) {
		v, closer, err := h.s.db.Get(tk)
		if err != nil {
			return timerRec{}, false
		}
		defer closer.Close()
		return decodeTimer(append([]byte(nil), v...))
	}
	forged, ok := stored()
	if !ok {
		t.Fatal("timer not stored")
	}
	forged.partition = ""
	if err := h.s.db.Set(tk, forged.encode(), pebble.NoSync); err != nil {
		t.Fatal(err)
	}

	due := forged.dueMs
	for attempt := 1; attempt < wire.TimerMaxFireAttempts; attempt++ {
		h.now = due
		if !h.s.TickDue(h.now) {
			t.Fatalf("attempt %d not due at %d", attempt, due)
		}
		h.apply(wire.KindTick, nil)
		tr, ok := stored()
		backoff := int64(timerBackoffMin) << (attempt - 1)
		if !ok || tr.attempts != uint32(attempt) || tr.dueMs != h.now+backoff || tr.fired {
			t.Fatalf("after attempt %d: %+v, want due in %d ms", attempt, tr, backoff)
		}
		if h.s.TickDue(h.now + backoff - 1) {
			t.Fatalf("attempt %d: due again before its backoff", attempt)
		}
		due = tr.dueMs
	}
	h.now = due
	h.apply(wire.KindTick, nil)
	if _, ok := stored(); ok {
		t.Fatal("a dead-lettered timer is still stored")
	}
	rows, total, err := h.s.DLQ(wire.DefaultTenant, DLQFilter{Offset: -1}, 0, 10)
	if err != nil || total != 1 || rows[0].Group != wire.TimerDLQGroup || rows[0].Queue != "q" || rows[0].RetryCount != wire.TimerMaxFireAttempts {
		t.Fatalf("dlq: %v %d %+v", err, total, rows)
	}
	if h.s.TickDue(h.now + 24*3600*1000) {
		t.Fatal("nothing is left to fire")
	}
}
