package api

import (
	"cmp"
	"container/heap"
	"math"
	"net/http"
	"slices"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Message views and commands (spec §2.3 rows 41–44, §2.10). Shapes follow
// Queen's list_messages_v1 / get_message_v1 / delete_message_v1.

type msgKey struct{ pid, off uint64 }

// messageStatus is a message's state seen by the queue-mode group when the
// partition has one, else by every bus group: dead_letter, completed,
// processing (in a live queue-mode lease) or pending.
func messageStatus(p *storage.PartitionView, off uint64, dead bool) (status, queueStatus string, consumedBy, groups int) {
	queueStatus = "pending"
	qm := p.Cursor(wire.QueueModeGroup)
	if qm != nil {
		switch {
		case off < qm.Pos:
			queueStatus = "completed"
		case qm.LeaseExpiresMs > 0 && off < qm.Pos+qm.LeaseSize:
			queueStatus = "processing"
		}
	}
	for _, c := range p.Cursors {
		if c.Group == wire.QueueModeGroup {
			continue
		}
		groups++
		if off < c.Pos {
			consumedBy++
		}
	}
	status = queueStatus
	switch {
	case dead:
		status, queueStatus = "dead_letter", "dead_letter"
	case qm == nil && groups > 0 && consumedBy == groups:
		status = "completed"
	case qm == nil && groups > 0:
		status = "pending"
	}
	return status, queueStatus, consumedBy, groups
}

func modeJSON(hasQueueMode bool, busGroups int) map[string]any {
	t := "none"
	switch {
	case hasQueueMode && busGroups > 0:
		t = "hybrid"
	case hasQueueMode:
		t = "queue"
	case busGroups > 0:
		t = "bus"
	}
	return map[string]any{"hasQueueMode": hasQueueMode, "busGroupsCount": busGroups, "type": t}
}

// deadSet is where the tenant's live dead-letter rows are, by message.
func deadSet(v *tenantView, queue string) (map[msgKey]storage.DLQRow, error) {
	rows, _, err := v.dlq(storage.DLQFilter{Queue: queue, Offset: -1}, 0, 1<<30)
	m := make(map[msgKey]storage.DLQRow, len(rows))
	for _, r := range rows {
		m[msgKey{r.PartitionID, r.Offset}] = r
	}
	return m, err
}

type listedMessage struct {
	storage.StoredMessage
	q *storage.QueueView
	p *storage.PartitionView
}

// msgCursor is where a page of messages ended, in the listing's order:
// append time descending, partition id ascending, offset descending.
type msgCursor struct {
	Ms  int64  `json:"t"`
	PID uint64 `json:"p"`
	Off uint64 `json:"o"`
}

// below trims a partition's view so that reading it newest first yields
// only messages after the cursor: in one partition append times grow with
// offsets, so those are a prefix by offset (the cursor's partition) or by
// append time (the others; a tie in time goes after the cursor in
// partitions with a greater id).
func (c *msgCursor) below(p storage.PartitionView, toMs int64) (storage.PartitionView, int64) {
	switch {
	case p.ID == c.PID:
		p.HighWatermark = min(p.HighWatermark, c.Off)
		return p, min(toMs, c.Ms+1)
	case p.ID > c.PID:
		return p, min(toMs, c.Ms+1)
	}
	return p, min(toMs, c.Ms)
}

// maxMessagesPage is the most messages one page of GET /api/v1/messages
// answers.
const maxMessagesPage = 1000

// listMessages is GET /api/v1/messages: messages appended within
// [from, to) (from defaults to an hour ago), newest first, filtered by
// queue, partition, namespace, task and status; a limit over 1000 is
// clamped to it (Queen accepts any, and its SDKs ask for 10000); offset
// skips, cursor resumes after the page that answered it as nextCursor.
func (s *Server) listMessages(ctx *fasthttp.RequestCtx) error {
	pg, err := readPage(ctx, 200, math.MaxInt32)
	if err != nil {
		return err
	}
	limit, skip := min(pg.limit, maxMessagesPage), pg.offset
	var cur msgCursor
	hasCur, err := pg.after(&cur)
	if err != nil {
		return err
	}
	from, to, err := timeRange(ctx, 3600_000)
	if err != nil {
		return err
	}
	to += 60_000 - to%60_000 // Queen rounds "to" up to the next minute
	status, partition := strArg(ctx, "status"), strArg(ctx, "partition")
	v, qs, err := s.tenantQueuesWithParts(ctx)
	if err != nil {
		return err
	}
	dead, err := deadSet(v, strArg(ctx, "queue"))
	if err != nil {
		return err
	}
	// Without a status filter each partition contributes at most the page
	// end (and one more, to tell whether a next page exists); with one,
	// rows are filtered after reading, so read more.
	want := skip + limit + 1
	if status != "" {
		want = 1 << 20
	}
	// Partitions newest write first: once want messages are in hand and a
	// partition's last write is older than the want-th newest of them,
	// neither it nor any after it has a message for the page, and reading
	// stops (a queue with 100,000 partitions read every one per page).
	type candidate struct {
		q *storage.QueueView
		p *storage.PartitionView
	}
	var parts []candidate
	for qi := range qs {
		for pi := range qs[qi].Partitions {
			p := &qs[qi].Partitions[pi]
			if (partition == "" || p.Name == partition) && p.LastWriteMs >= from {
				parts = append(parts, candidate{&qs[qi], p})
			}
		}
	}
	slices.SortStableFunc(parts, func(a, b candidate) int { return cmp.Compare(b.p.LastWriteMs, a.p.LastWriteMs) })
	var all []listedMessage
	var newest newestTimes
	hasQM, bus := false, map[string]bool{}
	for _, c := range parts {
		p := c.p
		if newest.Len() >= want && p.LastWriteMs < newest.oldest() {
			break
		}
		pv, toMs := *p, to
		if hasCur {
			pv, toMs = cur.below(pv, to)
		}
		msgs, err := v.newest(&pv, from, toMs, want)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			all = append(all, listedMessage{m, c.q, p})
			newest.keep(m.AppendMs, want)
		}
		if len(msgs) > 0 {
			for _, c := range p.Cursors {
				hasQM = hasQM || c.Group == wire.QueueModeGroup
				if c.Group != wire.QueueModeGroup {
					bus[c.Group] = true
				}
			}
		}
	}
	slices.SortFunc(all, func(a, b listedMessage) int {
		if c := cmp.Compare(b.AppendMs, a.AppendMs); c != 0 {
			return c
		}
		if c := cmp.Compare(a.PartitionID, b.PartitionID); c != 0 {
			return c
		}
		return cmp.Compare(b.Offset, a.Offset)
	})
	out := []map[string]any{}
	n := 0
	var next *string
	var last msgCursor
	for _, m := range all {
		_, isDead := dead[msgKey{m.PartitionID, m.Offset}]
		st, qst, consumed, groups := messageStatus(m.p, m.Offset, isDead)
		if status != "" && st != status {
			continue
		}
		if n++; n <= skip {
			continue
		}
		if len(out) >= limit {
			next = encodeCursor(last)
			break
		}
		last = msgCursor{Ms: m.AppendMs, PID: m.PartitionID, Off: m.Offset}
		rec, err := wire.ParseRecord(m.Body)
		if err != nil {
			return err
		}
		s.engine.OpenRecord(&rec)
		var lease *string
		if qm := m.p.Cursor(wire.QueueModeGroup); qm != nil && qst == "processing" {
			lease = isoOrNil(qm.LeaseExpiresMs)
		}
		out = append(out, map[string]any{
			"id": rec.MsgID.String(), "transactionId": txnIDOf(&rec), "partitionId": pidString(m.PartitionID),
			"queuePath": m.q.Name + "/" + m.p.Name, "queue": m.q.Name, "partition": m.p.Name, "offset": m.Offset,
			"namespace": optLabel(m.q.Namespace), "task": optLabel(m.q.Task), "status": st, "queueStatus": qst,
			"busStatus": map[string]int{"consumedBy": consumed, "totalGroups": groups},
			"traceId":   optString(rec.TraceID), "producerSub": optString(rec.ProducerSub), "queuePriority": m.q.Config.Priority,
			"createdAt": isoMillis(m.AppendMs), "leaseExpiresAt": lease,
		})
	}
	setNextCursor(ctx, next)
	writeJSON(ctx, http.StatusOK, map[string]any{"messages": out, "mode": modeJSON(hasQM, len(bus)),
		"pagination": map[string]int{"limit": limit, "offset": skip}, "nextCursor": next})
	return nil
}

