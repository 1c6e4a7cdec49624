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

// fire does what the leader's fire loop does at h.now: push each due
// timer's record into its queue (creating it), then record the outcome.
func (h *harness) fire() int {
	h.t.Helper()
	due, err := h.s.DueTimers(h.now)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, d := range due {
		h.alloc(d.Queue, d.Partition)
		push := wire.PushCmd{Tenant: d.Tenant, Queue: d.Queue, Partition: d.Partition, PartitionIndex: -1,
			Flags: wire.PushIndexTxn, Count: 1, Records: wire.AppendRecord(nil, &d.Record)}
		r, err := wire.DecodePushResult(h.apply(wire.KindPush, push.Encode(nil)))
		if err != nil {
			h.t.Fatal(err)
		}
		code := r.Code
		if len(r.Dups) > 0 {
			code = wire.CodeOK
		}
		h.fired(d, code)
	}
	return len(due)
}

func (h *harness) fired(d DueTimer, code wire.Code) wire.Code {
	h.t.Helper()
	c := wire.TimerFiredCmd{Tenant: d.Tenant, Queue: d.Queue, Key: d.Key, DueMs: d.DueMs, Code: code}
	r, _ := wire.ResultCode(h.apply(wire.KindTimerFired, c.Encode(nil)))
	return r
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
	if due, _ := h.s.DueTimers(h.now + 4000); len(due) != 0 {
		t.Fatal("due too early")
	}
	h.now += 5000
	due, _ := h.s.DueTimers(h.now)
	if len(due) != 1 || due[0].Key != "campaign-42" || due[0].Partition != "Default" {
		t.Fatalf("not due at its time: %+v", due)
	}
	// A fire repeated (a new leader firing again before it learned of the
	// first) is a duplicate push, and its outcome a stale one.
	h.alloc("reminders", "Default")
	push := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "reminders", Partition: "Default", PartitionIndex: -1,
		Flags: wire.PushIndexTxn, Count: 1, Records: wire.AppendRecord(nil, &due[0].Record)}
	h.apply(wire.KindPush, push.Encode(nil))
	if n := h.fire(); n != 1 {
		t.Fatalf("fired %d", n)
	}
	if h.fired(due[0], wire.CodeOK) != wire.CodeConflict {
		t.Fatal("a second outcome for the same fire was taken")
	}
	if n := h.fire(); n != 0 {
		t.Fatalf("fired again: %d", n)
	}
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
	// The tombstone goes after an hour, with a tick.
	h.now += timerTombstoneMs + 1
	if !h.s.TickDue(h.now) {
		t.Fatal("tombstone sweep not due")
	}
	h.apply(wire.KindTick, nil)
	if _, found, _ := h.s.Timer(wire.DefaultTenant, "reminders", "campaign-42"); found {
		t.Fatal("tombstone kept past its hour")
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
	if n := h.fire(); n != 0 {
		t.Fatalf("a rescheduled or cancelled timer fired (%d)", n)
	}
	list, truncated, err := h.s.Timers(wire.DefaultTenant, "q", "", "", 10)
	if err != nil || truncated || len(list) != 1 || list[0].Key != "a" || list[0].DueMs != h.now-2000+60000 {
		t.Fatalf("list: %+v %v %v", list, truncated, err)
	}
	// The timer survives a restart.
	h.s.Close()
	h.open()
	h.now += 60000
	if n := h.fire(); n != 1 {
		t.Fatalf("timer lost across a restart: fired %d", n)
	}
	if p, ok := h.s.PartitionByName(wire.DefaultTenant, "q", "Default"); !ok || p.HighWatermark() != 1 {
		t.Fatal("timer fired nothing")
	}
}

// A fire whose push fails backs off (1 s, 2 s, 4 s, 8 s) and after
// wire.TimerMaxFireAttempts goes to the DLQ under __timer__ with its
// payload, and the timer is gone.
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
	due := forged.dueMs
	for attempt := 1; attempt < wire.TimerMaxFireAttempts; attempt++ {
		h.now = due
		d, _ := h.s.DueTimers(h.now)
		if len(d) != 1 {
			t.Fatalf("attempt %d not due at %d", attempt, due)
		}
		if c := h.fired(d[0], wire.CodeBadRequest); c != wire.CodeOK {
			t.Fatalf("attempt %d outcome refused: %v", attempt, c)
		}
		tr, ok := stored()
		backoff := int64(timerBackoffMin) << (attempt - 1)
		if !ok || tr.attempts != uint32(attempt) || tr.dueMs != h.now+backoff || tr.fired {
			t.Fatalf("after attempt %d: %+v, want due in %d ms", attempt, tr, backoff)
		}
		if d, _ := h.s.DueTimers(h.now + backoff - 1); len(d) != 0 {
			t.Fatalf("attempt %d: due again before its backoff", attempt)
		}
		due = tr.dueMs
	}
	h.now = due
	d, _ := h.s.DueTimers(h.now)
	if len(d) != 1 {
		t.Fatal("last attempt not due")
	}
	h.fired(d[0], wire.CodeBadRequest)
	if _, ok := stored(); ok {
		t.Fatal("a dead-lettered timer is still stored")
	}
	rows, total, err := h.s.DLQ(wire.DefaultTenant, DLQFilter{Offset: -1}, 0, 10)
	if err != nil || total != 1 || rows[0].Group != wire.TimerDLQGroup || rows[0].Queue != "q" || rows[0].RetryCount != wire.TimerMaxFireAttempts {
		t.Fatalf("dlq: %v %d %+v", err, total, rows)
	}
	if d, _ := h.s.DueTimers(h.now + 24*3600*1000); len(d) != 0 || h.s.NextTimerMs() != 0 {
		t.Fatal("nothing is left to fire")
	}
}
