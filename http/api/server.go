// Package api is Queen's native HTTP API on port 6632: routing, request
// decoding, validation and JSON rendering. Every handler turns a request into
// engine calls (raftgroups.Engine) and the engine's answers into JSON; no
// handler touches raft or the store's internals, and no queue semantics live
// here. Status codes for engine errors are decided in one place, errors.go;
// every route and its access level is in one table, routes.go.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/tenancy/acl"
)

// Config is the HTTP API's configuration, filled by cmd/queen from env.
type Config struct {
	Addr         string // host:port (QUEEN_BIND_ADDR, PORT)
	MaxBodyBytes int    // QUEEN_MAX_BODY_BYTES
	// MaxBufferedBytes bounds the request body bytes held by all requests
	// together (QUEEN_HTTP_MAX_BUFFERED_BYTES).
	MaxBufferedBytes int
	// MaxConnections and MaxConnsPerIP bound open connections, in all and
	// from one client address (QUEEN_HTTP_MAX_CONNECTIONS,
	// QUEEN_HTTP_MAX_CONNS_PER_IP; 0: no per-IP bound).
	MaxConnections int
	MaxConnsPerIP  int
	// MaxPushItems bounds one push's items (QUEEN_MAX_PUSH_ITEMS) and
	// TenantMaxInflightPushItems one tenant's items in flight over all its
	// pushes (QUEEN_TENANT_MAX_INFLIGHT_PUSH_ITEMS); see push_limits.go.
	MaxPushItems               int
	TenantMaxInflightPushItems int
	RequestTimeout             time.Duration
	PopDefaultTimeout          time.Duration // POP_DEFAULT_TIMEOUT_MS
	PopMaxTimeout              time.Duration
	DefaultSubscription        uint8 // DEFAULT_SUBSCRIPTION_MODE
	Version                    string
	KVMaxValueBytes            int // QUEEN_KV_MAX_VALUE_BYTES
	TimersMaxHorizon           time.Duration
	// Auth verifies broker JWTs (nil or disabled: everything is open).
	Auth *authn.Verifier
	// TenancyHeader scopes requests by x-queen-tenant (QUEEN_TENANCY_HEADER).
	TenancyHeader bool
	// GroupLagMaxCursors caps the cursors the consumer-group lag metrics
	// walk per scrape (QUEEN_METRICS_GROUP_LAG_MAX_CURSORS).
	GroupLagMaxCursors int
	// LagPartitionsMax is the most partitions a queue may have and still
	// get a lag series per partition (QUEEN_METRICS_LAG_PARTITIONS_MAX);
	// a larger queue gets the per-queue sum only (metrics_views.go).
	LagPartitionsMax int
	// Metrics is the set /metrics/prometheus writes, shared with the raft
	// groups and the Kafka broker by cmd/queen. A private set when nil.
	Metrics *metrics.Set
	// Ephemeral configures the RAM-class queues (ephemeral_ring.go).
	Ephemeral EphemeralConfig
	// PromoteMaxLag is how many entries a learner may trail by and still
	// be promoted (QUEEN_RAFT_PROMOTE_MAX_LAG).
	PromoteMaxLag uint64
	// Node carries calls between nodes (node.go); nil: the engine's raft
	// host.
	Node NodeLink
	// ACL is the authorizer of QUEEN_ACLS (acl.go); nil or disabled: no
	// ACL is checked.
	ACL *acl.Authorizer
}

// Server serves the HTTP API.
type Server struct {
	cfg    Config
	engine *raftgroups.Engine
	log    *slog.Logger
	// node makes and serves calls between nodes (node.go).
	node NodeLink
	srv  *fasthttp.Server
	ln   net.Listener
	done chan struct{}
	// base is cancelled at shutdown so every engine call and parked long
	// poll returns at once.
	base       context.Context
	cancelBase context.CancelFunc
	started    time.Time
	metrics    *metrics.Set
	traffic    *trafficMetrics
	requests   atomic.Uint64     // requests answered, for GET /metrics
	gates      probeGates        // long-poll probe slots (longpoll.go)
	parked     atomic.Int64      // pops parked right now
	bodies     bodyBudget        // request body bytes held (body.go)
	pushing    *tenancy.Inflight // push items in flight per tenant (push_limits.go)
	eph        *ring             // ephemeral queues: store, owners, hand-over
	maint      maintState        // maintenance mode's loop, hold gate and figures (maintenance.go)
	// acl is cfg.ACL when it is enabled, else nil: the one check the hot
	// path pays with ACLs off (acl.go).
	acl *acl.Authorizer
	// handler is the routed API, served on Addr and called in-process by
	// the embedded proxy (Handler).
	handler fasthttp.RequestHandler
}

