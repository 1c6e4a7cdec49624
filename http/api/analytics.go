package api

import (
	"cmp"
	"net/http"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage"
)

// Analytics views (spec §2.3 rows 31–39). Queen's dashboard reads these
// from worker and stats tables its PostgreSQL-era server sampled; here
// each answers from what the engine knows now: the replicated state,
// the apply loop's per-minute activity (last hour since this node
// started) and this process. Where a number is not recorded it is 0 and
// docs/http-api.md says so.

type dlqSignature struct {
	Error     string   `json:"error"`
	Count     int      `json:"count"`
	Queues    []string `json:"queues"`
	FirstSeen string   `json:"firstSeen"`
	LastSeen  string   `json:"lastSeen"`
}

// dlqSignatures groups the tenant's live dead-letter rows by error text,
// most frequent first, and counts rows and distinct partitions.
func dlqSignatures(v *tenantView, queue string) ([]dlqSignature, int, int, error) {
	rows, total, err := v.dlq(storage.DLQFilter{Queue: queue, Offset: -1}, 0, 1<<30)
	if err != nil {
		return nil, 0, 0, err
	}
	type agg struct {
		sig         dlqSignature
		first, last int64
		queues      map[string]bool
	}
	by := map[string]*agg{}
	parts := map[uint64]bool{}
	for _, r := range rows {
		parts[r.PartitionID] = true
		a := by[r.Error]
		if a == nil {
			a = &agg{sig: dlqSignature{Error: r.Error}, first: r.FailedMs, queues: map[string]bool{}}
			by[r.Error] = a
		}
		a.sig.Count++
		a.first, a.last = min(a.first, r.FailedMs), max(a.last, r.FailedMs)
		if !a.queues[r.Queue] {
			a.queues[r.Queue] = true
			a.sig.Queues = append(a.sig.Queues, r.Queue)
		}
	}
	out := make([]dlqSignature, 0, len(by))
	for _, a := range by {
		a.sig.FirstSeen, a.sig.LastSeen = isoMillis(a.first), isoMillis(a.last)
		slices.Sort(a.sig.Queues)
		out = append(out, a.sig)
	}
	slices.SortFunc(out, func(a, b dlqSignature) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Error, b.Error)
	})
	return out, total, len(parts), nil
}

// dlqSignaturesRoute is GET /api/v1/analytics/dlq-signatures[?queue=].
func (s *Server) dlqSignaturesRoute(ctx *fasthttp.RequestCtx) error {
	v, err := s.viewOfTenant(ctx)
	if err != nil {
		return err
	}
	sigs, total, affected, err := dlqSignatures(v, strArg(ctx, "queue"))
	if err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"signatures": sigs, "totalMessages": total, "affectedPartitions": affected})
	return nil
}

// processSample is this process's resource use now.
func processSample() map[string]any {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return map[string]any{
		"timestamp": isoMillis(nowMs()),
		"cpu": map[string]int64{"userUs": ru.Utime.Sec*1e6 + int64(ru.Utime.Usec),
			"systemUs": ru.Stime.Sec*1e6 + int64(ru.Stime.Usec)},
		"memory": map[string]uint64{"rssBytes": uint64(ru.Maxrss) * 1024, "heapBytes": ms.HeapAlloc,
			"heapSysBytes": ms.HeapSys, "sysBytes": ms.Sys},
		"goroutines": runtime.NumGoroutine(),
	}
}

// systemMetrics is GET /api/v1/analytics/system-metrics: this node's
// process sample now (rssBytes is the peak resident size the kernel
// reports). No history is sampled, so the series has one point.
func (s *Server) systemMetrics(ctx *fasthttp.RequestCtx) error {
	from, to, err := timeRange(ctx, 3600_000)
	if err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{
		"timeRange": map[string]string{"from": isoMillis(from), "to": isoMillis(to)},
		"replicas": []map[string]any{{"nodeId": s.engine.Host().NodeID(), "uptimeSeconds": int64(time.Since(s.started).Seconds()),
			"timeSeries": []map[string]any{processSample()}}},
	})
	return nil
}

