package api

import (
	"errors"
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

// Partition moves (docs/placement.md, "Moving a partition"): an operator
// moves a queue's partition to another of the tenant's raft groups, online,
// and follows its progress. Kafka's AlterPartitionReassignments starts the
// same moves.

// moveBody is POST /api/v1/system/partitions/moves: the partition by queue
// and name (or index), and the target group. Cancel cancels the
// partition's move instead, while it still copies.
type moveBody struct {
	Queue     string  `json:"queue"`
	Partition string  `json:"partition"`
	Index     *uint32 `json:"index"`
	Group     *int    `json:"group"`
	Cancel    bool    `json:"cancel"`
}

// moveView is one move as the routes answer it.
type moveView struct {
	Queue     string `json:"queue"`
	Partition string `json:"partition"`
	Index     uint32 `json:"index"`
	From      int    `json:"from"`
	To        int    `json:"to"`
	State     string `json:"state"`
	Cancel    bool   `json:"cancelRequested,omitempty"`
	Copied    uint64 `json:"copiedOffset"` // offsets below it are in the target
	End       uint64 `json:"endOffset"`    // the source's end when last seen (final once sealed)
	Reason    string `json:"reason,omitempty"`
	StartedMs int64  `json:"startedMs"`
	UpdatedMs int64  `json:"updatedMs"`
}

func (s *Server) moveViewOf(tenant wire.ID, m wire.MoveInfo) moveView {
	v := moveView{Queue: m.Queue, Index: m.Index, From: int(m.From), To: int(m.To), State: wire.MoveStateName(m.State),
		Cancel: m.Cancel, Copied: m.Copied, End: m.End, Reason: m.Reason, StartedMs: m.StartedMs, UpdatedMs: m.UpdatedMs}
	if d, ok := s.engine.DirByIndex(tenant, m.Queue, m.Index); ok {
		v.Partition = d.Name
	}
	return v
}

// moves is GET /api/v1/system/partitions/moves[?queue=]: the tenant's
// moves, under way and ended, with their progress.
func (s *Server) moves(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	queue := strArg(ctx, "queue")
	out := []moveView{}
	for _, m := range s.engine.Moves(tenant) {
		if queue == "" || m.Queue == queue {
			out = append(out, s.moveViewOf(tenant, m))
		}
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"moves": out})
	return nil
}

// startMove is POST /api/v1/system/partitions/moves: 202 with the move's
// record once it is recorded (the home's leader carries it out; GET
// follows it).
func (s *Server) startMove(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	var b moveBody
	if err := readJSON(ctx, &b); err != nil {
		return err
	}
	if err := checkName("queue", b.Queue); err != nil {
		return err
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.view(tenant); err != nil { // a queue created through another node
		return err
	}
	var index uint32
	switch {
	case b.Index != nil:
		index = *b.Index
	case b.Partition != "":
		d, ok := s.engine.DirByName(tenant, b.Queue, b.Partition)
		if !ok {
			return wire.ErrPartitionNotFound
		}
		index = d.Index
	default:
		return badRequest("name the partition: partition or index")
	}
	var m wire.MoveInfo
	if b.Cancel {
		m, err = s.engine.CancelMove(rctx, tenant, b.Queue, index)
	} else {
		if b.Group == nil {
			return badRequest("group: the raft group to move the partition to")
		}
		m, err = s.engine.StartMove(rctx, tenant, b.Queue, index, *b.Group)
	}
	if err != nil {
		return moveError(err)
	}
	writeJSON(ctx, http.StatusAccepted, s.moveViewOf(tenant, m))
	return nil
}

// moveError gives a move's refusals their statuses.
func moveError(err error) error {
	switch {
	case errors.Is(err, raftgroups.ErrMoveTarget):
		return &apiError{http.StatusBadRequest, "bad_request", err.Error()}
	case errors.Is(err, raftgroups.ErrMoveInProgress), errors.Is(err, raftgroups.ErrMoveTooLate):
		return &apiError{http.StatusConflict, "conflict", err.Error()}
	case errors.Is(err, raftgroups.ErrMoveFormat):
		return &apiError{http.StatusConflict, "format_too_old", err.Error()}
	}
	return err
}
