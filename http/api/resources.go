package api

import (
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Resources views (spec §2.3 rows 13–21, 28, 29). Shapes follow Queen's
// stored procedures (get_queues_v2, get_queue_v2, get_queue_detail_v2,
// get_namespaces_v2, get_tasks_v2, get_status_queues_v2) that 2.x kept;
// every number is derived from the replicated state: totals from offsets,
// pending/processing/completed from the most-behind group's cursor and
// lease, dead letters from the DLQ rows.

type queueListItem struct {
	ID         string        `json:"id"`
	Name       string        `json:"name"`
	Namespace  *string       `json:"namespace"`
	Task       *string       `json:"task"`
	CreatedAt  string        `json:"createdAt"`
	Partitions int           `json:"partitions"`
	Messages   messageCounts `json:"messages"`
}

func optLabel(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func listItem(q *storage.QueueView) queueListItem {
	return queueListItem{ID: strconv.FormatUint(q.ID, 10), Name: q.Name, Namespace: optLabel(q.Namespace), Task: optLabel(q.Task),
		CreatedAt: isoMillis(q.CreatedMs), Partitions: q.QueueInfo.Partitions, Messages: queueCounts(q)}
}

// queueViews reads the tenant's queues f selects, filtered by the
// namespace and task query parameters too.
func (s *Server) queueViews(ctx *fasthttp.RequestCtx, f storage.QueueFilter) (*tenantView, []storage.QueueView, error) {
	v, err := s.viewOfTenant(ctx)
	if err != nil {
		return nil, nil, err
	}
	f.Namespace, f.Task = strArg(ctx, "namespace"), strArg(ctx, "task")
	return v, s.aclVisibleQueues(ctx, v.tenant, v.queues(f, nowMs())), nil
}

// Page sizes of the listings that grow with queues or partitions: the
// default is what a client that does not page gets.
const (
	defaultPageLimit = 1000
	maxPageLimit     = 10000
)

// queuePage is the page of the tenant's queues (by name) the request asks
// for, with the next page's cursor.
func (s *Server) queuePage(ctx *fasthttp.RequestCtx, def int) (pageReq, []queueListItem, int, *string, error) {
	p, err := readPage(ctx, def, maxPageLimit)
	if err != nil {
		return p, nil, 0, nil, err
	}
	_, qs, err := s.queueViews(ctx, storage.QueueFilter{})
	if err != nil {
		return p, nil, 0, nil, err
	}
	page, next, err := pageOf(p, qs, queueKey, cmpName)
	if err != nil {
		return p, nil, 0, nil, err
	}
	out := make([]queueListItem, len(page))
	for i := range page {
		out[i] = listItem(&page[i])
	}
	setNextCursor(ctx, next)
	return p, out, len(qs), next, nil
}

// listQueues is GET /api/v1/resources/queues[?limit=&cursor=].
func (s *Server) listQueues(ctx *fasthttp.RequestCtx) error {
	_, out, _, next, err := s.queuePage(ctx, defaultPageLimit)
	if err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"queues": out, "nextCursor": next})
	return nil
}

// statusQueues is GET /api/v1/status/queues: the list, paged.
func (s *Server) statusQueues(ctx *fasthttp.RequestCtx) error {
	p, out, total, next, err := s.queuePage(ctx, 100)
	if err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"queues": out, "total": total,
		"pagination": map[string]int{"limit": p.limit, "offset": p.offset}, "nextCursor": next})
	return nil
}

// queuePartitions reads one queue (404 when there is none) and the page of
// its partitions, by index, the request asks for, with the next page's
// cursor, also set in the header. whole reads every partition, for sums
// over all of them; otherwise the store copies only the page's (and one
// more, to tell whether a next page follows).
func (s *Server) queuePartitions(ctx *fasthttp.RequestCtx, whole bool) (*tenantView, *storage.QueueView, []storage.PartitionView, *string, error) {
	return s.partitionsOfQueue(ctx, pathArg(ctx, "queue"), whole, maxPageLimit)
}

