package api

import (
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage"
)

// Status views (spec §2.3 rows 19, 26, 27, 30, 40): dashboard aggregates.
// Totals, depth and lag come from the replicated state; throughput comes
// from the apply loop's per-minute activity counters, which every replica
// keeps in memory for the last hour since it started (views_stats.go): a
// range older than that reads as zero.

// timeRange reads from/to (ISO) with a default span back from now.
func timeRange(ctx *fasthttp.RequestCtx, defSpanMs int64) (from, to int64, err error) {
	now := nowMs()
	if to, err = timeArg(ctx, "to", now); err != nil {
		return 0, 0, err
	}
	if from, err = timeArg(ctx, "from", to-defSpanMs); err != nil {
		return 0, 0, err
	}
	if from > to {
		return 0, 0, badRequest("from must not be after to")
	}
	return from, to, nil
}

type throughputPoint struct {
	Timestamp          string  `json:"timestamp"`
	Ingested           uint64  `json:"ingested"`
	Processed          uint64  `json:"processed"`
	PopMessages        uint64  `json:"popMessages"`
	IngestedPerSecond  float64 `json:"ingestedPerSecond"`
	ProcessedPerSecond float64 `json:"processedPerSecond"`
	PopPerSecond       float64 `json:"popPerSecond"`
	AvgLagMs           int64   `json:"avgLagMs"`
	MaxLagMs           int64   `json:"maxLagMs"`
	AckFailed          uint64  `json:"ackFailed"`
	DLQCount           uint64  `json:"dlqCount"`
	PushRequests       uint64  `json:"pushRequests"`
	PopRequests        uint64  `json:"popRequests"`
	AckRequests        uint64  `json:"ackRequests"`
}

func perSecond(n uint64, seconds float64) float64 {
	return float64(int64(float64(n)/seconds*100+0.5)) / 100
}

// throughputPoints renders minute buckets. Per-minute delivery lag is not
// recorded, so avgLagMs and maxLagMs are 0.
func throughputPoints(series []storage.MinuteActivity) []throughputPoint {
	out := make([]throughputPoint, 0, len(series))
	for _, m := range series {
		out = append(out, throughputPoint{
			Timestamp: isoMillis(m.StartMs), Ingested: m.Pushed, Processed: m.Completed, PopMessages: m.Popped,
			IngestedPerSecond: perSecond(m.Pushed, 60), ProcessedPerSecond: perSecond(m.Completed, 60),
			PopPerSecond: perSecond(m.Popped, 60), AckFailed: m.Failed, DLQCount: m.DLQ,
			PushRequests: m.PushOps, PopRequests: m.PopOps, AckRequests: m.AckOps,
		})
	}
	return out
}

func sumSeries(series []storage.MinuteActivity) storage.Activity {
	var a storage.Activity
	for i := range series {
		a.Add(&series[i].Activity)
	}
	return a
}

// lagStats are offset and time lags over every cursor with a backlog.
type lagStats struct {
	count                int
	offsetSum, offsetMax uint64
	timeSum, timeMax     int64 // seconds
}

// lagOf measures how far behind a group is in a partition: messages not
// consumed, and the age of the oldest of them (one record read).
func lagOf(v *tenantView, p *storage.PartitionView, c *storage.CursorView, now int64) (uint64, int64) {
	backlog := min(c.Backlog(p.HighWatermark), p.Retained())
	if backlog == 0 {
		return 0, 0
	}
	at, ok := v.appendTime(p.ID, max(c.Pos, p.LogStart))
	if !ok || at > now {
		return backlog, 0
	}
	return backlog, (now - at) / 1000
}

func (l *lagStats) add(offset uint64, seconds int64) {
	l.count++
	l.offsetSum += offset
	l.offsetMax = max(l.offsetMax, offset)
	l.timeSum += seconds
	l.timeMax = max(l.timeMax, seconds)
}

func (l *lagStats) json() map[string]any {
	avg := func(sum float64) float64 {
		if l.count == 0 {
			return 0
		}
		return float64(int64(sum/float64(l.count)*100+0.5)) / 100
	}
	return map[string]any{
		"time":   map[string]any{"avg": avg(float64(l.timeSum)), "median": 0, "min": 0, "max": l.timeMax},
		"offset": map[string]any{"avg": avg(float64(l.offsetSum)), "median": 0, "min": 0, "max": l.offsetMax, "total": l.offsetSum},
	}
}

// queueLag measures each partition of a queue from its most-behind group
// (a partition no group read yet is wholly behind).
func queueLag(v *tenantView, q *storage.QueueView, now int64, l *lagStats) {
	for i := range q.Partitions {
		p := &q.Partitions[i]
		pending, processing, _ := p.Depth()
		behind := pending + processing
		if behind == 0 {
			continue
		}
		var secs int64
		if at, ok := v.appendTime(p.ID, p.HighWatermark-behind); ok && at <= now {
			secs = (now - at) / 1000
		}
		l.add(behind, secs)
	}
}

// overview is GET /api/v1/resources/overview (get_system_overview_v3).
func (s *Server) overview(ctx *fasthttp.RequestCtx) error {
	v, err := s.viewOfTenant(ctx)
	if err != nil {
		return err
	}
	now := nowMs()
	qs := v.queues(storage.QueueFilter{Partitions: true}, now)
	var counts messageCounts
	var lag lagStats
	partitions := 0
	ns, tasks := map[string]bool{}, map[string]bool{}
	for i := range qs {
		counts.add(queueCounts(&qs[i]))
		partitions += len(qs[i].Partitions)
		ns[qs[i].Namespace], tasks[qs[i].Task] = true, true
		queueLag(v, &qs[i], now, &lag)
	}
	delete(ns, "")
	delete(tasks, "")
	last := sumSeries(v.series("", now-5*60000, now))
	lagJSON := lag.json()
	writeJSON(ctx, http.StatusOK, map[string]any{
		"queues": len(qs), "partitions": partitions, "namespaces": len(ns), "tasks": len(tasks),
		"messages": counts, "lag": lagJSON,
		"throughput": map[string]float64{"ingestedPerSecond": perSecond(last.Pushed, 300), "processedPerSecond": perSecond(last.Completed, 300)},
		"timestamp":  isoMillis(now), "statsAge": 0,
	})
	return nil
}

