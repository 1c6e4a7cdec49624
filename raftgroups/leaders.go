package raftgroups

import (
	"slices"
	"time"
)

// preferredLeader is the node group n should be led by: groups spread over
// the sorted voters, group n on voter n mod size (spec decision 4).
func (h *Host) preferredLeader(n int) uint64 {
	ids := h.voterIDs()
	if len(ids) == 0 {
		return 0
	}
	return ids[n%len(ids)]
}

// balanceLeaders moves a group's leadership to its preferred node whenever
// this node leads it and the preferred node answered recently. A transfer to
// a node that is down would only stall the group, hence the contact check.
// It runs every 5 s, and not while this node runs a membership change.
func (h *Host) balanceLeaders() {
	if len(h.voterIDs()) < 2 || h.changing.Load() > 0 {
		return
	}
	for _, g := range h.groups {
		want := h.preferredLeader(g.n)
		if !h.leads(g) || want == h.cfg.NodeID || want == 0 {
			continue
		}
		if t := g.tf.Transport(); t == nil || time.Since(t.LastContact(g.addr(want))) > 3*time.Second {
			continue
		}
		if err := g.nh.RequestLeaderTransfer(g.shardID, want); err == nil {
			h.log.Info("raft: moving leadership to the preferred node", "group", g.n, "to", want)
		}
	}
}

// leads says whether this node leads group g.
func (h *Host) leads(g *group) bool {
	leader, _, valid, err := g.nh.GetLeaderID(g.shardID)
	return err == nil && valid && leader == h.cfg.NodeID
}

// every runs f each interval until the host stops; the host's WaitGroup
// owns the goroutine it runs in.
func (h *Host) every(interval time.Duration, f func()) {
	defer h.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			f()
		}
	}
}

// HandOff is the raft half of a rolling restart: it transfers every group
// this node leads to a reachable peer and returns once none is led here,
// or when budget runs out (it then returns the groups still led here).
// Transfers are asked for all at once and asked again, of another peer,
// when one has not taken effect within an election timeout: a peer that
// lags or misses the request would otherwise leave the group to an
// election after this node stops, which clients see as a pause of a few
// seconds. Leadership a peer moves back here meanwhile (its preferred node
// may be this one) is handed away again. Later calls, Close's among them,
// repeat the check, so HandOff may run early in a shutdown.
func (h *Host) HandOff(budget time.Duration) []int {
	if len(h.voterIDs()) < 2 {
		return nil
	}
	deadline := time.Now().Add(budget)
	retry := max(h.ElectionTimeout(), 200*time.Millisecond)
	asked := map[int]time.Time{} // group → when a transfer was last asked for
	tries := map[int]int{}       // group → transfers asked for
	start := time.Now()
	for {
		var led []int
		for _, g := range h.groups {
			if !h.leads(g) {
				if _, ok := asked[g.n]; ok {
					h.log.Info("raft: leadership handed off", "group", g.n, "ms", time.Since(start).Milliseconds())
					delete(asked, g.n)
				}
				continue
			}
			led = append(led, g.n)
			if at, ok := asked[g.n]; ok && time.Since(at) < retry {
				continue
			}
			to := h.handOffTarget(g, tries[g.n])
			if to == 0 {
				h.log.Warn("raft: no reachable peer to hand leadership to", "group", g.n)
				continue
			}
			asked[g.n] = time.Now()
			tries[g.n]++
			if err := g.nh.RequestLeaderTransfer(g.shardID, to); err != nil {
				h.log.Warn("raft: leadership hand-off refused", "group", g.n, "to", to, "err", err)
			}
		}
		if len(led) == 0 || !time.Now().Before(deadline) {
			if len(led) > 0 {
				h.log.Warn("raft: groups still led here when the hand-off budget ran out", "groups", led)
			}
			return led
		}
		time.Sleep(10 * time.Millisecond) // waiting on dragonboat, which has no leadership channel
	}
}

// handOffTarget picks the peer for the try-th hand-off of g: the group's
// preferred node first, then the other peers that answered within the
// last few seconds in turn, so a retry goes elsewhere.
func (h *Host) handOffTarget(g *group, try int) uint64 {
	t := g.tf.Transport()
	if t == nil {
		return 0
	}
	recent := func(id uint64) bool { return time.Since(t.LastContact(g.addr(id))) < 3*time.Second }
	var cands []uint64
	if want := h.preferredLeader(g.n); want != h.cfg.NodeID && recent(want) {
		cands = append(cands, want)
	}
	for _, id := range h.voterIDs() {
		if id != h.cfg.NodeID && recent(id) && !slices.Contains(cands, id) {
			cands = append(cands, id)
		}
	}
	if len(cands) == 0 {
		return 0
	}
	return cands[try%len(cands)]
}