// partitionsOfQueue is queuePartitions for the queue named, with pages of
// at most maxLimit partitions.
func (s *Server) partitionsOfQueue(ctx *fasthttp.RequestCtx, name string, whole bool, maxLimit int) (*tenantView, *storage.QueueView, []storage.PartitionView, *string, error) {
	p, err := readPage(ctx, defaultPageLimit, maxLimit)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	f := storage.QueueFilter{Partitions: true}
	if !whole {
		f.PartitionLimit = p.offset + p.limit + 1
		var from partKey
		if ok, err := p.after(&from); err != nil {
			return nil, nil, nil, nil, err
		} else if ok {
			f.PartitionsFrom = uint32(min(max(from.I+1, 0), math.MaxUint32))
		}
		p.cursor = "" // the store's read starts after it
	}
	v, q, err := s.oneQueue(ctx, name, f)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	page, next, err := pageOf(p, q.Partitions, func(pv *storage.PartitionView) partKey { return partKey{I: int64(pv.Index)} }, cmpPart)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	setNextCursor(ctx, next)
	return v, q, page, next, nil
}

// oneQueue reads the queue named, as f selects, or answers 404.
func (s *Server) oneQueue(ctx *fasthttp.RequestCtx, name string, f storage.QueueFilter) (*tenantView, *storage.QueueView, error) {
	if err := checkName("queue", name); err != nil {
		return nil, nil, err
	}
	f.Name = name
	v, qs, err := s.queueViews(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	if len(qs) == 0 {
		return nil, nil, &apiError{http.StatusNotFound, "queue_not_found", "Queue not found"}
	}
	return v, &qs[0], nil
}

type partitionDetail struct {
	ID            string        `json:"id"`
	Name          string        `json:"name"`
	Index         uint32        `json:"index"`
	CreatedAt     string        `json:"createdAt"`
	Messages      messageCounts `json:"messages"`
	Stats         messageCounts `json:"stats"`
	Cursor        cursorTotals  `json:"cursor"`
	LastActivity  *string       `json:"lastActivity"`
	OldestMessage *string       `json:"oldestMessage"`
	NewestMessage *string       `json:"newestMessage"`
	HighWatermark uint64        `json:"highWatermark"`
	LogStart      uint64        `json:"logStartOffset"`
}

// cursorTotals: totalConsumed sums every group's position (messages
// consumed, retention-removed ones included); batchesConsumed is not
// counted by this engine and is always 0.
type cursorTotals struct {
	TotalConsumed   uint64 `json:"totalConsumed"`
	BatchesConsumed uint64 `json:"batchesConsumed"`
}

// partitionDetails details the page's partitions; the totals cover every
// partition of q.
func partitionDetails(v *tenantView, q *storage.QueueView, page []storage.PartitionView) ([]partitionDetail, messageCounts, error) {
	dead, err := dlqByPartition(v, q.Name)
	if err != nil {
		return nil, messageCounts{}, err
	}
	totals := countsOf(q.Totals)
	for _, n := range dead {
		totals.DeadLetter += n
	}
	out := make([]partitionDetail, 0, len(page))
	for i := range page {
		p := &page[i]
		c := partitionCounts(p)
		c.DeadLetter = dead[p.ID]
		d := partitionDetail{ID: pidString(p.ID), Name: p.Name, Index: p.Index, CreatedAt: isoMillis(p.CreatedMs),
			Messages: c, Stats: c, HighWatermark: p.HighWatermark, LogStart: p.LogStart}
		var last int64
		for _, cur := range p.Cursors {
			d.Cursor.TotalConsumed += cur.Pos
			last = max(last, cur.UpdatedMs)
		}
		d.LastActivity = isoOrNil(max(last, p.LastWriteMs))
		if c.Total > 0 {
			d.NewestMessage = isoOrNil(p.LastWriteMs)
		}
		if c.Pending+c.Processing > 0 {
			if at, ok := v.appendTime(p.ID, p.HighWatermark-(c.Pending+c.Processing)); ok {
				d.OldestMessage = isoOrNil(at)
			}
		}
		out = append(out, d)
	}
	return out, totals, nil
}

// dlqByPartition counts a queue's live dead-letter rows per partition id.
func dlqByPartition(v *tenantView, queue string) (map[uint64]uint64, error) {
	rows, _, err := v.dlq(storage.DLQFilter{Queue: queue, Offset: -1}, 0, 1<<30)
	out := map[uint64]uint64{}
	for _, r := range rows {
		out[r.PartitionID]++
	}
	return out, err
}

// queueDetail reads one queue and details the requested page of its
// partitions.
func (s *Server) queueDetail(ctx *fasthttp.RequestCtx) (*storage.QueueView, []partitionDetail, messageCounts, *string, error) {
	v, q, page, next, err := s.queuePartitions(ctx, false)
	if err != nil {
		return nil, nil, messageCounts{}, nil, err
	}
	parts, totals, err := partitionDetails(v, q, page)
	return q, parts, totals, next, err
}

// getQueue is GET /api/v1/resources/queues/:queue[?limit=&cursor=]
// (get_queue_v2, plus the queue's effective config): a page of partitions,
// totals over all of them.
func (s *Server) getQueue(ctx *fasthttp.RequestCtx) error {
	q, parts, totals, next, err := s.queueDetail(ctx)
	if err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{
		"id": strconv.FormatUint(q.ID, 10), "name": q.Name, "namespace": optLabel(q.Namespace), "task": optLabel(q.Task),
		"createdAt": isoMillis(q.CreatedMs), "partitions": parts, "totals": totals, "config": configJSON(&q.Config),
		"nextCursor": next,
	})
	return nil
}

