// Package logbound keeps what clients can make a node log bounded: a
// prefix of client-chosen text (Clip) and at most one line per interval
// with a count of the ones held back (Gate). The Kafka port logs refused
// logins through it and the proxy port the requests it cannot read.
package logbound

import (
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Clip shortens client-chosen text for a log line: at most n bytes of it,
// cut on a rune boundary, then its full size.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "...(" + strconv.Itoa(len(s)) + " bytes)"
}

// Gate lets one log line through per Interval and counts the ones it held
// back, so a flood of events a client can cause (refused logins, requests
// that cannot be read) cannot flood the log.
type Gate struct {
	Interval time.Duration
	last     atomic.Int64 // unix nanos of the last line let through
	held     atomic.Int64 // lines held back since
}

// Pass reports whether a line may be written now and, if so, how many were
// held back before it.
func (g *Gate) Pass(now time.Time) (ok bool, held int64) {
	t := now.UnixNano()
	last := g.last.Load()
	if t-last < int64(g.Interval) || !g.last.CompareAndSwap(last, t) {
		g.held.Add(1)
		return false, 0
	}
	return true, g.held.Swap(0)
}
