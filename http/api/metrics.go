package api

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
)

// GET /metrics/prometheus in the Prometheus text format: every family with
// its HELP and TYPE lines (docs/metrics.md lists them). Counters, gauges
// and histograms updated as things happen live in the shared metrics.Set
// (this package's, the raft groups' and the Kafka broker's); what is read
// from state at scrape time (raft status, queues, consumer lag, disk) is
// written here, family by family. cmd/queen turns on the library's
// metadata (metrics.ExposeMetadata) for the set's families; the hand-written
// ones always carry theirs.

// routeMetrics are one route's request counters and latency histogram,
// named family_requests_total and family_request_duration_seconds:
// queen_http for the broker port, queen_node for the node routes peers call.
// The histogram is made at the route's first request, so the scrape does
// not carry a score of empty buckets for each of the routes never called.
type routeMetrics struct {
	set      *metrics.Set
	family   string
	label    string
	duration atomic.Pointer[metrics.PrometheusHistogram]
	// byStatus holds the request counters by status, each made at the
	// status's first answer: a request then reads a map instead of
	// building the series name and looking it up in the set. Replaced
	// whole under mu, never changed in place.
	byStatus atomic.Pointer[map[int]*metrics.Counter]
	mu       sync.Mutex
}

func newRouteMetrics(set *metrics.Set, family string, rt route) *routeMetrics {
	m := &routeMetrics{set: set, family: family, label: fmt.Sprintf(`method=%q,route=%q`, rt.method, rt.path)}
	m.byStatus.Store(&map[int]*metrics.Counter{})
	return m
}

func (m *routeMetrics) observe(status int, start time.Time) {
	h := m.duration.Load()
	if h == nil {
		h = m.set.GetOrCreatePrometheusHistogramExt(m.family+`_request_duration_seconds{`+m.label+`}`, raftgroups.LatencyBuckets)
		m.duration.Store(h)
	}
	h.UpdateDuration(start)
	c := (*m.byStatus.Load())[status]
	if c == nil {
		c = m.addStatus(status)
	}
	c.Inc()
}

// addStatus makes the counter of a status the route had not answered yet.
func (m *routeMetrics) addStatus(status int) *metrics.Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.byStatus.Load()
	if c := old[status]; c != nil {
		return c
	}
	c := m.set.GetOrCreateCounter(m.family + `_requests_total{` + m.label + `,status="` + strconv.Itoa(status) + `"}`)
	next := make(map[int]*metrics.Counter, len(old)+1)
	maps.Copy(next, old)
	next[status] = c
	m.byStatus.Store(&next)
	return c
}

// trafficMetrics count the messages and bytes the HTTP data plane moved on
// this node: pushes accepted and pops answered with messages.
type trafficMetrics struct {
	pushMessages, pushBytes *metrics.Counter
	popMessages, popBytes   *metrics.Counter
}

func newTrafficMetrics(set *metrics.Set) *trafficMetrics {
	return &trafficMetrics{
		pushMessages: set.GetOrCreateCounter("queen_http_push_messages_total"),
		pushBytes:    set.GetOrCreateCounter("queen_http_push_bytes_total"),
		popMessages:  set.GetOrCreateCounter("queen_http_pop_messages_total"),
		popBytes:     set.GetOrCreateCounter("queen_http_pop_bytes_total"),
	}
}

// pushed counts a push's queued messages (not its errors or duplicates)
// and its body bytes.
func (t *trafficMetrics) pushed(answers []pushAnswer, bodyBytes int) {
	queued := 0
	for i := range answers {
		if answers[i].Status == "queued" {
			queued++
		}
	}
	if queued > 0 {
		t.pushMessages.Add(queued)
		t.pushBytes.Add(bodyBytes)
	}
}

// popped counts a pop's delivered messages and its response bytes.
func (t *trafficMetrics) popped(messages, bodyBytes int) {
	if messages > 0 {
		t.popMessages.Add(messages)
		t.popBytes.Add(bodyBytes)
	}
}

// metricsPrometheus is GET /metrics/prometheus: the shared set, raft state
// per group, disk use, process metrics and the per-queue families. Those
// name tenants: in tenancy mode with broker JWT on they are served to the
// operator only (callerIsOperator: a tenant's admin would see the others),
// since a tenant id is half of a Kafka login (the token is the other half).
func (s *Server) metricsPrometheus(ctx *fasthttp.RequestCtx) error {
	var set bytes.Buffer
	s.metrics.WritePrometheus(&set)
	metrics.WriteProcessMetrics(&set)
	var buf bytes.Buffer
	addHelp(&buf, set.Bytes())
	p := promText{b: &buf}
	s.writeNodeMetrics(p)
	s.writeRaftMetrics(p)
	s.writeStreamsMetrics(p)
	if !s.cfg.TenancyHeader || s.callerIsOperator(ctx) {
		s.writeQueueMetrics(p)
	}
	ctx.SetStatusCode(http.StatusOK)
	ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	ctx.SetBody(buf.Bytes())
	return nil
}