// statusQueue is GET /api/v1/status/queues/:queue (get_queue_detail_v2).
func (s *Server) statusQueue(ctx *fasthttp.RequestCtx) error {
	q, parts, totals, next, err := s.queueDetail(ctx)
	if err != nil {
		return err
	}
	cfg := configJSON(&q.Config)
	cfg["maxQueueSize"] = q.Config.MaxSize
	writeJSON(ctx, http.StatusOK, map[string]any{
		"queue": map[string]any{"id": strconv.FormatUint(q.ID, 10), "name": q.Name, "namespace": optLabel(q.Namespace),
			"task": optLabel(q.Task), "priority": q.Config.Priority, "createdAt": isoMillis(q.CreatedMs), "config": cfg},
		"partitions": parts,
		"totals": map[string]any{"messages": totals, "total": totals.Total, "pending": totals.Pending,
			"processing": totals.Processing, "completed": totals.Completed, "failed": totals.Failed, "deadLetter": totals.DeadLetter},
		"nextCursor": next,
	})
	return nil
}

// configJSON renders a queue's options under their configure names (§1.2).
func configJSON(c *wire.QueueConfig) map[string]any {
	return map[string]any{
		"leaseTime": c.LeaseTimeSec, "retryLimit": c.RetryLimit, "retryDelay": c.RetryDelayMs, "priority": c.Priority,
		"maxSize": c.MaxSize, "ttl": c.TTLSec, "delayedProcessing": c.DelayedProcessingSec, "windowBuffer": c.WindowBufferSec,
		"retentionSeconds": c.RetentionSec, "completedRetentionSeconds": c.CompletedRetentionSec,
		"retentionEnabled": c.RetentionEnabled, "encryptionEnabled": c.EncryptionEnabled, "deadLetterQueue": c.DeadLetterQueue,
		"dlqAfterMaxRetries": c.DLQAfterMaxRetries, "maxWaitTimeSeconds": c.MaxWaitTimeSec, "minPopWaitTime": c.MinPopWaitMs,
		"dedupWindowSeconds": c.DedupWindowSec, "retentionSinkHold": c.RetentionSinkHold,
		"retentionSinkHoldMaxSeconds": c.RetentionSinkHoldMaxSec,
	}
}

