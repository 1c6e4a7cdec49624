package raftgroups

import (
	"context"
	"sync"
	"time"

	"github.com/queen-mq/queen/raftgroups/clock"
)

// clockBootWait bounds how long a booting node waits to compare its clock
// with a majority of the cluster before it proposes anything. Until then
// its clock is its own wall clock, which may be far off; a cluster without
// a reachable majority cannot commit anyway.
const clockBootWait = 10 * time.Second

// bootClock compares this node's clock with its peers' until a majority
// answered, so the first entry it proposes is already stamped with a
// bounded clock, or until clockBootWait.
func (h *Host) bootClock() {
	deadline := time.Now().Add(clockBootWait)
	for !h.syncClockRound() {
		if time.Now().After(deadline) {
			h.log.Warn("clock: could not compare this node's clock with a majority of the cluster at boot; using its own until it can",
				"waited", clockBootWait)
			return
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-h.stop:
			return
		}
	}
}

func (h *Host) syncClock() { h.syncClockRound() }

// syncClockRound asks every peer for its clock over group 0's raft
// listener (behind the raft token) and hands the offsets to the clock; it
// reports whether a majority answered. An answer whose round trip took
// longer than the max skew is not used: its error (half the round trip)
// could be as large as what it is meant to detect.
func (h *Host) syncClockRound() bool {
	tr := h.groups[0].tf.Transport()
	if tr == nil {
		return false
	}
	skew := h.clock.MaxSkew()
	ctx, cancel := context.WithTimeout(h.stopped, max(skew, time.Second))
	defer cancel()
	var mu sync.Mutex
	var offsets []int64
	var wg sync.WaitGroup
	for _, p := range h.cfg.Peers {
		if p.ID == h.cfg.NodeID {
			continue
		}
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			start := time.Now()
			before := h.clock.NowMs()
			peer, err := tr.PeerTime(ctx, addr)
			rtt := time.Since(start)
			if err != nil || rtt > skew {
				return
			}
			mu.Lock()
			offsets = append(offsets, peer-(before+rtt.Milliseconds()/2))
			mu.Unlock()
		}(h.groups[0].members[p.ID])
	}
	wg.Wait()
	return h.clock.Sync(offsets, len(h.cfg.Peers))
}

// NowMs is this node's clock in unix milliseconds: what it stamps entries
// with, and what replicated times (lease expiries, timers, deadlines)
// should be compared with rather than the wall clock.
func (h *Host) NowMs() int64 { return h.clock.NowMs() }

// ClockStats reports this node's clock (for metrics).
func (h *Host) ClockStats() clock.Stats { return h.clock.Stats() }