// messageParams reads :partitionId and :transactionId.
func messageParams(ctx *fasthttp.RequestCtx) (uint64, string, error) {
	var pid flexID
	if err := pid.UnmarshalJSON([]byte(pathArg(ctx, "partitionId"))); err != nil {
		return 0, "", err
	}
	txn := pathArg(ctx, "transactionId")
	if txn == "" || len(txn) > maxTxnIDBytes {
		return 0, "", badRequest("transactionId is required (at most 65535 bytes)")
	}
	return uint64(pid), txn, nil
}

// findMessage resolves a message and the queue and partition views around
// it, or answers 404.
func (s *Server) findMessage(ctx *fasthttp.RequestCtx) (*tenantView, storage.StoredMessage, *storage.QueueView, *storage.PartitionView, error) {
	var none storage.StoredMessage
	pid, txn, err := messageParams(ctx)
	if err != nil {
		return nil, none, nil, nil, err
	}
	v, err := s.viewOfTenant(ctx)
	if err != nil {
		return nil, none, nil, nil, err
	}
	m, ok, err := s.engine.MessageByTxn(v.tenant, pid, txn)
	if err != nil {
		return nil, none, nil, nil, err
	}
	part, found := v.partition(pid)
	if !ok || !found {
		return nil, none, nil, nil, notFound("Message not found")
	}
	// Only the message's own partition is copied, not the queue's others.
	qs := v.queues(storage.QueueFilter{Name: part.Queue, Partitions: true, PartitionsFrom: part.Index, PartitionLimit: 1}, nowMs())
	if len(qs) == 1 && len(qs[0].Partitions) == 1 && qs[0].Partitions[0].ID == pid {
		return v, m, &qs[0], &qs[0].Partitions[0], nil
	}
	return nil, none, nil, nil, notFound("Message not found")
}