// New builds the server and its routes.
func New(cfg Config, engine *raftgroups.Engine, log *slog.Logger) *Server {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.PopDefaultTimeout <= 0 {
		cfg.PopDefaultTimeout = 30 * time.Second
	}
	if cfg.PopMaxTimeout <= 0 {
		cfg.PopMaxTimeout = 60 * time.Second
	}
	if cfg.KVMaxValueBytes <= 0 {
		cfg.KVMaxValueBytes = 64 << 10
	}
	if cfg.TimersMaxHorizon <= 0 {
		cfg.TimersMaxHorizon = 90 * 24 * time.Hour
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxBufferedBytes <= 0 {
		cfg.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	// One body of the largest size must always fit.
	cfg.MaxBufferedBytes = max(cfg.MaxBufferedBytes, cfg.MaxBodyBytes)
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.MaxPushItems <= 0 {
		cfg.MaxPushItems = DefaultMaxPushItems
	}
	if cfg.TenantMaxInflightPushItems <= 0 {
		cfg.TenantMaxInflightPushItems = DefaultTenantMaxInflightPushItem
	}
	// One push of the largest size must always fit.
	cfg.TenantMaxInflightPushItems = max(cfg.TenantMaxInflightPushItems, cfg.MaxPushItems)
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewSet()
	}
	s := &Server{cfg: cfg, engine: engine, log: log, started: time.Now(), metrics: cfg.Metrics, traffic: newTrafficMetrics(cfg.Metrics),
		node: cfg.Node}
	if s.node == nil && engine != nil {
		s.node = engine.Host()
	}
	if cfg.ACL.Enabled() {
		s.acl = cfg.ACL
	}
	s.pushing = tenancy.NewInflight(cfg.TenantMaxInflightPushItems)
	s.bodies.limit = int64(cfg.MaxBufferedBytes)
	s.metrics.GetOrCreateGauge("queen_http_buffered_body_bytes", func() float64 { return float64(s.bodies.used.Load()) })
	s.base, s.cancelBase = context.WithCancel(context.Background())
	s.eph = newRing(cfg.Ephemeral, s.node, log)
	if engine != nil {
		s.eph.stored = s.storedEphSwitch
	}
	r := router.New()
	r.HandleMethodNotAllowed = false // an unknown method+path is an unknown route: 404
	r.RedirectTrailingSlash = false
	r.NotFound = noSuchRoute
	for _, rt := range s.routes() {
		r.Handle(rt.method, rt.path, s.wrap(rt))
	}
	s.handler = r.Handler
	s.srv = &fasthttp.Server{
		Handler:            r.Handler,
		Name:               "queen",
		MaxRequestBodySize: cfg.MaxBodyBytes,
		// Bodies are read by readBody after authorization (body.go), and
		// never as multipart forms, which fasthttp would spool to disk.
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		Concurrency:                  cfg.MaxConnections,
		MaxConnsPerIP:                cfg.MaxConnsPerIP,
		ReadTimeout:                  cfg.PopMaxTimeout + time.Minute,
		IdleTimeout:                  2 * time.Minute,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		CloseOnShutdown:              true,
		Logger:                       fasthttpLogger{log},
		// Its errors logged (at debug) never carry the request's bytes:
		// headers hold tokens and cookies.
		SecureErrorLogMessage: true,
		ErrorHandler:          transportError,
	}
	return s
}

// Start listens and serves until Shutdown. With an empty Addr nothing
// listens: the embedded proxy fronts the port and calls Handler itself.
func (s *Server) Start() error {
	if s.node != nil {
		s.node.SetNodeHandler(s.nodeHandler())
	}
	if s.cfg.Addr != "" {
		ln, err := net.Listen("tcp", s.cfg.Addr)
		if err != nil {
			return fmt.Errorf("http: listen %s: %w", s.cfg.Addr, err)
		}
		s.ln = ln
		s.done = make(chan struct{})
		go func() {
			defer close(s.done)
			if err := s.srv.Serve(ln); err != nil {
				s.log.Error("http: serve", "err", err)
			}
		}()
	}
	s.eph.start()
	s.maint.done = s.startMaintenance()
	return nil
}

// Addr is the address the server listens on ("" when it does not listen).
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Handler is the routed API, for the embedded proxy to call in-process
// with requests it authenticated and scoped (Proxied).
func (s *Server) Handler() fasthttp.RequestHandler { return s.handler }

// Shutdown hands the ephemeral partitions over while still serving (late
// requests are relayed to the new owners), then wakes parked long polls,
// stops accepting and waits for in-flight requests up to ctx's deadline.
func (s *Server) Shutdown(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(ctx, s.eph.cfg.HandoverTimeout)
	s.eph.leave(hctx)
	cancel()
	s.cancelBase()
	if s.maint.done != nil {
		<-s.maint.done // maintenance.go's loop ends with the base context
	}
	if s.done == nil {
		return nil
	}
	err := s.srv.ShutdownWithContext(ctx)
	<-s.done
	return err
}

// requestCtx is the context engine calls made for one request run under:
// bounded by the request timeout and cancelled at shutdown.
func (s *Server) requestCtx(timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.base, timeout)
}

// transportError answers requests fasthttp could not read: a body over
// QUEEN_MAX_BODY_BYTES is a plain-text 413 (spec §2.1), anything else a 400.
func transportError(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		ctx.Error("request body exceeds QUEEN_MAX_BODY_BYTES", fasthttp.StatusRequestEntityTooLarge)
		return
	}
	writeJSON(ctx, fasthttp.StatusBadRequest, errorBody{Error: "unreadable request: " + err.Error(), Code: "bad_request"})
}

type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Debug("http: " + fmt.Sprintf(format, args...))
}
