package api

import (
	"context"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
)

// A standby cluster (QUEEN_STANDBY_OF; docs/standby.md) answers every write
// with 503 "standby" (errors.go) while it follows its source; reads and
// views work. POST /api/v1/system/standby/promote ends following.

// The promote route is the cluster's to alter, as membership changes are.
func init() { aclRules["POST /api/v1/system/standby/promote"] = clusterAlter }

// standbyPromote is POST /api/v1/system/standby/promote[?timeoutMs=]: every
// raft group stops following at the last source entry it applied and the
// cluster takes writes; the answer names those entries and the source's
// open Kafka transactions it aborted. 409 "not_standby" on a cluster that
// follows nothing. Any node serves it: the promotion goes through each
// group's log.
func (s *Server) standbyPromote(ctx *fasthttp.RequestCtx) error {
	ms, err := intArg(ctx, "timeoutMs", 60000, 1, 600000)
	if err != nil {
		return err
	}
	c, cancel := context.WithTimeout(s.base, time.Duration(ms)*time.Millisecond)
	defer cancel()
	res, err := s.engine.PromoteStandby(c)
	if err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, struct {
		Promoted bool `json:"promoted"`
		raftgroups.PromoteResult
	}{true, res})
	return nil
}
