package api

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Helpers shared by the read-only views (resources, status, analytics,
// messages, DLQ, consumer groups).

// tenantView reads one tenant's state from this node's replicas of the
// groups holding it. A queue's partitions, dead letters and activity are
// spread over several groups; the engine merges them, and a partition is
// read from the group store holding it.
type tenantView struct {
	engine *raftgroups.Engine
	tenant wire.ID
}

// view is tenant's view after a read barrier on every group its data may
// be in, so the view is linearizable (spec §2.1: a follower answers only
// once it has applied what the leaders had committed).
func (s *Server) view(tenant wire.ID) (*tenantView, error) {
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	if err := s.engine.BarrierGroups(rctx, s.engine.TenantGroups(tenant)); err != nil {
		return nil, err
	}
	return &tenantView{engine: s.engine, tenant: tenant}, nil
}

// viewOfTenant is the view of the request's tenant.
func (s *Server) viewOfTenant(ctx *fasthttp.RequestCtx) (*tenantView, error) {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return nil, err
	}
	return s.view(tenant)
}

// queues is the tenant's queues matching f, each merged over its groups.
func (v *tenantView) queues(f storage.QueueFilter, nowMs int64) []storage.QueueView {
	return v.engine.Queues(v.tenant, f, nowMs)
}

// series is the per-minute activity of the tenant (one queue when queue is
// set) over every group.
func (v *tenantView) series(queue string, fromMs, toMs int64) []storage.MinuteActivity {
	return v.engine.Series(v.tenant, queue, fromMs, toMs)
}

// dlq is the tenant's dead-letter rows matching f over every group.
func (v *tenantView) dlq(f storage.DLQFilter, skip, limit int) ([]storage.DLQRow, int, error) {
	return v.engine.DLQ(v.tenant, f, skip, limit)
}

// partition is a reader's handle on a partition by id, from the group
// store holding it.
func (v *tenantView) partition(pid uint64) (storage.Partition, bool) {
	return v.engine.PartitionByID(v.tenant, pid)
}

// appendTime is when the record at off of partition pid was appended.
func (v *tenantView) appendTime(pid, off uint64) (int64, bool) {
	p, ok := v.partition(pid)
	if !ok {
		return 0, false
	}
	return p.Store().AppendTime(pid, off)
}

// partitionBytes is how many bytes partition pid's stored records take;
// 0 for a partition gone since the view listed it.
func (v *tenantView) partitionBytes(pid uint64) (uint64, error) {
	p, ok := v.partition(pid)
	if !ok {
		return 0, nil
	}
	return p.Store().PartitionBytes(pid)
}

// newest is the records of a partition appended within [fromMs, toMs),
// newest first, at most limit.
func (v *tenantView) newest(pv *storage.PartitionView, fromMs, toMs int64, limit int) ([]storage.StoredMessage, error) {
	p, ok := v.partition(pv.ID)
	if !ok {
		return nil, nil
	}
	return p.Store().Newest(*pv, fromMs, toMs, limit)
}

// intArg reads a whole-number query parameter within [lo, hi], def when
// absent.
func intArg(ctx *fasthttp.RequestCtx, name string, def, lo, hi int) (int, error) {
	v := ctx.QueryArgs().Peek(name)
	if len(v) == 0 {
		return def, nil
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n < lo || n > hi {
		return 0, badRequest(name + " must be a whole number in " + strconv.Itoa(lo) + ".." + strconv.Itoa(hi))
	}
	return n, nil
}

// timeArg reads an ISO-8601 timestamp query parameter as unix ms, def when
// absent.
func timeArg(ctx *fasthttp.RequestCtx, name string, def int64) (int64, error) {
	v := string(ctx.QueryArgs().Peek(name))
	if v == "" {
		return def, nil
	}
	ms, err := parseISO(v)
	if err != nil {
		return 0, badRequest(name + " must be an ISO-8601 timestamp")
	}
	return ms, nil
}

func parseISO(v string) (int64, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, err
	}
	return t.UnixMilli(), nil
}

func strArg(ctx *fasthttp.RequestCtx, name string) string { return string(ctx.QueryArgs().Peek(name)) }

func pathArg(ctx *fasthttp.RequestCtx, name string) string {
	v, _ := ctx.UserValue(name).(string)
	if strings.IndexByte(v, '%') < 0 {
		return v
	}
	// The router matches the path as sent, so a parameter arrives
	// percent-encoded: a queue named "café q" is "caf%C3%A9%20q" here.
	// An encoding that does not decode is left as it came (and a name
	// check refuses it if it must).
	if d, err := url.PathUnescape(v); err == nil {
		return d
	}
	return v
}

// isoOrNil renders unix ms as ISO text, or null for 0.
func isoOrNil(ms int64) *string {
	if ms == 0 {
		return nil
	}
	s := isoMillis(ms)
	return &s
}

func pidString(id uint64) string { return strconv.FormatUint(id, 10) }

// nowMs is the wall clock views compare lease expiries and ages with.
func nowMs() int64 { return time.Now().UnixMilli() }

// messageCounts is Queen's per-queue / per-partition counts object.
type messageCounts struct {
	Total      uint64 `json:"total"`
	Pending    uint64 `json:"pending"`
	Processing uint64 `json:"processing"`
	Completed  uint64 `json:"completed"`
	Failed     uint64 `json:"failed"`
	DeadLetter uint64 `json:"deadLetter"`
}

func (m *messageCounts) add(o messageCounts) {
	m.Total += o.Total
	m.Pending += o.Pending
	m.Processing += o.Processing
	m.Completed += o.Completed
	m.Failed += o.Failed
	m.DeadLetter += o.DeadLetter
}

// countsOf renders storage counts as Queen's. Failed counts messages
// whose head delivery failed and waits for a retry: Queen 2.x has no
// separate failed state, so it is those (one per partition and group).
func countsOf(c storage.Counts) messageCounts {
	return messageCounts{Total: c.Total, Pending: c.Pending, Processing: c.Processing, Completed: c.Completed, Failed: c.HeadFailures}
}

// partitionCounts are one partition's counts seen from its most-behind
// group.
func partitionCounts(p *storage.PartitionView) messageCounts { return countsOf(p.Counts()) }

// queueCounts are a queue's counts over every partition (whether or not
// the view copied them); DeadLetter is its live DLQ rows.
func queueCounts(q *storage.QueueView) messageCounts {
	c := countsOf(q.Totals)
	c.DeadLetter = uint64(q.DLQRows)
	return c
}