// deleteQueue is DELETE /api/v1/resources/queues/:queue. Like Queen 2.x it
// answers 200 either way, with deleted/existed saying what happened, so
// delete-before-create cleanups do not fail.
func (s *Server) deleteQueue(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	name := pathArg(ctx, "queue")
	if err := checkNameSize("queue", name); err != nil {
		return err
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.DeleteQueue(rctx, &wire.DeleteQueueCmd{Tenant: tenant, Queue: name})
	if err == nil {
		err = res.Code.Err()
	}
	if errors.Is(err, wire.ErrQueueNotFound) {
		writeJSON(ctx, http.StatusOK, map[string]any{"deleted": false, "queue": name, "existed": false,
			"message": "Queue not found, nothing was deleted"})
		return nil
	}
	if err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"deleted": true, "queue": name, "existed": true})
	return nil
}

type depthPartition struct {
	Partition   string `json:"partition"`
	PartitionID string `json:"partitionId"`
	Depth       uint64 `json:"depth"`
}

// queueDepth is GET /api/v1/resources/queues/:queue/depth[?group=]: one
// backlog number per partition. Without group it is the queue-level
// pending of the most-behind group (pending + processing); with group it
// is that group's own backlog (a partition it never read counts whole).
func (s *Server) queueDepth(ctx *fasthttp.RequestCtx) error {
	group := strArg(ctx, "group")
	// A group's backlog is summed over every partition; the queue-level
	// depth is in the store's totals, so only the page is read.
	_, q, page, next, err := s.queuePartitions(ctx, group != "")
	if err != nil {
		return err
	}
	depth := func(p *storage.PartitionView) uint64 {
		if group == "" {
			pending, processing, _ := p.Depth()
			return pending + processing
		}
		if c := p.Cursor(group); c != nil {
			return min(c.Backlog(p.HighWatermark), p.Retained())
		}
		return p.Retained()
	}
	total := q.Totals.Pending + q.Totals.Processing
	if group != "" {
		total = 0
		for i := range q.Partitions {
			total += depth(&q.Partitions[i])
		}
	}
	out := make([]depthPartition, 0, len(page))
	for i := range page {
		p := &page[i]
		out = append(out, depthPartition{Partition: p.Name, PartitionID: pidString(p.ID), Depth: depth(p)})
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"queue": q.Name, "consumerGroup": optLabel(group), "depth": total,
		"partitions": out, "nextCursor": next})
	return nil
}

// queueSizes is GET /api/v1/resources/queues/:queue/sizes: retained
// messages and stored bytes per partition (record bytes before pebble's
// compression; reading them scans the partition).
func (s *Server) queueSizes(ctx *fasthttp.RequestCtx) error {
	v, q, page, next, err := s.queuePartitions(ctx, true)
	if err != nil {
		return err
	}
	type size struct {
		Partition   string `json:"partition"`
		PartitionID string `json:"partitionId"`
		Messages    uint64 `json:"messages"`
		Bytes       uint64 `json:"bytes"`
	}
	out := make([]size, 0, len(page))
	var msgs, bytes uint64
	for i := range q.Partitions {
		p := &q.Partitions[i]
		b, err := v.partitionBytes(p.ID)
		if err != nil {
			return err
		}
		msgs, bytes = msgs+p.Retained(), bytes+b
		if len(out) < len(page) && p.Index == page[len(out)].Index {
			out = append(out, size{Partition: p.Name, PartitionID: pidString(p.ID), Messages: p.Retained(), Bytes: b})
		}
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"queue": q.Name, "partitions": out,
		"totals": map[string]uint64{"messages": msgs, "bytes": bytes}, "nextCursor": next})
	return nil
}

