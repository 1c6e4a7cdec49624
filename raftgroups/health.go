package raftgroups

import (
	"time"
)

// GroupStatus is one group's raft state as this node sees it.
type GroupStatus struct {
	Group    int
	LeaderID uint64
	Term     uint64
	IsLeader bool
	Applied  uint64
	Commit   uint64
	// QuorumAge is how long ago a ReadIndex last completed: proof that the
	// leader reached a quorum. Negative when it never has.
	QuorumAge time.Duration
	Ready     bool
}

// Status reports every group.
func (h *Host) Status() []GroupStatus {
	out := make([]GroupStatus, 0, len(h.groups))
	now := time.Now().UnixMilli()
	for _, g := range h.groups {
		st := GroupStatus{Group: g.n, Applied: g.store.Applied(), QuorumAge: -1}
		if leader, term, valid, err := g.nh.GetLeaderID(g.shardID); err == nil && valid {
			st.LeaderID, st.Term, st.IsLeader = leader, term, leader == h.cfg.NodeID
		}
		// The log reader knows the commit index as last persisted, which
		// can trail what this node has applied (an idle group saves no new
		// state); whatever is applied is committed.
		st.Commit = st.Applied
		if r, err := g.nh.GetLogReader(g.shardID); err == nil {
			state, _ := r.NodeState()
			st.Commit = max(state.Commit, st.Applied)
		}
		if at := g.quorumAt.Load(); at > 0 {
			st.QuorumAge = time.Duration(now-at) * time.Millisecond
		}
		st.Ready = st.LeaderID != 0 && st.QuorumAge >= 0 && st.QuorumAge <= h.cfg.ReadyQuorum &&
			st.Applied+h.cfg.ReadyLag >= st.Commit
		out = append(out, st)
	}
	return out
}

// SegmentStats is how many record segment files group n's store has on
// this node and their bytes.
func (h *Host) SegmentStats(n int) (files int, bytes int64) {
	if n < 0 || n >= len(h.groups) {
		return 0, 0
	}
	return h.groups[n].store.SegmentStats()
}

// CorruptChunks counts the chunk reads group n's store on this node
// refused because the bytes on disk failed their checksum.
func (h *Host) CorruptChunks(n int) uint64 {
	if n < 0 || n >= len(h.groups) {
		return 0
	}
	return h.groups[n].store.CorruptChunks()
}

// Ready reports whether every group has a leader that recently reached a
// quorum and this node has applied close to the commit index: the /health
// readiness rule of spec §2.18.
func (h *Host) Ready() bool {
	for _, st := range h.Status() {
		if !st.Ready {
			return false
		}
	}
	return len(h.groups) > 0
}

// probeQuorum runs a ReadIndex per group every second. A completed
// ReadIndex means the leader heard a quorum; readiness and follower reads
// depend on it.
func (h *Host) probeQuorum() {
	defer h.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for _, g := range h.groups {
			rs, err := g.nh.ReadIndex(g.shardID, 2*time.Second)
			if err != nil {
				continue
			}
			select {
			case r := <-rs.ResultC():
				if r.Completed() {
					g.quorumAt.Store(time.Now().UnixMilli())
				}
			case <-h.stop:
				rs.Release()
				return
			}
			rs.Release()
		}
		select {
		case <-tick.C:
		case <-h.stop:
			return
		}
	}
}
