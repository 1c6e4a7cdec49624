package kafka

import (
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// clip shortens client-chosen text for a log line: at most n bytes of it,
// cut on a rune boundary, then its full size.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "...(" + strconv.Itoa(len(s)) + " bytes)"
}

// logGate lets one log line through per interval and counts the ones it
// held back, so a flood of events a client can cause (refused logins)
// cannot flood the log.
type logGate struct {
	interval time.Duration
	last     atomic.Int64 // unix nanos of the last line let through
	held     atomic.Int64 // lines held back since
}

// pass reports whether a line may be written now and, if so, how many were
// held back before it.
func (g *logGate) pass(now time.Time) (ok bool, held int64) {
	t := now.UnixNano()
	last := g.last.Load()
	if t-last < int64(g.interval) || !g.last.CompareAndSwap(last, t) {
		g.held.Add(1)
		return false, 0
	}
	return true, g.held.Swap(0)
}