// workerMetrics is GET /api/v1/analytics/worker-metrics: per-minute
// commands and messages of the tenant (or one queue).
func (s *Server) workerMetrics(ctx *fasthttp.RequestCtx) error {
	from, to, err := timeRange(ctx, 3600_000)
	if err != nil {
		return err
	}
	v, err := s.viewOfTenant(ctx)
	if err != nil {
		return err
	}
	points := throughputPoints(v.series(strArg(ctx, "queue"), from, to))
	writeJSON(ctx, http.StatusOK, map[string]any{"timeRange": map[string]string{"from": isoMillis(from), "to": isoMillis(to)},
		"bucketMinutes": 1, "pointCount": len(points), "timeSeries": points})
	return nil
}

// queueActivity is one queue's activity over a range, with rates.
func queueActivity(v *tenantView, q string, from, to int64) (storage.Activity, float64) {
	a := sumSeries(v.series(q, from, to))
	return a, max(float64(to-from)/1000, 1)
}

// queueLagRoute is GET /api/v1/analytics/queue-lag: per queue, messages
// not yet consumed by its most-behind group, the oldest one's age, and
// push/pop rates over the range.
func (s *Server) queueLagRoute(ctx *fasthttp.RequestCtx) error {
	from, to, err := timeRange(ctx, 3600_000)
	if err != nil {
		return err
	}
	v, _, qs, next, err := s.queueRowsPage(ctx)
	if err != nil {
		return err
	}
	now := nowMs()
	out := make([]map[string]any, 0, len(qs))
	for i := range qs {
		var lag lagStats
		queueLag(v, &qs[i], now, &lag)
		a, secs := queueActivity(v, qs[i].Name, from, to)
		out = append(out, map[string]any{"queue": qs[i].Name, "lagMessages": lag.offsetSum, "maxOffsetLag": lag.offsetMax,
			"maxTimeLagSeconds": lag.timeMax, "partitionsWithLag": lag.count,
			"pushPerSecond": perSecond(a.Pushed, secs), "popPerSecond": perSecond(a.Popped, secs),
			"ackPerSecond": perSecond(a.Completed, secs)})
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"timeRange": map[string]string{"from": isoMillis(from), "to": isoMillis(to)},
		"queues": out, "nextCursor": next})
	return nil
}

// queueOps is GET /api/v1/analytics/queue-ops: per queue, commands and
// messages over the range, and its partition count now.
func (s *Server) queueOps(ctx *fasthttp.RequestCtx) error {
	from, to, err := timeRange(ctx, 3600_000)
	if err != nil {
		return err
	}
	v, _, qs, next, err := s.queueRowsPage(ctx)
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(qs))
	for i := range qs {
		a, _ := queueActivity(v, qs[i].Name, from, to)
		out = append(out, map[string]any{"queue": qs[i].Name, "push": a.PushOps, "pop": a.PopOps, "ack": a.AckOps,
			"pushMessages": a.Pushed, "popMessages": a.Popped, "ackMessages": a.Completed, "ackFailed": a.Failed,
			"dlq": a.DLQ, "partitions": qs[i].Totals.Partitions})
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"timeRange": map[string]string{"from": isoMillis(from), "to": isoMillis(to)},
		"queues": out, "nextCursor": next})
	return nil
}

// workload is GET /api/v1/analytics/workload: what waits and what is in
// flight per queue now.
func (s *Server) workload(ctx *fasthttp.RequestCtx) error {
	_, all, qs, next, err := s.queueRowsPage(ctx)
	if err != nil {
		return err
	}
	var totals messageCounts
	for i := range all {
		totals.add(queueCounts(&all[i]))
	}
	out := make([]map[string]any, 0, len(qs))
	for i := range qs {
		c := queueCounts(&qs[i])
		leases, groups := 0, len(qs[i].Subscriptions)
		for _, p := range qs[i].Partitions {
			for _, cur := range p.Cursors {
				if cur.LeaseExpiresMs > 0 {
					leases++
				}
			}
		}
		out = append(out, map[string]any{"queue": qs[i].Name, "partitions": len(qs[i].Partitions), "pending": c.Pending,
			"processing": c.Processing, "deadLetter": c.DeadLetter, "activeLeases": leases, "consumerGroups": groups})
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"queues": out, "totals": totals, "nextCursor": next})
	return nil
}

