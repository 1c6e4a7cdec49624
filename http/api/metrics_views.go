package api

import (
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage"
)

// Queue and consumer-group metrics, for GET /metrics (JSON, spec §2.18) and
// GET /metrics/prometheus. Both read this node's stores without a barrier:
// metrics are a local sample. "In" counts every message ever appended (the
// partitions' high-water marks: exact and persistent); "out", completed,
// failed and dead-lettered count what the apply loop did since this node
// started.

// defaultGroupLagMaxCursors caps the cursors the per-partition lag family
// walks (QUEEN_METRICS_GROUP_LAG_MAX_CURSORS).
const defaultGroupLagMaxCursors = 200000

// allQueues is every tenant's queues, each merged over the groups holding
// its partitions, so a queue is one series whatever groups it spans; with
// its partitions when a group holds at most maxPartitions of them.
func (s *Server) allQueues(maxPartitions int) []storage.QueueView {
	return s.engine.AllQueues(nowMs(), maxPartitions)
}

// defaultLagPartitionsMax is QUEEN_METRICS_LAG_PARTITIONS_MAX's default:
// a Kafka topic's partitions each get a lag series, a queue partitioned
// per customer (thousands of partitions) gets the per-queue sum only.
const defaultLagPartitionsMax = 32

// queueSeries is one queue's samples, gathered once per scrape so each
// family can be written whole.
type queueSeries struct {
	labels string // {tenant,queue}
	q      *storage.QueueView
	counts messageCounts
	groups []string          // groups with a cursor, in first-seen order
	lag    map[string]uint64 // by group, all partitions
	parts  []partitionLag    // nil when the queue has too many partitions
}

type partitionLag struct {
	labels string // {tenant,queue,partition,group}
	lag    uint64
}

// writeQueueMetrics writes the per-queue and consumer-group families. A
// Kafka group's committed offset is its Queen cursor, so the lag families
// cover HTTP and Kafka groups alike. The per-queue figures come kept by
// the store; a queue over LagPartitionsMax partitions gets its lag per
// queue only (no partition of it is copied), so a queue partitioned per
// key cannot add a series per key and group, and the cursors walked for
// the per-partition family are capped (GroupLagMaxCursors).
func (s *Server) writeQueueMetrics(p promText) {
	budget := s.cfg.GroupLagMaxCursors
	if budget <= 0 {
		budget = defaultGroupLagMaxCursors
	}
	partsMax := s.cfg.LagPartitionsMax
	if partsMax <= 0 {
		partsMax = defaultLagPartitionsMax
	}
	truncated, collapsed := false, uint64(0)
	queues := s.allQueues(partsMax)
	series := make([]queueSeries, len(queues))
	for i := range queues {
		q := &queues[i]
		qs := &series[i]
		qs.q, qs.counts, qs.lag = q, queueCounts(q), map[string]uint64{}
		qs.labels = fmt.Sprintf(`{tenant="%s",queue=%q}`, q.Tenant, q.Name)
		// The store keeps each group's lag per queue; only a queue of at
		// most partsMax partitions gets a series per partition.
		for g, l := range q.Lags {
			qs.groups = append(qs.groups, g)
			qs.lag[g] = l.Lag
		}
		slices.Sort(qs.groups)
		if q.Totals.Partitions > partsMax || len(q.Partitions) != q.Totals.Partitions {
			collapsed++
			continue
		}
		for pi := range q.Partitions {
			part := &q.Partitions[pi]
			for _, cur := range part.Cursors {
				if budget == 0 {
					truncated = true
					break
				}
				budget--
				qs.parts = append(qs.parts, partitionLag{lag: min(cur.Backlog(part.HighWatermark), part.Retained()),
					labels: fmt.Sprintf(`{tenant="%s",queue=%q,partition=%q,group=%q}`, q.Tenant, q.Name, part.Name, cur.Group)})
			}
		}
	}
	perQueue := func(name, typ string, value func(qs *queueSeries) uint64) {
		p.family(name, typ)
		for i := range series {
			p.value(name, series[i].labels, value(&series[i]))
		}
	}
	perQueue("queen_queue_messages_in_total", "counter", func(qs *queueSeries) uint64 { return qs.q.Appended })
	perQueue("queen_queue_messages_out_total", "counter", func(qs *queueSeries) uint64 { return qs.q.Activity.Popped })
	perQueue("queen_queue_messages_completed_total", "counter", func(qs *queueSeries) uint64 { return qs.q.Activity.Completed })
	perQueue("queen_queue_messages_failed_total", "counter", func(qs *queueSeries) uint64 { return qs.q.Activity.Failed })
	perQueue("queen_queue_messages_dead_lettered_total", "counter", func(qs *queueSeries) uint64 { return qs.q.Activity.DLQ })
	perQueue("queen_queue_depth", "gauge", func(qs *queueSeries) uint64 { return qs.counts.Pending + qs.counts.Processing })
	perQueue("queen_queue_messages_retained", "gauge", func(qs *queueSeries) uint64 { return qs.counts.Total })
	perQueue("queen_queue_dlq_messages", "gauge", func(qs *queueSeries) uint64 { return qs.counts.DeadLetter })
	perQueue("queen_queue_partitions", "gauge", func(qs *queueSeries) uint64 { return uint64(qs.q.Totals.Partitions) })
	p.family("queen_consumer_group_lag_messages", "gauge")
	for i := range series {
		qs := &series[i]
		for _, g := range qs.groups {
			p.value("queen_consumer_group_lag_messages", fmt.Sprintf(`{tenant="%s",queue=%q,group=%q}`, qs.q.Tenant, qs.q.Name, g), qs.lag[g])
		}
	}
	p.family("queen_consumer_group_partition_lag_messages", "gauge")
	for i := range series {
		for _, pl := range series[i].parts {
			p.value("queen_consumer_group_partition_lag_messages", pl.labels, pl.lag)
		}
	}
	p.family("queen_consumer_group_lag_truncated", "gauge")
	p.value("queen_consumer_group_lag_truncated", "", boolValue(truncated))
	p.family("queen_consumer_group_lag_collapsed_queues", "gauge")
	p.value("queen_consumer_group_lag_collapsed_queues", "", collapsed)
}

// metricsJSON is GET /metrics: uptime, request and message totals with
// their average rates since start, memory, CPU and raft state (group 0's
// in "raft", every group's in "groups").
func (s *Server) metricsJSON(ctx *fasthttp.RequestCtx) error {
	up := time.Since(s.started).Seconds()
	var msgs, out uint64
	for _, q := range s.allQueues(0) {
		msgs += q.Appended
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
	if s.engine != nil {
		// The data dir's size and its filesystem's room, as the
		// queen_data_dir_* families show them (the dashboard's System page).
		if du, err := s.engine.Host().DiskUse(); err == nil {
			ans["disk"] = map[string]uint64{"dataDirBytes": du.DirBytes, "filesystemBytes": du.FSSizeBytes, "availableBytes": du.FSAvailBytes}
		}
	}
	writeJSON(ctx, http.StatusOK, ans)
	return nil
}