// writeNodeMetrics writes this node's storage, clock and disk families.
func (s *Server) writeNodeMetrics(p promText) {
	host := s.engine.Host()
	p.family("queen_storage_full", "gauge")
	p.value("queen_storage_full", "", boolValue(host.StorageFull()))
	// This node's clock (raftgroups/clock): how far it runs from the
	// local wall clock, the cluster's median at the last comparison, how
	// often it took the cluster's time and ignored a wall-clock jump.
	cs := host.ClockStats()
	p.family("queen_clock_synced", "gauge")
	p.value("queen_clock_synced", "", boolValue(cs.Synced))
	p.family("queen_clock_wall_offset_seconds", "gauge")
	p.float("queen_clock_wall_offset_seconds", "", float64(cs.WallOffset)/1000)
	p.family("queen_clock_cluster_offset_seconds", "gauge")
	p.float("queen_clock_cluster_offset_seconds", "", float64(cs.ClusterOffset)/1000)
	p.family("queen_clock_corrections_total", "counter")
	p.value("queen_clock_corrections_total", "", cs.Corrections)
	p.family("queen_clock_steps_ignored_total", "counter")
	p.value("queen_clock_steps_ignored_total", "", cs.Steps)
	du, err := host.DiskUse()
	if err != nil {
		s.log.Warn("metrics: cannot measure the data dir", "err", err)
		return
	}
	p.family("queen_data_dir_bytes", "gauge")
	p.value("queen_data_dir_bytes", "", du.DirBytes)
	p.family("queen_data_dir_filesystem_size_bytes", "gauge")
	p.value("queen_data_dir_filesystem_size_bytes", "", du.FSSizeBytes)
	p.family("queen_data_dir_filesystem_available_bytes", "gauge")
	p.value("queen_data_dir_filesystem_available_bytes", "", du.FSAvailBytes)
}

// writeRaftMetrics writes each group's raft and store state, one family
// at a time (a family's samples must follow its TYPE line together).
func (s *Server) writeRaftMetrics(p promText) {
	host := s.engine.Host()
	status := host.Status()
	labels := make([]string, len(status))
	for i, st := range status {
		labels[i] = fmt.Sprintf(`{group="%d"}`, st.Group)
	}
	// A group's segment stats stat every segment file: read once a scrape.
	segFiles, segBytes := make([]uint64, len(status)), make([]uint64, len(status))
	for i := range status {
		files, n := host.SegmentStats(status[i].Group)
		segFiles[i], segBytes[i] = uint64(files), uint64(n)
	}
	perGroup := func(name, typ string, value func(i int) uint64) {
		p.family(name, typ)
		for i := range status {
			p.value(name, labels[i], value(i))
		}
	}
	perGroup("queen_raft_leader_id", "gauge", func(i int) uint64 { return status[i].LeaderID })
	perGroup("queen_raft_is_leader", "gauge", func(i int) uint64 { return boolValue(status[i].IsLeader) })
	perGroup("queen_raft_term", "gauge", func(i int) uint64 { return status[i].Term })
	perGroup("queen_raft_applied_index", "gauge", func(i int) uint64 { return status[i].Applied })
	perGroup("queen_raft_commit_index", "gauge", func(i int) uint64 { return status[i].Commit })
	perGroup("queen_raft_apply_lag_entries", "gauge", func(i int) uint64 { return status[i].Commit - min(status[i].Applied, status[i].Commit) })
	perGroup("queen_storage_segment_files", "gauge", func(i int) uint64 { return segFiles[i] })
	perGroup("queen_storage_segment_bytes", "gauge", func(i int) uint64 { return segBytes[i] })
	perGroup("queen_storage_corrupt_chunks_total", "counter", func(i int) uint64 { return host.CorruptChunks(status[i].Group) })
	for _, f := range []struct {
		name  string
		value func(t transportCounters) uint64
	}{
		{"queen_raft_rpc_refused_total", transportCounters.Refused},
		{"queen_raft_rpc_rejected_total", transportCounters.Rejected},
		{"queen_raft_tls_refused_total", transportCounters.TLSRefused},
		{"queen_raft_batches_oversized_total", transportCounters.Oversized},
		{"queen_link_refused_total", transportCounters.LinkRefused},
	} {
		p.family(f.name, "counter")
		for i := range status {
			if t := host.Transport(status[i].Group); t != nil {
				p.value(f.name, labels[i], f.value(t))
			}
		}
	}
}

// transportCounters are the refusals a group's raft transport counts.
type transportCounters interface {
	Refused() uint64
	Rejected() uint64
	TLSRefused() uint64
	Oversized() uint64
	LinkRefused() uint64
}

func boolValue(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