// parkedReplicas is GET /api/v1/analytics/queue-parked-replicas: requests
// parked on each queue (long-polling pops and fetches) on this node. Other
// nodes report their own.
func (s *Server) parkedReplicas(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	parked := s.engine.Parked()[tenant]
	queues := make([]map[string]any, 0, len(parked))
	total := 0
	for _, q := range sortedKeys(parked) {
		if want := strArg(ctx, "queue"); want != "" && q != want {
			continue
		}
		total += parked[q]
		queues = append(queues, map[string]any{"queue": q, "parked": parked[q]})
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"replicas": []map[string]any{{"nodeId": s.engine.Host().NodeID(),
		"parked": total, "queues": queues}}})
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// retention is GET /api/v1/analytics/retention: per queue, its retention
// settings, how many messages are retained and how many retention removed
// (every offset below a partition's log start).
func (s *Server) retention(ctx *fasthttp.RequestCtx) error {
	_, _, qs, next, err := s.queueRowsPage(ctx)
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(qs))
	for i := range qs {
		var retained, removed uint64
		for _, p := range qs[i].Partitions {
			retained += p.Retained()
			removed += min(p.LogStart, p.HighWatermark)
		}
		c := &qs[i].Config
		out = append(out, map[string]any{"queue": qs[i].Name, "retentionEnabled": c.RetentionEnabled,
			"retentionSeconds": c.RetentionSec, "completedRetentionSeconds": c.CompletedRetentionSec,
			"maxWaitTimeSeconds": c.MaxWaitTimeSec, "retained": retained, "removed": removed})
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"queues": out, "nextCursor": next})
	return nil
}

// partitionLiveness is GET /api/v1/analytics/partition-liveness: per
// partition, when it was last written, how long it has been idle, and
// whether a consumer holds it now: "active" (a live lease), "idle"
// (messages, nobody on them), "drained" (every group caught up) or
// "empty".
func (s *Server) partitionLiveness(ctx *fasthttp.RequestCtx) error {
	p, err := readPage(ctx, defaultPageLimit, 100000)
	if err != nil {
		return err
	}
	_, qs, err := s.tenantQueuesWithParts(ctx)
	if err != nil {
		return err
	}
	now := nowMs()
	out := []map[string]any{}
	counts := map[string]int{"active": 0, "idle": 0, "drained": 0, "empty": 0}
	next, err := eachPartition(ctx, p, qs, func(q *storage.QueueView, pv *storage.PartitionView, onPage bool) {
		pending, processing, _ := pv.Depth()
		state := "empty"
		switch {
		case processing > 0:
			state = "active"
		case pending > 0:
			state = "idle"
		case pv.Retained() > 0:
			state = "drained"
		}
		counts[state]++
		if !onPage {
			return
		}
		var idle int64
		if pv.LastWriteMs > 0 {
			idle = max(now-pv.LastWriteMs, 0) / 1000
		}
		out = append(out, map[string]any{"queue": q.Name, "partition": pv.Name, "partitionId": pidString(pv.ID),
			"lastWriteAt": isoOrNil(pv.LastWriteMs), "idleSeconds": idle, "state": state, "pending": pending,
			"processing": processing, "consumerGroups": len(pv.Cursors)})
	})
	if err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"partitions": out, "summary": counts, "nextCursor": next})
	return nil
}

// queueRowsPage reads the tenant's queues (by name, with partitions,
// filtered by queue, namespace and task) and the page of them a per-queue
// analytics listing answers, with the next page's cursor, also set in the
// header.
func (s *Server) queueRowsPage(ctx *fasthttp.RequestCtx) (v *tenantView, all, page []storage.QueueView, next *string, err error) {
	p, err := readPage(ctx, defaultPageLimit, maxPageLimit)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if v, all, err = s.tenantQueuesWithParts(ctx); err != nil {
		return nil, nil, nil, nil, err
	}
	if page, next, err = pageOf(p, all, queueKey, cmpName); err != nil {
		return nil, nil, nil, nil, err
	}
	setNextCursor(ctx, next)
	return v, all, page, next, nil
}
