package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
)

// Membership routes (spec §2.17, §4.4): operator actions on every raft
// group of the cluster, so operator routes (authorizeOperator refuses
// requests scoped to a tenant and tenants' tokens). A change may be sent
// to any node: it is relayed over the node channel (node.go) to group 0's
// leader, whose commit index is the reference for the promote lag check
// and whose membership view is current; when the leader cannot be reached
// it is served here, and dragonboat forwards the config changes to the
// leader itself.

// forward relays a membership request to group 0's leader and copies its
// answer; false means serve it here. A request a peer relayed is served
// where it lands, so it never bounces during a leader change.
func (s *Server) forward(ctx *fasthttp.RequestCtx, timeout time.Duration) bool {
	if fromPeer(ctx) {
		return false
	}
	leader := s.engine.Host().MembershipLeader()
	if leader == 0 {
		return false
	}
	if _, err := s.relay(ctx, leader, nil, timeout+5*time.Second); err != nil {
		s.log.Warn("http: membership request not forwarded to the leader; serving it here", "leader", leader, "err", err)
		return false
	}
	return true
}

type membershipAnswer struct {
	Membership raftgroups.MembershipView `json:"membership"`
}

type learnerBody struct {
	ID   uint64 `json:"id"`
	Raft string `json:"raft"`
	HTTP string `json:"http"`
}

type promoteBody struct {
	IDs   []uint64 `json:"ids"`
	Force bool     `json:"force"`
}

type votersBody struct {
	Voters []uint64 `json:"voters"`
	Force  bool     `json:"force"`
}

// membershipCtx bounds the request by ?timeoutMs= (default 30 s).
func (s *Server) membershipCtx(ctx *fasthttp.RequestCtx) (context.Context, context.CancelFunc, error) {
	ms, err := intArg(ctx, "timeoutMs", 30000, 1, 600000)
	if err != nil {
		return nil, nil, err
	}
	timeout := time.Duration(ms) * time.Millisecond
	if s.forward(ctx, timeout) {
		return nil, nil, errForwarded
	}
	c, cancel := context.WithTimeout(s.base, timeout)
	return c, cancel, nil
}

// errForwarded: the leader answered the request; nothing more to write.
var errForwarded = errors.New("forwarded")

func (s *Server) membershipGet(ctx *fasthttp.RequestCtx) error {
	c, cancel, err := s.membershipCtx(ctx)
	if err != nil {
		return ignoreForwarded(err)
	}
	defer cancel()
	writeJSON(ctx, http.StatusOK, membershipAnswer{Membership: s.engine.Host().Membership(c)})
	return nil
}

func (s *Server) membershipLearner(ctx *fasthttp.RequestCtx) error {
	c, cancel, err := s.membershipCtx(ctx)
	if err != nil {
		return ignoreForwarded(err)
	}
	defer cancel()
	var b learnerBody
	if err := readJSON(ctx, &b); err != nil {
		return err
	}
	return s.membershipDone(ctx, c, s.engine.Host().AddLearner(c, b.ID, b.Raft, b.HTTP))
}

func (s *Server) membershipPromote(ctx *fasthttp.RequestCtx) error {
	c, cancel, err := s.membershipCtx(ctx)
	if err != nil {
		return ignoreForwarded(err)
	}
	defer cancel()
	var b promoteBody
	if err := readJSON(ctx, &b); err != nil {
		return err
	}
	return s.membershipDone(ctx, c, s.engine.Host().Promote(c, b.IDs, b.Force, s.cfg.PromoteMaxLag))
}

func (s *Server) membershipVoters(ctx *fasthttp.RequestCtx) error {
	c, cancel, err := s.membershipCtx(ctx)
	if err != nil {
		return ignoreForwarded(err)
	}
	defer cancel()
	var b votersBody
	if err := readJSON(ctx, &b); err != nil {
		return err
	}
	return s.membershipDone(ctx, c, s.engine.Host().SetVoters(c, b.Voters, b.Force, s.cfg.PromoteMaxLag))
}

func (s *Server) membershipRemove(ctx *fasthttp.RequestCtx) error {
	c, cancel, err := s.membershipCtx(ctx)
	if err != nil {
		return ignoreForwarded(err)
	}
	defer cancel()
	id, perr := strconv.ParseUint(pathArg(ctx, "id"), 10, 64)
	if perr != nil || id == 0 {
		return badRequest("id must be a positive node id")
	}
	force := strArg(ctx, "force") == "true"
	return s.membershipDone(ctx, c, s.engine.Host().Remove(c, id, force))
}

func ignoreForwarded(err error) error {
	if errors.Is(err, errForwarded) {
		return nil
	}
	return err
}

// membershipDone answers a change: the membership after it, or the error.
func (s *Server) membershipDone(ctx *fasthttp.RequestCtx, c context.Context, err error) error {
	if err != nil {
		// An operator retrying a change that never lands reads why here.
		s.log.Warn("http: membership change not made", "path", string(ctx.Path()), "err", err)
		return membershipErr(err)
	}
	writeJSON(ctx, http.StatusOK, struct {
		OK         bool                      `json:"ok"`
		Membership raftgroups.MembershipView `json:"membership"`
	}{true, s.engine.Host().Membership(c)})
	return nil
}

func membershipErr(err error) error {
	conflict := func(code string) error { return &apiError{http.StatusConflict, code, err.Error()} }
	switch {
	case errors.Is(err, raftgroups.ErrInFlight):
		return conflict("in_flight")
	case errors.Is(err, raftgroups.ErrNoQuorum):
		return conflict("no_quorum")
	case errors.Is(err, raftgroups.ErrLastVoter):
		return conflict("last_voter")
	case errors.Is(err, raftgroups.ErrLearnerBehind):
		return conflict("learner_behind")
	case errors.Is(err, raftgroups.ErrNotMember):
		return notFound(err.Error())
	case errors.Is(err, raftgroups.ErrBadMember):
		return badRequest(err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{http.StatusConflict, "no_quorum", "timed out: " + err.Error()}
	}
	return err
}
