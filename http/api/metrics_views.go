package api

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage"
)

// Queue and consumer-group metrics, for GET /metrics (JSON, spec §2.18) and
// GET /metrics/prometheus. Both read this node's stores without a barrier:
// metrics are a local sample. "In" counts every message ever appended (the
// partitions' high-water marks: exact and persistent); "out", completed,
// failed and dead-lettered count what the apply loop did since this node
// started.

// defaultGroupLagMaxCursors caps the cursors the consumer-group lag
// families walk (QUEEN_METRICS_GROUP_LAG_MAX_CURSORS).
const defaultGroupLagMaxCursors = 200000

// allQueues is every tenant's queues, each merged over the groups holding
// its partitions, so a queue is one series whatever groups it spans.
func (s *Server) allQueues() []storage.QueueView {
	return s.engine.AllQueues(nowMs())
}

func appended(q *storage.QueueView) uint64 {
	var n uint64
	for _, p := range q.Partitions {
		n += p.HighWatermark
	}
	return n
}

// writeQueueMetrics writes the per-queue and per-group families.
func (s *Server) writeQueueMetrics(w io.Writer) {
	budget := s.cfg.GroupLagMaxCursors
	if budget <= 0 {
		budget = defaultGroupLagMaxCursors
	}
	truncated := uint64(0)
	for _, q := range s.allQueues() {
		l := fmt.Sprintf(`{tenant="%s",queue=%q}`, q.Tenant, q.Name)
		c := queueCounts(&q)
		metrics.WriteCounterUint64(w, "queen_queue_messages_in_total"+l, appended(&q))
		metrics.WriteCounterUint64(w, "queen_queue_messages_out_total"+l, q.Activity.Popped)
		metrics.WriteCounterUint64(w, "queen_queue_messages_completed_total"+l, q.Activity.Completed)
		metrics.WriteCounterUint64(w, "queen_queue_messages_failed_total"+l, q.Activity.Failed)
		metrics.WriteCounterUint64(w, "queen_queue_messages_dead_lettered_total"+l, q.Activity.DLQ)
		metrics.WriteGaugeUint64(w, "queen_queue_depth"+l, c.Pending+c.Processing)
		metrics.WriteGaugeUint64(w, "queen_queue_messages_retained"+l, c.Total)
		metrics.WriteGaugeUint64(w, "queen_queue_dlq_messages"+l, c.DeadLetter)
		metrics.WriteGaugeUint64(w, "queen_queue_partitions"+l, uint64(len(q.Partitions)))
		lag := map[string]uint64{}
		var groups []string
		for _, p := range q.Partitions {
			for _, cur := range p.Cursors {
				if budget == 0 {
					truncated = 1
					break
				}
				budget--
				if _, ok := lag[cur.Group]; !ok {
					groups = append(groups, cur.Group)
				}
				lag[cur.Group] += min(cur.Backlog(p.HighWatermark), p.Retained())
			}
		}
		for _, g := range groups {
			gl := fmt.Sprintf(`{tenant="%s",queue=%q,group=%q}`, q.Tenant, q.Name, g)
			metrics.WriteGaugeUint64(w, "queen_consumer_group_lag_messages"+gl, lag[g])
		}
	}
	metrics.WriteGaugeUint64(w, "queen_consumer_group_lag_truncated", truncated)
}

// metricsJSON is GET /metrics: uptime, request and message totals with
// their average rates since start, memory, CPU and raft state (group 0's
// in "raft", every group's in "groups").
func (s *Server) metricsJSON(ctx *fasthttp.RequestCtx) error {
	up := time.Since(s.started).Seconds()
	var msgs, out uint64
	for _, q := range s.allQueues() {
		msgs += appended(&q)
		out += q.Activity.Popped
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	sample := processSample()
	reqs := s.requests.Load()
	groups := s.raftHealth()
	ans := map[string]any{
		"uptime":   int64(up),
		"requests": map[string]any{"total": reqs, "rate": perSecond(reqs, max(up, 1))},
		"messages": map[string]any{"total": msgs, "rate": perSecond(msgs, max(up, 1)), "delivered": out},
		"memory": map[string]uint64{"rss": sample["memory"].(map[string]uint64)["rssBytes"], "heapTotal": ms.HeapSys,
			"heapUsed": ms.HeapAlloc, "external": 0, "arrayBuffers": 0},
		"cpu":    map[string]int64{"user": sample["cpu"].(map[string]int64)["userUs"], "system": sample["cpu"].(map[string]int64)["systemUs"]},
		"engine": "raft", "groups": groups,
	}
	if len(groups) > 0 {
		ans["raft"] = groups[0]
	}
	writeJSON(ctx, http.StatusOK, ans)
	return nil
}
