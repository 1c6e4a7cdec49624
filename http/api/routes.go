package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/crypto/authn"
)

// route is one method+path with the access level it requires (spec §2.2).
// Every route is in routes(): a route cannot exist without a level.
type route struct {
	method string
	path   string
	level  authn.Level
	handle func(*fasthttp.RequestCtx) error
}

const (
	get  = http.MethodGet
	post = http.MethodPost
)

// routes is the whole HTTP API.
func (s *Server) routes() []route {
	return []route{
		{get, "/health", authn.LevelPublic, s.health},
		{get, "/metrics/prometheus", authn.LevelPublic, s.metricsPrometheus},

		// Data plane, spec §2.3 routes 1-12.
		{post, "/api/v1/push", authn.LevelWriteOnly, s.push},
		{get, "/api/v1/pop/queue/{queue}", authn.LevelReadWrite, s.popQueue},
		{get, "/api/v1/pop/queue/{queue}/partition/{partition}", authn.LevelReadWrite, s.popPartition},
		{get, "/api/v1/pop", authn.LevelReadWrite, s.popDiscover},
		{post, "/api/v1/ack", authn.LevelReadWrite, s.ack},
		{post, "/api/v1/ack/batch", authn.LevelReadWrite, s.ackBatch},
		{post, "/api/v1/lease/{leaseId}/extend", authn.LevelReadWrite, s.leaseExtend},
		{post, "/api/v1/transaction", authn.LevelReadWrite, s.transaction},
		{post, "/api/v1/configure", authn.LevelReadWrite, s.configure},
		{post, "/api/v1/fetch", authn.LevelReadOnly, s.fetch},
		{post, "/api/v1/fetch/offsets", authn.LevelReadOnly, s.fetchOffsets},
		{post, "/api/v1/partitions/changed", authn.LevelReadOnly, s.partitionsChanged},
	}
}

// wrap turns a route's handler into a fasthttp handler: errors become the
// error envelope, a panic becomes a 500 for that request only, and every
// request is counted and timed per route.
func (s *Server) wrap(rt route) fasthttp.RequestHandler {
	m := newRouteMetrics(s.metrics, rt)
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		defer func() {
			if v := recover(); v != nil {
				s.log.Error("http: handler panic", "route", rt.path, "panic", fmt.Sprint(v))
				writeJSON(ctx, http.StatusInternalServerError, errorBody{Error: "internal error", Code: "internal"})
			}
			m.observe(ctx.Response.StatusCode(), start)
		}()
		if err := rt.handle(ctx); err != nil {
			writeError(ctx, err)
		}
	}
}
