package api

import (
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Dead-letter queue routes (spec §2.3 rows 45–47, §1.5, §2.10).

type dlqMessage struct {
	ID            string  `json:"id"`
	MessageID     string  `json:"messageId"`
	TransactionID string  `json:"transactionId"`
	PartitionID   string  `json:"partitionId"`
	Queue         string  `json:"queue"`
	Partition     string  `json:"partition"`
	Offset        uint64  `json:"offset"`
	ConsumerGroup string  `json:"consumerGroup"`
	ErrorMessage  *string `json:"errorMessage"`
	RetryCount    uint32  `json:"retryCount"`
	Data          any     `json:"data"`
	Encoding      string  `json:"encoding,omitempty"`
	ProducerSub   *string `json:"producerSub"`
	TraceID       *string `json:"traceId"`
	CreatedAt     string  `json:"createdAt"`
	FailedAt      string  `json:"failedAt"`
	DLQTimestamp  string  `json:"dlqTimestamp"`
}

// dlqJSON renders a row, its record opened (the engine opened its error).
func (s *Server) dlqJSON(r *storage.DLQRow) (dlqMessage, error) {
	rec, err := wire.ParseRecord(r.Record)
	if err != nil {
		return dlqMessage{}, err
	}
	s.engine.OpenRecord(&rec)
	v := viewOf(&rec)
	m := dlqMessage{ID: strconv.FormatUint(r.ID, 10), MessageID: rec.MsgID.String(), TransactionID: txnIDOf(&rec),
		PartitionID: pidString(r.PartitionID), Queue: r.Queue, Partition: r.Partition, Offset: r.Offset,
		ConsumerGroup: r.Group, ErrorMessage: optLabel(r.Error), RetryCount: r.RetryCount, Data: v.value,
		Encoding: v.encoding, ProducerSub: optString(rec.ProducerSub), TraceID: optString(rec.TraceID),
		CreatedAt: isoMillis(r.AppendMs), FailedAt: isoMillis(r.FailedMs), DLQTimestamp: isoMillis(r.FailedMs)}
	return m, nil
}

// dlqCursor is the last row of a DLQ page (storage.DLQPos).
type dlqCursor struct {
	Ms int64  `json:"t"`
	ID uint64 `json:"id"`
}

// listDLQ is GET /api/v1/dlq?queue=&consumerGroup=&limit=100&offset=0&cursor=:
// rows not yet replayed, newest first, with the number of all matching;
// cursor resumes after the page that answered it as nextCursor.
func (s *Server) listDLQ(ctx *fasthttp.RequestCtx) error {
	p, err := readPage(ctx, 100, 1000)
	if err != nil {
		return err
	}
	f := storage.DLQFilter{Queue: strArg(ctx, "queue"), Group: strArg(ctx, "consumerGroup"), Offset: -1}
	var cur dlqCursor
	if ok, err := p.after(&cur); err != nil {
		return err
	} else if ok {
		f.After = &storage.DLQPos{FailedMs: cur.Ms, ID: cur.ID}
	}
	v, err := s.viewOfTenant(ctx)
	if err != nil {
		return err
	}
	rows, total, err := v.dlq(f, p.offset, p.limit+1)
	if err != nil {
		return err
	}
	var next *string
	if len(rows) > p.limit {
		rows = rows[:p.limit]
		next = encodeCursor(dlqCursor{Ms: rows[p.limit-1].FailedMs, ID: rows[p.limit-1].ID})
	}
	out := make([]dlqMessage, 0, len(rows))
	for i := range rows {
		m, err := s.dlqJSON(&rows[i])
		if err != nil {
			return err
		}
		out = append(out, m)
	}
	setNextCursor(ctx, next)
	writeJSON(ctx, http.StatusOK, map[string]any{"messages": out, "total": total,
		"pagination": map[string]int{"limit": p.limit, "offset": p.offset}, "nextCursor": next})
	return nil
}

// purgeDLQ is DELETE /api/v1/dlq[?queue=&consumerGroup=] (admin): every
// matching row goes, replayed markers included.
func (s *Server) purgeDLQ(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	n, err := s.engine.PurgeDLQ(rctx, &wire.DLQPurgeCmd{Tenant: tenant, Queue: strArg(ctx, "queue"), Group: strArg(ctx, "consumerGroup")})
	if err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"success": true, "deleted": n})
	return nil
}

// replayDLQ is POST /api/v1/dlq/:id/replay with an optional body
// {"queue","partition"} overriding the target.
func (s *Server) replayDLQ(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	id, err := strconv.ParseUint(pathArg(ctx, "id"), 10, 64)
	if err != nil {
		return badRequest("id must be a dead-letter row id")
	}
	var t dlqTarget
	if len(ctx.PostBody()) > 0 {
		if err := readJSON(ctx, &t); err != nil {
			return err
		}
	}
	return s.replay(ctx, tenant, id, t)
}
