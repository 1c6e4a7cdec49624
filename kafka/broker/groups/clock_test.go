package groups

import (
	"sync"
	"time"
)

// fakeClock runs timers only when a test advances it, in deadline order,
// on the test's goroutine.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Duration
	timers []*fakeTimer
}

type fakeTimer struct {
	clock   *fakeClock
	at      time.Duration
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{clock: c, at: c.now + d, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves time forward by d, firing every timer due on the way
// (including timers those timers schedule).
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now + d
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *fakeTimer
		live := c.timers[:0]
		for _, t := range c.timers {
			if t.stopped {
				continue
			}
			live = append(live, t)
			if t.at <= target && (next == nil || t.at < next.at) {
				next = t
			}
		}
		c.timers = live
		if next == nil {
			c.now = target
			c.mu.Unlock()
			return
		}
		c.now = next.at
		next.stopped = true
		c.mu.Unlock()
		next.f()
	}
}
