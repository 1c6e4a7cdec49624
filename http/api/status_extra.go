package api

import (
	"net/http"
	"time"

	"github.com/valyala/fasthttp"
)

// Routes Queen serves over PostgreSQL-era machinery that this engine has
// raft equivalents for (docs/http-api.md, "Buffers, shared state and the
// storage engine's figures"):
//   - Queen's file buffer (pushes spooled while the database is away or in
//     maintenance) is the maintenance hold here (maintenance_hold.go): a
//     push is never spooled for an unreachable database, since raft either
//     commits it or refuses it.
//   - Queen's shared state (per-instance caches kept in step over UDP) is
//     each node's applied replica of the raft groups: the same state on
//     every node, ordered by the log, not gossip.
//   - Queen's PostgreSQL statistics are the storage engine's: raft groups
//     and their Pebble stores.

// statusBuffers is GET /api/v1/status/buffers, in Queen's shape: pending is
// what the maintenance hold still has to deliver; dbHealthy says every raft
// group of this node is ready.
func (s *Server) statusBuffers(ctx *fasthttp.RequestCtx) error {
	if err := clusterWide(ctx); err != nil {
		return err
	}
	st := s.holdStats()
	failed := 0
	if !st.Healthy {
		failed = 1
	}
	writeJSON(ctx, http.StatusOK, map[string]any{
		"pending": st.Pending, "failed": failed, "dbHealthy": s.groupsReady(), "worker": 0,
		"note": "no file buffer: pushes commit through raft; pending counts the maintenance hold",
	})
	return nil
}

// clusterWide refuses a request scoped to a tenant (or a tenant's token)
// a view of the whole cluster, as the proxy classes these routes operator:
// a tenant sees only its own data.
func clusterWide(ctx *fasthttp.RequestCtx) error {
	p, hasToken := principalOf(ctx)
	return notOperator(ctx, p, hasToken)
}

// groupsReady says whether every raft group of this node has a leader, a
// recent quorum and has applied what is committed.
func (s *Server) groupsReady() bool {
	for _, g := range s.engine.Host().Status() {
		if !g.Ready {
			return false
		}
	}
	return true
}

// statusQueueMessages is GET /api/v1/status/queues/:queue/messages
// (limit default 50, offset): the queue's messages, newest first, as GET
// /api/v1/messages?queue= lists them, over all time unless from/to say
// otherwise.
func (s *Server) statusQueueMessages(ctx *fasthttp.RequestCtx) error {
	queue := pathArg(ctx, "queue")
	if err := checkNameSize("queue", queue); err != nil {
		return err
	}
	args := ctx.QueryArgs()
	args.Set("queue", queue)
	if len(args.Peek("limit")) == 0 {
		args.Set("limit", "50")
	}
	if len(args.Peek("from")) == 0 {
		args.Set("from", time.UnixMilli(0).UTC().Format(time.RFC3339))
	}
	return s.listMessages(ctx)
}

// sharedState is GET /api/v1/system/shared-state: Queen's cache-sync
// statistics, answered with what keeps this engine's nodes in step, the
// raft groups as this node applies them, and the replicated switches.
func (s *Server) sharedState(ctx *fasthttp.RequestCtx) error {
	groups := make([]map[string]any, 0)
	for _, g := range s.engine.Host().Status() {
		groups = append(groups, map[string]any{"group": g.Group, "leader": g.LeaderID, "isLeader": g.IsLeader,
			"term": g.Term, "applied": g.Applied, "commit": g.Commit, "ready": g.Ready})
	}
	eph, _ := s.storedEphSwitch()
	writeJSON(ctx, http.StatusOK, map[string]any{
		"enabled": true, "mechanism": "raft", "nodeId": s.engine.NodeID(),
		"maintenanceMode": s.storedSwitch(maintPushKey), "popMaintenanceMode": s.storedSwitch(maintPopKey),
		"ephemeralEnabled": eph.Enabled, "groups": groups,
	})
	return nil
}

// storageStats is GET /api/v1/analytics/postgres-stats, the route
// `queenctl analytics postgres` calls: there is no PostgreSQL, so it
// answers the storage engine's own figures (engine "raft+pebble") per raft
// group, and the data directory's size.
func (s *Server) storageStats(ctx *fasthttp.RequestCtx) error {
	if err := clusterWide(ctx); err != nil {
		return err
	}
	h := s.engine.Host()
	groups := make([]map[string]any, 0)
	var files int
	var bytes int64
	for _, g := range h.Status() {
		f, b := h.SegmentStats(g.Group)
		files += f
		bytes += b
		groups = append(groups, map[string]any{"group": g.Group, "applied": g.Applied, "commit": g.Commit,
			"segmentFiles": f, "segmentBytes": b, "corruptChunks": h.CorruptChunks(g.Group), "isLeader": g.IsLeader})
	}
	ans := map[string]any{"engine": "raft+pebble", "postgres": false, "groups": groups,
		"totals": map[string]any{"segmentFiles": files, "segmentBytes": bytes}}
	if du, err := h.DiskUse(); err == nil {
		ans["database"] = map[string]any{"sizeBytes": du.DirBytes, "fsSizeBytes": du.FSSizeBytes, "fsAvailBytes": du.FSAvailBytes}
	}
	writeJSON(ctx, http.StatusOK, ans)
	return nil
}
