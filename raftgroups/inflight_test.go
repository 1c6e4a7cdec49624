package raftgroups

import (
	"testing"
	"time"
)

// Entries wait while the bytes in flight would pass the bound, and one
// entry larger than the bound alone still goes.
func TestInFlightBytesBoundsWhatIsProposed(t *testing.T) {
	f := newInFlightBytes(10)
	stop := make(chan struct{})
	if !f.take(30, stop) {
		t.Fatal("an entry larger than the bound, with nothing in flight, must go")
	}
	took := make(chan bool, 1)
	go func() { took <- f.take(4, stop) }()
	select {
	case <-took:
		t.Fatal("a second entry went while the first held more than the bound")
	case <-time.After(50 * time.Millisecond):
	}
	f.give(30)
	if ok := <-took; !ok {
		t.Fatal("the waiting entry was refused once bytes were given back")
	}
	if !f.take(6, stop) {
		t.Fatal("6 more bytes fit under 10 with 4 in flight")
	}
	go func() { took <- f.take(1, stop) }()
	close(stop)
	if ok := <-took; ok {
		t.Fatal("a take still waiting when the proposer stops must give up")
	}
}

func TestInFlightBytesFollowsTheMemoryBudget(t *testing.T) {
	for _, c := range []struct {
		budget int64
		groups int
		want   int
	}{
		{0, 2, 16 << 20},
		{1 << 30, 2, 16 << 20},
		{1 << 30, 16, 2 << 20},
		{128 << 20, 16, 1 << 20},
		{8 << 30, 2, 16 << 20},
	} {
		if got := InFlightBytes(c.budget, c.groups); got != c.want {
			t.Errorf("InFlightBytes(%d MiB, %d groups) = %d, want %d", c.budget>>20, c.groups, got, c.want)
		}
	}
}