// listPartitions is GET /api/v1/resources/partitions[?queue=&limit=&offset=&cursor=],
// by queue then index.
func (s *Server) listPartitions(ctx *fasthttp.RequestCtx) error {
	type item struct {
		ID             string        `json:"id"`
		Name           string        `json:"name"`
		Index          uint32        `json:"index"`
		Queue          string        `json:"queue"`
		CreatedAt      string        `json:"createdAt"`
		LastActivity   *string       `json:"lastActivity"`
		Messages       messageCounts `json:"messages"`
		ConsumerGroups int           `json:"consumerGroups"`
		HighWatermark  uint64        `json:"highWatermark"`
		LogStart       uint64        `json:"logStartOffset"`
	}
	out := []item{}
	add := func(q *storage.QueueView, pv *storage.PartitionView) {
		out = append(out, item{ID: pidString(pv.ID), Name: pv.Name, Index: pv.Index, Queue: q.Name,
			CreatedAt: isoMillis(pv.CreatedMs), LastActivity: isoOrNil(pv.LastWriteMs), Messages: partitionCounts(pv),
			ConsumerGroups: len(pv.Cursors), HighWatermark: pv.HighWatermark, LogStart: pv.LogStart})
	}
	const maxLimit = 100000
	if name := strArg(ctx, "queue"); name != "" {
		// One queue: the store copies only the page's partitions, not
		// every one of a queue that may hold millions.
		_, q, page, next, err := s.partitionsOfQueue(ctx, name, false, maxLimit)
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusNotFound {
			writeJSON(ctx, http.StatusOK, map[string]any{"partitions": out, "total": 0, "nextCursor": nil})
			return nil
		}
		if err != nil {
			return err
		}
		for i := range page {
			add(q, &page[i])
		}
		writeJSON(ctx, http.StatusOK, map[string]any{"partitions": out, "total": q.Totals.Partitions, "nextCursor": next})
		return nil
	}
	p, err := readPage(ctx, defaultPageLimit, maxLimit)
	if err != nil {
		return err
	}
	_, qs, err := s.queueViews(ctx, storage.QueueFilter{Partitions: true})
	if err != nil {
		return err
	}
	n := 0
	next, err := eachPartition(ctx, p, qs, func(q *storage.QueueView, pv *storage.PartitionView, onPage bool) {
		n++
		if onPage {
			add(q, pv)
		}
	})
	if err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"partitions": out, "total": n, "nextCursor": next})
	return nil
}

type labelCount struct {
	Queues     int           `json:"queues"`
	Partitions int           `json:"partitions"`
	Messages   messageCounts `json:"messages"`
}

// byLabel groups queues by namespace or task (queues without one are left
// out, as Queen's stats tables have no row for them).
func byLabel(qs []storage.QueueView, label func(*storage.QueueView) string) ([]string, map[string]*labelCount) {
	m := map[string]*labelCount{}
	var keys []string
	for i := range qs {
		k := label(&qs[i])
		if k == "" {
			continue
		}
		c := m[k]
		if c == nil {
			c = &labelCount{}
			m[k] = c
			keys = append(keys, k)
		}
		c.Queues++
		c.Partitions += qs[i].Totals.Partitions
		c.Messages.add(queueCounts(&qs[i]))
	}
	slices.Sort(keys)
	return keys, m
}

// listNamespaces is GET /api/v1/resources/namespaces.
func (s *Server) listNamespaces(ctx *fasthttp.RequestCtx) error {
	return s.listLabels(ctx, "namespaces", "namespace", func(q *storage.QueueView) string { return q.Namespace })
}

// listTasks is GET /api/v1/resources/tasks.
func (s *Server) listTasks(ctx *fasthttp.RequestCtx) error {
	return s.listLabels(ctx, "tasks", "task", func(q *storage.QueueView) string { return q.Task })
}

func (s *Server) listLabels(ctx *fasthttp.RequestCtx, plural, key string, label func(*storage.QueueView) string) error {
	p, err := readPage(ctx, defaultPageLimit, maxPageLimit)
	if err != nil {
		return err
	}
	_, qs, err := s.queueViews(ctx, storage.QueueFilter{})
	if err != nil {
		return err
	}
	keys, m := byLabel(qs, label)
	keys, next, err := pageOf(p, keys, func(k *string) nameKey { return nameKey{*k} }, cmpName)
	if err != nil {
		return err
	}
	setNextCursor(ctx, next)
	out := make([]map[string]any, 0, len(keys))
	for _, k := range keys {
		c := m[k]
		out = append(out, map[string]any{key: k, "queues": c.Queues, "partitions": c.Partitions,
			"messages": map[string]uint64{"total": c.Messages.Total, "pending": c.Messages.Pending}})
	}
	writeJSON(ctx, http.StatusOK, map[string]any{plural: out, "nextCursor": next})
	return nil
}
