package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Traces (spec §2.10): event records per message, found by message or by
// name, kept QUEEN_RAFT_TRACE_RETENTION_S.

// maxTraceKeyBytes is Queen's trace key limit (an LMDB key in Queen).
const maxTraceKeyBytes = 511

type traceAnswer struct {
	ID            uint64          `json:"id"`
	PartitionID   string          `json:"partitionId"`
	TransactionID string          `json:"transactionId"`
	ConsumerGroup *string         `json:"consumerGroup"`
	EventType     string          `json:"eventType"`
	Data          json.RawMessage `json:"data"`
	TraceNames    []string        `json:"traceNames"`
	CreatedAt     string          `json:"createdAt"`
}

func traceView(ev storage.TraceEvent) traceAnswer {
	a := traceAnswer{ID: ev.Seq, PartitionID: strconv.FormatUint(ev.PartitionID, 10), TransactionID: ev.TxnID,
		EventType: ev.EventType, Data: jsonValue(ev.Data), TraceNames: ev.Names, CreatedAt: isoMillis(ev.CreatedMs)}
	if ev.Group != "" {
		g := ev.Group
		a.ConsumerGroup = &g
	}
	if a.TraceNames == nil {
		a.TraceNames = []string{}
	}
	return a
}

// traceAdd is POST /api/v1/traces.
func (s *Server) traceAdd(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	var req struct {
		TransactionID string          `json:"transactionId"`
		PartitionID   flexID          `json:"partitionId"`
		ConsumerGroup string          `json:"consumerGroup"`
		EventType     string          `json:"eventType"`
		Data          json.RawMessage `json:"data"`
		TraceNames    []string        `json:"traceNames"`
	}
	if err := readJSON(ctx, &req); err != nil {
		return err
	}
	if req.TransactionID == "" || req.PartitionID == 0 {
		return badRequest("transactionId and partitionId are required")
	}
	if 25+len(req.TransactionID)+9 > maxTraceKeyBytes {
		return nameTooLong("transactionId makes the trace key longer than 511 bytes")
	}
	if len(req.TraceNames) > wire.MaxTraceNames {
		return badRequest("at most 64 traceNames")
	}
	for _, n := range req.TraceNames {
		if n == "" || 17+len(n)+17 > maxTraceKeyBytes {
			return badRequest("trace names must be 1..477 bytes")
		}
	}
	if req.EventType == "" {
		req.EventType = "info"
	}
	data := []byte("null")
	if len(req.Data) > 0 {
		data = compactJSON(req.Data)
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.Trace(rctx, &wire.TraceCmd{Tenant: tenant, PartitionID: uint64(req.PartitionID), TxnID: req.TransactionID,
		Group: req.ConsumerGroup, EventType: req.EventType, Data: data, Names: req.TraceNames})
	if err != nil {
		return err
	}
	writeJSON(ctx, http.StatusCreated, map[string]any{"success": true, "id": res.Seq, "createdAt": isoMillis(res.CreatedMs)})
	return nil
}

// traceNames is GET /api/v1/traces/names.
func (s *Server) traceNames(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	names, err := s.engine.TraceNames(tenant, 10000)
	if err != nil {
		return err
	}
	if names == nil {
		names = []string{}
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"names": names})
	return nil
}

// tracesByName is GET /api/v1/traces/by-name/:name (?limit=, newest first).
func (s *Server) tracesByName(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	limit := 100
	if v := ctx.QueryArgs().Peek("limit"); v != nil {
		if limit, err = strconv.Atoi(string(v)); err != nil || limit < 1 || limit > 10000 {
			return badRequest("limit must be 1..10000")
		}
	}
	evs, err := s.engine.TracesByName(tenant, pathArg(ctx, "name"), limit)
	if err != nil {
		return err
	}
	return writeTraces(ctx, evs)
}

// tracesOfMessage is GET /api/v1/traces/:partitionId/:transactionId.
func (s *Server) tracesOfMessage(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	pid, err := strconv.ParseUint(pathArg(ctx, "partitionId"), 10, 64)
	if err != nil {
		return badRequest("partitionId must be a numeric id")
	}
	evs, err := s.engine.TracesOf(tenant, pid, pathArg(ctx, "transactionId"))
	if err != nil {
		return err
	}
	return writeTraces(ctx, evs)
}

func writeTraces(ctx *fasthttp.RequestCtx, evs []storage.TraceEvent) error {
	out := make([]traceAnswer, len(evs))
	for i, ev := range evs {
		out[i] = traceView(ev)
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"traces": out})
	return nil
}
