package storage

import (
	"cmp"
	"slices"
)

// Activity counters. The apply loop counts what every command did to each
// queue (messages pushed, delivered, completed, failed, dead-lettered, and
// commands) in memory, bucketed by minute of the replicated clock, so every
// replica holds the same numbers for what it applied since it opened. They
// are never persisted and never read by the apply loop itself: they cannot
// make replicas diverge, and a restart starts them from zero (Prometheus
// counters do the same). Everything a view can derive from the replicated
// state instead (totals, depth, lag) is derived, not counted.

// statMinutes is how many minutes of history each queue keeps.
const statMinutes = 60

// Activity is a set of counts over some span of time.
type Activity struct {
	Pushed    uint64 // messages appended
	Popped    uint64 // messages delivered by pops (redeliveries included)
	Completed uint64 // messages acknowledged completed (or committed on delivery)
	Failed    uint64 // failed acknowledgments
	DLQ       uint64 // messages dead-lettered
	PushOps   uint64 // push commands
	PopOps    uint64 // pop commands, empty ones included
	AckOps    uint64 // acknowledgment commands
}

// Add adds b into a.
func (a *Activity) Add(b *Activity) {
	a.Pushed += b.Pushed
	a.Popped += b.Popped
	a.Completed += b.Completed
	a.Failed += b.Failed
	a.DLQ += b.DLQ
	a.PushOps += b.PushOps
	a.PopOps += b.PopOps
	a.AckOps += b.AckOps
}

// MinuteActivity is the activity of one minute of the replicated clock.
type MinuteActivity struct {
	StartMs int64
	Activity
}

type minuteSlot struct {
	minute int64 // replicated-clock ms / 60000
	Activity
}

// queueStats is one queue's counters: totals since the store opened and a
// ring of the last statMinutes minutes.
type queueStats struct {
	total   Activity
	minutes [statMinutes]minuteSlot
}

// stats returns q's counters, allocating them at the first activity so idle
// queues (a Kafka cluster may have many) cost nothing.
func (q *queueState) counters() *queueStats {
	if q.stats == nil {
		q.stats = &queueStats{}
	}
	return q.stats
}

// count adds one command's effect to the total and to the minute of nowMs.
func (q *queueState) count(nowMs int64, a Activity) {
	st := q.counters()
	st.total.Add(&a)
	m := nowMs / 60000
	slot := &st.minutes[int(m%statMinutes+statMinutes)%statMinutes]
	if slot.minute != m {
		*slot = minuteSlot{minute: m}
	}
	slot.Add(&a)
}

// series copies the minutes of st within [fromMs, toMs), oldest first.
func (st *queueStats) series(fromMs, toMs int64) []MinuteActivity {
	var out []MinuteActivity
	for _, s := range st.minutes {
		start := s.minute * 60000
		if s.minute == 0 || start+60000 <= fromMs || start >= toMs {
			continue
		}
		out = append(out, MinuteActivity{StartMs: start, Activity: s.Activity})
	}
	slices.SortFunc(out, func(a, b MinuteActivity) int { return cmp.Compare(a.StartMs, b.StartMs) })
	return out
}

// MergeSeries adds b's minutes into a (both sorted), keeping the order.
func MergeSeries(a, b []MinuteActivity) []MinuteActivity {
	out := make([]MinuteActivity, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || (i < len(a) && a[i].StartMs < b[j].StartMs):
			out = append(out, a[i])
			i++
		case i >= len(a) || b[j].StartMs < a[i].StartMs:
			out = append(out, b[j])
			j++
		default:
			m := a[i]
			m.Add(&b[j].Activity)
			out = append(out, m)
			i++
			j++
		}
	}
	return out
}
