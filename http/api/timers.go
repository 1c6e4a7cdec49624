package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Timers (spec §1.10, §2.14): durable delayed pushes keyed by timerKey.

var timerOps = map[string]uint8{"schedule": wire.TimerSchedule, "reschedule": wire.TimerReschedule, "cancel": wire.TimerCancel}

type timerOpRequest struct {
	Op          string `json:"op"`
	Queue       string `json:"queue"`
	Partition   string `json:"partition"`
	TimerKey    string `json:"timerKey"`
	DelayMs     int64  `json:"delayMs"`
	Payload     string `json:"payload"` // base64
	PayloadZstd bool   `json:"payloadZstd"`
	Txn         string `json:"txn"`
}

// timerPayload decodes a timer's base64 (optionally zstd) payload within
// the payload limit.
func timerPayload(r *timerOpRequest) ([]byte, error) {
	if r.Payload == "" {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(r.Payload)
	if err != nil {
		return nil, badRequest("payload must be base64")
	}
	if r.PayloadZstd {
		// WithDecoderMaxMemory bounds one frame only: a stream of many
		// small frames decodes without end. The output itself is what must
		// be bounded, so decoding stops one byte past the limit.
		dec, err := zstd.NewReader(bytes.NewReader(b), zstd.WithDecoderMaxMemory(wire.MaxTimerPayloadBytes+1),
			zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, badRequest("payload is not zstd")
		}
		defer dec.Close()
		var out bytes.Buffer
		if _, err := out.ReadFrom(io.LimitReader(dec, wire.MaxTimerPayloadBytes+1)); err != nil {
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
				return nil, errTimerPayloadTooLarge
			}
			return nil, badRequest("payload is not valid zstd")
		}
		b = out.Bytes()
	}
	if len(b) > wire.MaxTimerPayloadBytes {
		return nil, errTimerPayloadTooLarge
	}
	return b, nil
}

var errTimerPayloadTooLarge = &apiError{http.StatusRequestEntityTooLarge, "too_large", "a timer payload is larger than 1 MiB"}

// buildTimerOps validates timer operations (a timers call or a
// transaction's timers) and seals the payloads of encrypted queues.
func (s *Server) buildTimerOps(ctx context.Context, tenant wire.ID, reqs []timerOpRequest) (wire.TimersCmd, error) {
	cmd := wire.TimersCmd{Tenant: tenant}
	if len(reqs) == 0 || len(reqs) > wire.MaxTimerOpsPerCall {
		return cmd, badRequest("operations must hold 1..256 items")
	}
	decoded := 0
	for i := range reqs {
		r := &reqs[i]
		op, ok := timerOps[r.Op]
		if !ok {
			return cmd, badRequest("operation " + strconv.Itoa(i) + ": op must be schedule, reschedule or cancel")
		}
		if err := checkNames(r.Queue, r.Partition); err != nil {
			return cmd, err
		}
		if r.TimerKey == "" || len(r.TimerKey) > wire.MaxKVKeyBytes {
			return cmd, badRequest("operation " + strconv.Itoa(i) + ": timerKey must be 1..512 bytes")
		}
		if r.DelayMs < 0 || time.Duration(r.DelayMs)*time.Millisecond > s.cfg.TimersMaxHorizon {
			return cmd, badRequest("operation " + strconv.Itoa(i) + ": delayMs must be within QUEEN_TIMERS_MAX_HORIZON_S")
		}
		payload, err := timerPayload(r)
		if err != nil {
			return cmd, err
		}
		// Decoded payloads may outgrow the body that carried them: bound
		// them together by the body cap too.
		if decoded += len(payload); decoded > s.cfg.MaxBodyBytes {
			return cmd, &apiError{http.StatusRequestEntityTooLarge, "too_large", "timer payloads together are larger than QUEEN_MAX_BODY_BYTES"}
		}
		var flags uint64
		if payload != nil && s.engine.QueueEncryptedNow(ctx, tenant, r.Queue) {
			// Sealed as the record the timer fires, which is the
			// payload alone (its ids are made when it fires).
			rec := wire.Record{Payload: payload}
			if err := s.engine.SealRecord(&rec); err != nil {
				return cmd, err
			}
			payload, flags = rec.Payload, rec.Flags
		}
		cmd.Ops = append(cmd.Ops, wire.TimerOp{Op: op, Queue: r.Queue, Partition: r.Partition, TimerKey: r.TimerKey,
			DelayMs: r.DelayMs, Payload: payload, PayloadFlags: flags, Txn: r.Txn})
	}
	return cmd, nil
}

// timerAnswers renders a timers result.
func timerAnswers(reqs []timerOpRequest, res wire.TimersResult) []map[string]any {
	out := make([]map[string]any, len(res.Ops))
	for i, o := range res.Ops {
		a := map[string]any{"index": i, "op": reqs[i].Op, "timerKey": reqs[i].TimerKey, "ok": o.OK, "status": o.Status}
		if o.DueMs != 0 {
			a["dueAt"] = isoMillis(o.DueMs)
		}
		out[i] = a
	}
	return out
}

