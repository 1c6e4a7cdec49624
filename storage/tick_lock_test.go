package storage

import (
	"bytes"
	"runtime"
	"testing"
	"time"
)

// Close takes the database lock, then the store's lock (to write its load
// image); TickDue, the leader's question whether a tick is due, must take
// them in the same order. It took the store's lock first and then, in the
// KV, timer and trace sweepers' checks, the database lock: with Close
// between the two, each waited for the other for ever (a raftgroups test
// hung 15 minutes in a CI run, its engine loops stopped in firstKey and
// Close in its lock).
func TestTickDueTakesTheLocksInClosesOrder(t *testing.T) {
	h := newHarness(t)
	s := h.s
	s.dbMu.Lock() // Close's first lock
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		s.TickDue(h.now)
	}()
	waitBlockedIn(t, "storage.(*Store).TickDue")
	// Close's second lock: free unless TickDue holds the store's lock
	// while it waits for the database's.
	locked := make(chan struct{})
	go func() {
		s.mu.Lock()
		close(locked)
	}()
	select {
	case <-locked:
		s.mu.Unlock()
		s.dbMu.Unlock()
	case <-time.After(5 * time.Second):
		s.dbMu.Unlock() // let TickDue finish, then the goroutine above
		<-locked
		s.mu.Unlock()
		t.Fatal("TickDue holds the store's lock while it waits for the database lock, which Close holds while it waits for the store's: a deadlock")
	}
	<-ticked
}

// waitBlockedIn waits until a goroutine with fn on its stack is blocked on
// a lock.
func waitBlockedIn(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		n := runtime.Stack(buf, true)
		for _, g := range bytes.Split(buf[:n], []byte("\n\n")) {
			if bytes.Contains(g, []byte("[sync.RWMutex.RLock")) && bytes.Contains(g, []byte(fn)) {
				return
			}
		}
		runtime.Gosched()
	}
	t.Fatalf("no goroutine blocked on a lock in %s", fn)
}
