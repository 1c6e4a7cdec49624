package api

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
)

type raftHealth struct {
	Role           string `json:"role"`
	Leader         uint64 `json:"leader"`
	Term           uint64 `json:"term"`
	Applied        uint64 `json:"applied"`
	Commit         uint64 `json:"commit"`
	Lag            uint64 `json:"lag"`
	StorageReady   bool   `json:"storageReady"`
	ClusterVersion int    `json:"clusterVersion"`
	QuorumAckMs    int64  `json:"quorumAckMs"`
	Group          int    `json:"group"`
}

type healthAnswer struct {
	Status  string       `json:"status"`
	Engine  string       `json:"engine"`
	Version string       `json:"version"`
	Raft    raftHealth   `json:"raft"`
	Groups  []raftHealth `json:"groups"`
	// StorageFull: the disk is above QUEEN_RAFT_DISK_HIGH_PCT and writes
	// that add data answer 507. The node stays healthy: it still serves
	// reads, pops and acks, which is how the backlog drains.
	StorageFull bool `json:"storageFull"`
	// Format is the raft format gate: the formats this build applies and
	// each group's active one (a rolling upgrade is done when every group
	// is at the newest; docs/operations.md, "Upgrades").
	Format raftgroups.FormatStatus `json:"format"`
	// Standby is a standby's follow state (standby.go); absent on a
	// cluster that follows nothing.
	Standby *raftgroups.StandbyStatus `json:"standby,omitempty"`
}

// clusterVersion is the feature level this build implements (spec §4.6).
const clusterVersion = 7

// health is GET /health (spec §2.18): 200 once every raft group has a leader
// that recently heard a quorum and this node has applied close to its
// commit index; 503 while the node is settling.
func (s *Server) health(ctx *fasthttp.RequestCtx) error {
	ans := healthAnswer{Status: "healthy", Engine: "raft", Version: s.cfg.Version, Groups: s.raftHealth(),
		StorageFull: s.engine.Host().StorageFull(), Format: s.engine.Host().Format(), Standby: s.engine.Host().Standby()}
	for _, st := range s.engine.Host().Status() {
		if !st.Ready {
			ans.Status = "unhealthy"
		}
	}
	if len(ans.Groups) > 0 {
		ans.Raft = ans.Groups[0]
	}
	status := http.StatusOK
	if ans.Status != "healthy" {
		status = http.StatusServiceUnavailable
	}
	writeJSON(ctx, status, ans)
	return nil
}

// raftHealth is every group's raft state as /health and /metrics show it.
func (s *Server) raftHealth() []raftHealth {
	var out []raftHealth
	for _, st := range s.engine.Host().Status() {
		h := raftHealth{
			Role: "follower", Leader: st.LeaderID, Term: st.Term, Applied: st.Applied, Commit: st.Commit,
			StorageReady: true, ClusterVersion: clusterVersion, QuorumAckMs: st.QuorumAge.Milliseconds(), Group: st.Group,
		}
		if st.IsLeader {
			h.Role = "leader"
		} else if st.LeaderID == 0 {
			h.Role = "candidate"
		}
		if st.Commit > st.Applied {
			h.Lag = st.Commit - st.Applied
		}
		out = append(out, h)
	}
	return out
}
