package raftgroups

import (
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
// It runs every 5 s.
func (h *Host) balanceLeaders() {
	if len(h.voterIDs()) < 2 {
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

// handOffLeadership transfers every group this node leads to a reachable
// peer and waits (up to budget in total) for each to move, so clients see a
// leader change instead of an election timeout.
func (h *Host) handOffLeadership(budget time.Duration) {
	if len(h.voterIDs()) < 2 {
		return
	}
	deadline := time.Now().Add(budget)
	for _, g := range h.groups {
		if !h.leads(g) {
			continue
		}
		to := h.handOffTarget(g)
		if to == 0 {
			h.log.Warn("raft: no reachable peer to hand leadership to", "group", g.n)
			continue
		}
		start := time.Now()
		if err := g.nh.RequestLeaderTransfer(g.shardID, to); err != nil {
			h.log.Warn("raft: leadership hand-off refused", "group", g.n, "err", err)
			continue
		}
		for time.Now().Before(deadline) {
			if l, _, ok, _ := g.nh.GetLeaderID(g.shardID); ok && l != h.cfg.NodeID {
				h.log.Info("rsm: raft: leadership handed off", "group", g.n, "to", l, "ms", time.Since(start).Milliseconds())
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// handOffTarget prefers the group's preferred node, else any peer that
// answered within the last few seconds.
func (h *Host) handOffTarget(g *group) uint64 {
	t := g.tf.Transport()
	if t == nil {
		return 0
	}
	recent := func(id uint64) bool { return time.Since(t.LastContact(g.addr(id))) < 3*time.Second }
	if want := h.preferredLeader(g.n); want != h.cfg.NodeID && recent(want) {
		return want
	}
	for _, id := range h.voterIDs() {
		if id != h.cfg.NodeID && recent(id) {
			return id
		}
	}
	return 0
}
