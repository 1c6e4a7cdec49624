package raftgroups

import "sync"

// inFlightBytes bounds the bytes of a group's entries proposed and not yet
// answered. Every entry in flight is held several times over (the
// proposer's buffer, dragonboat's copy in its log and apply pipeline), so
// the bytes in flight, not their count, are what fills the heap: eight
// entries of several MiB each kept a node at its memory budget and the
// collector running without pause (docs/benchmarks.md, "In-flight bytes").
// One entry is always let through, however large, so an entry up to
// QUEEN_RAFT_ENTRY_MAX_BYTES still goes.
type inFlightBytes struct {
	mu    sync.Mutex
	used  int
	limit int
	// freed wakes the one goroutine that takes (the proposer's run loop)
	// when bytes are given back.
	freed chan struct{}
}

func newInFlightBytes(limit int) *inFlightBytes {
	return &inFlightBytes{limit: limit, freed: make(chan struct{}, 1)}
}

// take waits until n more bytes fit (or nothing is in flight) and counts
// them; false when stop closes first. One goroutine takes.
func (f *inFlightBytes) take(n int, stop <-chan struct{}) bool {
	for {
		f.mu.Lock()
		if f.used == 0 || f.used+n <= f.limit {
			f.used += n
			f.mu.Unlock()
			return true
		}
		f.mu.Unlock()
		select {
		case <-f.freed:
		case <-stop:
			return false
		}
	}
}

// give returns n bytes taken before.
func (f *inFlightBytes) give(n int) {
	f.mu.Lock()
	f.used -= n
	f.mu.Unlock()
	select {
	case f.freed <- struct{}{}:
	default:
	}
}