// getMessage is GET /api/v1/messages/:partitionId/:transactionId.
func (s *Server) getMessage(ctx *fasthttp.RequestCtx) error {
	tv, m, q, p, err := s.findMessage(ctx)
	if err != nil {
		return err
	}
	rec, err := wire.ParseRecord(m.Body)
	if err != nil {
		return err
	}
	encrypted := rec.Flags&wire.FlagEncrypted != 0
	s.engine.OpenRecord(&rec)
	dead, _, err := tv.dlq(storage.DLQFilter{PartitionID: p.ID, Offset: int64(m.Offset)}, 0, 1)
	if err != nil {
		return err
	}
	status, _, consumed, groups := messageStatus(p, m.Offset, len(dead) > 0)
	var errMsg *string
	var retries *uint32
	if len(dead) > 0 {
		errMsg, retries = &dead[0].Error, &dead[0].RetryCount
	}
	cgs := make([]map[string]any, 0, len(p.Cursors))
	var lease *string
	for _, c := range p.Cursors {
		cgs = append(cgs, map[string]any{"name": c.Group, "consumed": m.Offset < c.Pos, "leaseExpiresAt": isoOrNil(c.LeaseExpiresMs)})
		if c.Group == wire.QueueModeGroup {
			lease = isoOrNil(c.LeaseExpiresMs)
		}
	}
	mode := modeJSON(p.Cursor(wire.QueueModeGroup) != nil, groups)
	mode["consumedByGroups"] = consumed
	v := viewOf(&rec)
	ans := map[string]any{
		"id": rec.MsgID.String(), "transactionId": txnIDOf(&rec), "partitionId": pidString(p.ID),
		"queuePath": q.Name + "/" + p.Name, "queue": q.Name, "partition": p.Name, "offset": m.Offset,
		"namespace": optLabel(q.Namespace), "task": optLabel(q.Task), "status": status,
		"payload": v.value, "data": v.value, "isEncrypted": encrypted,
		"traceId": optString(rec.TraceID), "producerSub": optString(rec.ProducerSub), "createdAt": isoMillis(m.AppendMs),
		"errorMessage": errMsg, "retryCount": retries, "leaseExpiresAt": lease,
		"queueConfig": map[string]any{"leaseTime": q.Config.LeaseTimeSec, "retryLimit": q.Config.RetryLimit,
			"retryDelay": q.Config.RetryDelayMs, "ttl": q.Config.TTLSec, "priority": q.Config.Priority},
		"mode": mode, "consumerGroups": cgs,
	}
	if v.encoding != "" {
		ans["encoding"] = v.encoding
	}
	if v.key != nil {
		ans["key"] = v.key
	}
	writeJSON(ctx, http.StatusOK, ans)
	return nil
}

