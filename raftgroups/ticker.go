package raftgroups

import (
	"context"
	"time"

	"github.com/queen-mq/queen/wire"
)

// tickEvery is how often a leader asks its store whether time-driven work
// is due (spec QUEEN_RAFT_TIMER_TICK_MS default).
const tickEvery = 50 * time.Millisecond

// proposeTicks proposes a tick entry for every group this node leads whose
// store has time-driven work due, at most one in flight per group. Idle
// groups propose nothing, so ticks cost no fsync when there is no work.
func (h *Host) proposeTicks() {
	defer h.wg.Done()
	t := time.NewTicker(tickEvery)
	defer t.Stop()
	inFlight := make([]bool, len(h.groups))
	done := make(chan int, len(h.groups))
	for {
		select {
		case <-h.stop:
			return // in-flight ticks finish on their own: done is buffered
		case n := <-done:
			inFlight[n] = false
			continue
		case <-t.C:
		}
		now := h.clock.NowMs()
		for _, g := range h.groups {
			if inFlight[g.n] || !g.store.TickDue(now) {
				continue
			}
			if !h.leads(g) || h.following(g) { // a standby's ticks come from its source
				continue
			}
			inFlight[g.n] = true
			h.wg.Add(1)
			go func(g *group) {
				defer h.wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if _, err := g.prop.submit(ctx, []wire.Command{g.store.TickCommand()}); err != nil {
					h.log.Debug("raft: tick not applied", "group", g.n, "err", err)
				}
				done <- g.n
			}(g)
		}
	}
}