// status is GET /status and GET /api/v1/status (get_status_v3): throughput
// series, queues, message counts, leases and DLQ for the tenant, filtered
// by queue, namespace and task.
func (s *Server) status(ctx *fasthttp.RequestCtx) error {
	from, to, err := timeRange(ctx, 3600_000)
	if err != nil {
		return err
	}
	v, err := s.viewOfTenant(ctx)
	if err != nil {
		return err
	}
	now := nowMs()
	qs := v.queues(storage.QueueFilter{Name: strArg(ctx, "queue"), Namespace: strArg(ctx, "namespace"),
		Task: strArg(ctx, "task"), Partitions: true}, now)
	var series []storage.MinuteActivity
	var counts messageCounts
	queues := make([]map[string]any, 0, len(qs))
	leases := map[string]uint64{"active": 0, "partitionsWithLeases": 0, "totalBatchSize": 0, "totalAcked": 0}
	for i := range qs {
		q := &qs[i]
		series = storage.MergeSeries(series, v.series(q.Name, from, to))
		counts.add(queueCounts(q))
		var consumed uint64
		for pi := range q.Partitions {
			p := &q.Partitions[pi]
			leased := false
			for _, c := range p.Cursors {
				consumed += c.Pos
				if c.LeaseExpiresMs > 0 {
					leases["active"]++
					leases["totalBatchSize"] += c.LeaseSize
					leases["totalAcked"] += c.LeaseSize - c.InLease
					leased = true
				}
			}
			if leased {
				leases["partitionsWithLeases"]++
			}
		}
		queues = append(queues, map[string]any{"id": strconv.FormatUint(q.ID, 10), "name": q.Name,
			"namespace": optLabel(q.Namespace), "task": optLabel(q.Task), "partitions": len(q.Partitions), "totalConsumed": consumed})
	}
	total := sumSeries(series)
	sigs, dlqTotal, affected, err := dlqSignatures(v, strArg(ctx, "queue"))
	if err != nil {
		return err
	}
	top := sigs
	if len(top) > 10 {
		top = top[:10]
	}
	points := throughputPoints(series)
	writeJSON(ctx, http.StatusOK, map[string]any{
		"timeRange":     map[string]string{"from": isoMillis(from), "to": isoMillis(to)},
		"bucketMinutes": 1, "pointCount": len(points), "throughput": points, "queues": queues, "messages": counts,
		"leases":          leases,
		"deadLetterQueue": map[string]any{"totalMessages": dlqTotal, "affectedPartitions": affected, "topErrors": top},
		"workers":         []any{},
		"errors":          map[string]uint64{"dbErrors": 0, "ackFailed": total.Failed, "dlqMessages": total.DLQ},
		"statsAge":        0,
	})
	return nil
}

// statusAnalytics is GET /api/v1/status/analytics (get_analytics_v1):
// messages pushed per minute, hour or day over the range.
func (s *Server) statusAnalytics(ctx *fasthttp.RequestCtx) error {
	from, to, err := timeRange(ctx, 3600_000)
	if err != nil {
		return err
	}
	interval := strArg(ctx, "interval")
	step := map[string]int64{"": 60_000, "minute": 60_000, "hour": 3600_000, "day": 86400_000}[interval]
	if step == 0 {
		return badRequest("interval must be minute, hour or day")
	}
	if interval == "" {
		interval = "minute"
	}
	v, err := s.viewOfTenant(ctx)
	if err != nil {
		return err
	}
	buckets := map[int64]*storage.Activity{}
	var keys []int64
	for _, m := range v.series(strArg(ctx, "queue"), from, to) {
		k := m.StartMs / step * step
		if buckets[k] == nil {
			buckets[k] = &storage.Activity{}
			keys = append(keys, k)
		}
		buckets[k].Add(&m.Activity)
	}
	points := make([]map[string]any, 0, len(keys))
	for _, k := range keys {
		a := buckets[k]
		points = append(points, map[string]any{"timestamp": isoMillis(k), "messages": a.Pushed, "popped": a.Popped,
			"completed": a.Completed, "failed": a.Failed, "deadLetter": a.DLQ})
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"dataPoints": points, "interval": interval,
		"from": isoMillis(from), "to": isoMillis(to)})
	return nil
}

// statsRefresh is POST /api/v1/stats/refresh. Views are computed from the
// live state at every request, so there is nothing to refresh (Queen 2.x
// answers the same).
func (s *Server) statsRefresh(ctx *fasthttp.RequestCtx) error {
	writeJSON(ctx, http.StatusOK, map[string]any{"success": true, "refreshed": false, "engine": "raft"})
	return nil
}

// tenantQueuesWithParts is the tenant's queues with partitions, filtered
// by the queue, namespace and task query parameters.
func (s *Server) tenantQueuesWithParts(ctx *fasthttp.RequestCtx) (*tenantView, []storage.QueueView, error) {
	return s.queueViews(ctx, storage.QueueFilter{Name: strArg(ctx, "queue"), Partitions: true})
}
