package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/crypto/authn"
)

// routeMetrics are one route's request counters and latency histogram,
// named family_requests_total and family_request_duration_seconds:
// queen_http for the broker port, queen_node for the node routes peers call.
type routeMetrics struct {
	set      *metrics.Set
	family   string
	label    string
	duration *metrics.Histogram
}

func newRouteMetrics(set *metrics.Set, family string, rt route) *routeMetrics {
	label := fmt.Sprintf(`method=%q,route=%q`, rt.method, rt.path)
	return &routeMetrics{
		set:      set,
		family:   family,
		label:    label,
		duration: set.NewHistogram(family + `_request_duration_seconds{` + label + `}`),
	}
}

func (m *routeMetrics) observe(status int, start time.Time) {
	m.duration.UpdateDuration(start)
	m.set.GetOrCreateCounter(m.family + `_requests_total{` + m.label + `,status="` + strconv.Itoa(status) + `"}`).Inc()
}

// metricsPrometheus is GET /metrics/prometheus: request metrics, raft state
// per group and process metrics, in the Prometheus text format, and the
// per-queue families. Those name tenants: in tenancy mode with broker JWT
// on they are served to admin tokens only, since a tenant id is half of a
// Kafka login (the token is the other half).
func (s *Server) metricsPrometheus(ctx *fasthttp.RequestCtx) error {
	var buf bytes.Buffer
	s.metrics.WritePrometheus(&buf)
	s.writeRaftMetrics(&buf)
	if !s.cfg.TenancyHeader || s.callerAllows(ctx, authn.LevelAdmin) {
		s.writeQueueMetrics(&buf)
	}
	metrics.WriteProcessMetrics(&buf)
	ctx.SetStatusCode(http.StatusOK)
	ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	ctx.SetBody(buf.Bytes())
	return nil
}

func (s *Server) writeRaftMetrics(w io.Writer) {
	host := s.engine.Host()
	full := uint64(0)
	if host.StorageFull() {
		full = 1
	}
	metrics.WriteGaugeUint64(w, "queen_storage_full", full)
	// This node's clock (raftgroups/clock): how far it runs from the
	// local wall clock, the cluster's median at the last comparison, how
	// often it took the cluster's time and ignored a wall-clock jump.
	cs := host.ClockStats()
	synced := uint64(0)
	if cs.Synced {
		synced = 1
	}
	metrics.WriteGaugeUint64(w, "queen_clock_synced", synced)
	metrics.WriteGaugeFloat64(w, "queen_clock_wall_offset_ms", float64(cs.WallOffset))
	metrics.WriteGaugeFloat64(w, "queen_clock_cluster_offset_ms", float64(cs.ClusterOffset))
	metrics.WriteCounterUint64(w, "queen_clock_corrections_total", cs.Corrections)
	metrics.WriteCounterUint64(w, "queen_clock_steps_ignored_total", cs.Steps)
	for _, st := range host.Status() {
		g := fmt.Sprintf(`{group="%d"}`, st.Group)
		isLeader := uint64(0)
		if st.IsLeader {
			isLeader = 1
		}
		metrics.WriteGaugeUint64(w, "queen_raft_leader_id"+g, st.LeaderID)
		metrics.WriteGaugeUint64(w, "queen_raft_is_leader"+g, isLeader)
		metrics.WriteGaugeUint64(w, "queen_raft_term"+g, st.Term)
		metrics.WriteGaugeUint64(w, "queen_raft_applied_index"+g, st.Applied)
		metrics.WriteGaugeUint64(w, "queen_raft_commit_index"+g, st.Commit)
		files, bytes := host.SegmentStats(st.Group)
		metrics.WriteGaugeUint64(w, "queen_storage_segment_files"+g, uint64(files))
		metrics.WriteGaugeUint64(w, "queen_storage_segment_bytes"+g, uint64(bytes))
		metrics.WriteCounterUint64(w, "queen_storage_corrupt_chunks_total"+g, host.CorruptChunks(st.Group))
		if t := host.Transport(st.Group); t != nil {
			metrics.WriteCounterUint64(w, "queen_raft_rpc_refused_total"+g, t.Refused())
			metrics.WriteCounterUint64(w, "queen_raft_rpc_rejected_total"+g, t.Rejected())
			metrics.WriteCounterUint64(w, "queen_raft_tls_refused_total"+g, t.TLSRefused())
			metrics.WriteCounterUint64(w, "queen_raft_batches_oversized_total"+g, t.Oversized())
		}
	}
}