// deleteMessage is DELETE /api/v1/messages/:partitionId/:transactionId: the
// message is erased (a null tombstone keeps its offset) and leaves the DLQ.
func (s *Server) deleteMessage(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	pid, txn, err := messageParams(ctx)
	if err != nil {
		return err
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.DeleteMessage(rctx, &wire.DeleteMessageCmd{Tenant: tenant, PartitionID: pid, TxnID: []byte(txn)})
	if err != nil {
		return err
	}
	if res.Code == wire.CodeMessageNotFound || res.Code == wire.CodePartitionNotFound {
		return notFound("Message not found")
	}
	if err := res.Code.Err(); err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"success": true, "partitionId": pidString(pid), "transactionId": txn,
		"message": "Message deleted successfully"})
	return nil
}

// retryMessage is POST /api/v1/messages/:partitionId/:transactionId/retry:
// the message's dead-letter row is replayed into its queue (as
// POST /api/v1/dlq/:id/replay does); 404 when the message is not in the
// DLQ.
func (s *Server) retryMessage(ctx *fasthttp.RequestCtx) error {
	v, m, _, p, err := s.findMessage(ctx)
	if err != nil {
		return err
	}
	rows, _, err := v.dlq(storage.DLQFilter{PartitionID: p.ID, Offset: int64(m.Offset)}, 0, 1)
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return notFound("message is not in the dead-letter queue")
	}
	return s.replay(ctx, v.tenant, rows[0].ID, dlqTarget{})
}

// dlqTarget overrides where a replay pushes to.
type dlqTarget struct {
	Queue     string `json:"queue"`
	Partition string `json:"partition"`
}

// replay pushes a dead-lettered message again (the engine pushes it and
// marks its row replayed) and answers the outcome.
func (s *Server) replay(ctx *fasthttp.RequestCtx, tenant wire.ID, id uint64, t dlqTarget) error {
	if t.Queue != "" || t.Partition != "" {
		if err := checkNames(firstNonEmpty(t.Queue, "x"), t.Partition); err != nil {
			return err
		}
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.ReplayDLQ(rctx, tenant, id, wire.ID(uuid.Must(uuid.NewV7())), t.Queue, t.Partition)
	if err != nil {
		return err
	}
	if res.Code == wire.CodeNotFound {
		return notFound("dead-letter row not found")
	}
	if err := res.Code.Err(); err != nil {
		return err
	}
	result := "moved"
	if res.Duplicate {
		result = "duplicate"
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"success": true, "result": result, "id": pidString(id),
		"queue": res.Queue, "partition": res.Partition, "partitionId": pidString(res.PartitionID), "offset": res.Offset,
		"messageId": res.MsgID.String(), "transactionId": storage.DLQTxnID(id)})
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// newestTimes keeps the newest append times seen, at most a given number:
// a min-heap, its oldest on top.
type newestTimes []int64

func (h newestTimes) Len() int           { return len(h) }
func (h newestTimes) Less(i, j int) bool { return h[i] < h[j] }
func (h newestTimes) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *newestTimes) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *newestTimes) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// keep adds ms, dropping the oldest beyond n.
func (h *newestTimes) keep(ms int64, n int) {
	heap.Push(h, ms)
	if h.Len() > n {
		heap.Pop(h)
	}
}

// oldest is the oldest time kept.
func (h newestTimes) oldest() int64 { return h[0] }