// timers is POST /api/v1/timers.
func (s *Server) timers(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	var req struct {
		Operations []timerOpRequest `json:"operations"`
	}
	if err := readJSON(ctx, &req); err != nil {
		return err
	}
	// The route is write-only (spec §2.2) so producers can schedule; a
	// schedule of an existing key changes nothing. Cancel and reschedule
	// change what others scheduled: read-write, as DELETE of a timer is.
	for _, op := range req.Operations {
		if op.Op == "cancel" || op.Op == "reschedule" {
			if err := requireLevel(ctx, authn.LevelReadWrite); err != nil {
				return err
			}
			break
		}
	}
	if err := s.aclTimers(ctx, tenant, req.Operations); err != nil {
		return err
	}
	cmd, err := s.buildTimerOps(ctx, tenant, req.Operations)
	if err != nil {
		return err
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.Timers(rctx, &cmd)
	if err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"results": timerAnswers(req.Operations, res)})
	return nil
}

type timerRow struct {
	TimerKey  string  `json:"timerKey"`
	Queue     string  `json:"queue"`
	Partition string  `json:"partition"`
	DueAt     string  `json:"dueAt"`
	Attempts  uint32  `json:"attempts"`
	Txn       *string `json:"txn"`
	Payload   *string `json:"payload,omitempty"`
}

// timersList is GET /api/v1/timers/:queue (?prefix=&after=&limit=, or
// ?mode=count&prefix=).
func (s *Server) timersList(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	queue := pathArg(ctx, "queue")
	if err := checkNames(queue); err != nil {
		return err
	}
	args := ctx.QueryArgs()
	prefix := string(args.Peek("prefix"))
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	store, err := s.timerStore(rctx, tenant, queue)
	if err != nil {
		return err
	}
	if string(args.Peek("mode")) == "count" {
		n, err := store.TimerCount(tenant, queue, prefix)
		if err != nil {
			return err
		}
		writeJSON(ctx, http.StatusOK, map[string]any{"count": n})
		return nil
	}
	limit := 100
	if v := args.Peek("limit"); v != nil {
		if limit, err = strconv.Atoi(string(v)); err != nil || limit < 1 || limit > 1000 {
			return badRequest("limit must be 1..1000")
		}
	}
	var rows []timerRow
	var last string
	truncated := false
	for len(rows) < limit {
		list, more, err := store.Timers(tenant, queue, prefix, firstNonEmpty(last, string(args.Peek("after"))), limit)
		if err != nil {
			return err
		}
		for _, t := range list {
			last = t.Key
			if !t.Fired && len(rows) < limit {
				rows = append(rows, timerRowOf(t, false))
			}
		}
		if !more {
			break
		}
		truncated = len(rows) == limit
	}
	var next *string
	if truncated {
		next = &last
	}
	if rows == nil {
		rows = []timerRow{}
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"rows": rows, "truncated": truncated, "nextAfter": next})
	return nil
}

// timerStore is this node's store of the queue's home group, which holds
// its timers, after a read barrier on that group so the reads that follow
// are linearizable.
func (s *Server) timerStore(ctx context.Context, tenant wire.ID, queue string) (*storage.Store, error) {
	if err := s.engine.Barrier(ctx, s.engine.Home(tenant, queue)); err != nil {
		return nil, err
	}
	return s.engine.HomeStore(tenant, queue), nil
}

func timerRowOf(t storage.TimerInfo, withPayload bool) timerRow {
	r := timerRow{TimerKey: t.Key, Queue: t.Queue, Partition: t.Partition, DueAt: isoMillis(t.DueMs), Attempts: t.Attempts}
	if t.Txn != "" {
		txn := t.Txn
		r.Txn = &txn
	}
	if withPayload {
		p := base64.StdEncoding.EncodeToString(t.Payload)
		r.Payload = &p
	}
	return r
}

// timerPeek is GET /api/v1/timers/:queue/*timerKey.
func (s *Server) timerPeek(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	queue := pathArg(ctx, "queue")
	key := pathArg(ctx, "timerKey")
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	store, err := s.timerStore(rctx, tenant, queue)
	if err != nil {
		return err
	}
	t, found, err := store.Timer(tenant, queue, key)
	if err != nil {
		return err
	}
	if !found || t.Fired {
		return &apiError{http.StatusNotFound, "not_found", "no pending timer " + key}
	}
	writeJSON(ctx, http.StatusOK, timerRowOf(t, true))
	return nil
}

// timerCancel is DELETE /api/v1/timers/:queue/*timerKey.
func (s *Server) timerCancel(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	queue := pathArg(ctx, "queue")
	key := pathArg(ctx, "timerKey")
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.Timers(rctx, &wire.TimersCmd{Tenant: tenant, Ops: []wire.TimerOp{{Op: wire.TimerCancel, Queue: queue, TimerKey: key}}})
	if err != nil {
		return err
	}
	o := res.Ops[0]
	writeJSON(ctx, http.StatusOK, map[string]any{"timerKey": key, "ok": o.OK, "status": o.Status})
	return nil
}
