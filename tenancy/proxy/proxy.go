// Package proxy is the embedded proxy: Queen's second front door, compiled
// into the broker. It owns API keys bound to one cluster, tenants and
// their clusters, people with a role per cluster, plans and their limits,
// metering, and the control plane a provisioning system drives
// (/api/cp/*). Its state is rows in the broker's replicated KV under the
// reserved system tenant, so every node runs the same proxy with no
// database; a request it admits is handed to the broker's HTTP handler in
// the same process, scoped to the cluster's broker tenant (spec §6).
package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
)

// Config is the proxy's part of the node's configuration (QUEEN_PROXY_*,
// read in cmd/queen).
type Config struct {
	// Addr is where the proxy listens: QUEEN_PROXY_PORT, or PORT itself
	// when it fronts the broker port (then the broker does not listen).
	Addr string
	// TLSCert and TLSKey (QUEEN_TLS_CERT, QUEEN_TLS_KEY) are PEM paths;
	// both or neither.
	TLSCert, TLSKey string
	// JWTSecret signs console sessions (QUEEN_PROXY_JWT_SECRET).
	JWTSecret string
	// CPToken opens /api/cp/* (QUEEN_PROXY_CP_TOKEN); empty: 404 there.
	CPToken string
	// SpoolDir keeps usage the KV could not take (QUEEN_PROXY_SPOOL_DIR).
	SpoolDir  string
	Bootstrap Bootstrap
	// DefaultCluster serves hosts that name no cluster
	// (QUEEN_PROXY_DEFAULT_CLUSTER); SharedHosts front many clusters and
	// take the cluster from the credential (QUEEN_PROXY_SHARED_HOSTS).
	DefaultCluster string
	SharedHosts    []string
	// TenantHeader scopes each cluster to its broker tenant
	// (QUEEN_PROXY_TENANT_HEADER); false puts every cluster in the
	// broker's default tenant.
	TenantHeader bool
	InvalPoll    time.Duration // QUEEN_PROXY_INVAL_POLL_MS
	StaleGrace   time.Duration // QUEEN_PROXY_STALE_GRACE_MS
	Enforce      bool          // QUEEN_PROXY_ENFORCE
	MeterFlush   time.Duration // QUEEN_PROXY_METER_FLUSH_MS
	UsageKeep    time.Duration // QUEEN_PROXY_USAGE_KEEP_DAYS
	// OperatorEnabled opens the operator routes to operators
	// (QUEEN_PROXY_OPERATOR_ENABLED); Operators is QUEEN_PROXY_OPERATORS,
	// applied at boot only when OperatorsSet.
	OperatorEnabled bool
	Operators       []string
	OperatorsSet    bool
	// OAuth is Google and GitHub sign-in and autoprovisioning.
	OAuth OAuthConfig
	// MaxBodyBytes is the broker's body cap (QUEEN_MAX_BODY_BYTES);
	// MaxConnections and MaxConnsPerIP its connection bounds, which the
	// proxy port keeps too.
	MaxBodyBytes   int
	MaxConnections int
	MaxConnsPerIP  int
	// RequestTimeout bounds each read or write of the proxy's state.
	RequestTimeout time.Duration
	// NodeID names this node's usage rows.
	NodeID uint64
}

// Bootstrap is QUEEN_PROXY_BOOTSTRAP_*: a tenant, its cluster, an admin
// and an all-scope key, made at every boot if missing.
type Bootstrap struct {
	Tenant   string
	APIKey   string
	Plan     string
	Email    string
	Password string
}

// Proxy serves the proxy port.
type Proxy struct {
	cfg    Config
	log    *slog.Logger
	engine *raftgroups.Engine
	broker fasthttp.RequestHandler
	store  *kvStore
	cache  *cache
	rates  rates
	parked parkedPops
	census census
	// retained is each cluster's last storage measurement (storage.go).
	retained retainedGauge
	meter    *meter
	// activity is each cluster's last traffic, first push and key use
	// (activity.go), written with the usage.
	activity activity
	// seeded is set once the plans and bootstrap rows are in the KV.
	seeded atomic.Bool

	srv  *fasthttp.Server
	ln   net.Listener
	done chan struct{}
	// loops are the background goroutines (feed poll, bootstrap, meter
	// flush); stop ends them.
	loops sync.WaitGroup
	stop  context.CancelFunc
	base  context.Context
	// loopsMu and closing keep goLoop from adding to loops once Shutdown
	// waits for them.
	loopsMu sync.Mutex
	closing bool
}

// New builds the proxy over engine, handing admitted requests to broker
// (the broker's api.Server.Handler).
func New(cfg Config, engine *raftgroups.Engine, broker fasthttp.RequestHandler, log *slog.Logger) *Proxy {
	if cfg.InvalPoll <= 0 {
		cfg.InvalPoll = time.Second
	}
	if cfg.StaleGrace <= 0 {
		cfg.StaleGrace = 10 * time.Minute
	}
	if cfg.MeterFlush <= 0 {
		cfg.MeterFlush = 15 * time.Second
	}
	if cfg.UsageKeep <= 0 {
		cfg.UsageKeep = 90 * 24 * time.Hour
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 20
	}
	if cfg.Bootstrap.Plan == "" {
		cfg.Bootstrap.Plan = "dev"
	}
	if cfg.Bootstrap.Email == "" {
		cfg.Bootstrap.Email = "admin@localhost"
	}
	p := &Proxy{cfg: cfg, log: log, engine: engine, broker: broker}
	p.store = &kvStore{engine: engine, timeout: cfg.RequestTimeout}
	p.census.engine = engine
	p.cache = newCache(p.store, cfg.InvalPoll, cfg.StaleGrace, log)
	p.store.changed = p.cache.drop
	p.meter = newMeter(p.store, cfg.NodeID, cfg.SpoolDir, cfg.UsageKeep, log)
	p.activity = activity{store: p.store, writer: p.meter.writer}
	p.base, p.stop = context.WithCancel(context.Background())
	p.srv = &fasthttp.Server{
		Handler: p.serve,
		Name:    "queen",
		// The body is read after the credential is checked (a control
		// plane token before any body), within the broker's cap.
		StreamRequestBody:            true,
		MaxRequestBodySize:           cfg.MaxBodyBytes,
		DisablePreParseMultipartForm: true,
		Concurrency:                  cfg.MaxConnections,
		MaxConnsPerIP:                cfg.MaxConnsPerIP,
		ReadTimeout:                  2 * time.Minute,
		IdleTimeout:                  2 * time.Minute,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		CloseOnShutdown:              true,
		ErrorHandler:                 transportError,
		// fasthttp logs what it could not read, quoting the client's
		// bytes: not quoted at all, and through the bounded log.
		SecureErrorLogMessage: true,
		Logger:                newTransportLog(log),
	}
	return p
}

// Start replays spooled usage, starts the background loops and listens.
// The bootstrap runs in the background until the KV takes it: a node
// that boots before its cluster has a leader still serves.
func (p *Proxy) Start() error {
	ln, err := net.Listen("tcp", p.cfg.Addr)
	if err != nil {
		return fmt.Errorf("proxy: listen %s: %w", p.cfg.Addr, err)
	}
	if p.cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(p.cfg.TLSCert, p.cfg.TLSKey)
		if err != nil {
			ln.Close()
			return fmt.Errorf("proxy: QUEEN_TLS_CERT/QUEEN_TLS_KEY: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
			NextProtos: []string{"http/1.1"}})
	}
	p.ln = ln
	p.goLoop(p.cache.run)
	p.goLoop(p.seedLoop)
	p.goLoop(func(ctx context.Context) { p.meter.run(ctx, p.cfg.MeterFlush, p.activity.flush) })
	p.goLoop(p.rollupLoop)
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		if err := p.srv.Serve(ln); err != nil {
			p.log.Error("proxy: serve", "err", err)
		}
	}()
	return nil
}

// every calls f each interval until ctx ends; the proxy's periodic work
// (cache refresh, usage flush, rollup) runs under it in goLoop.
func every(ctx context.Context, interval time.Duration, f func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}

func (p *Proxy) goLoop(f func(context.Context)) {
	p.loopsMu.Lock()
	defer p.loopsMu.Unlock()
	if p.closing {
		return
	}
	p.loops.Add(1)
	go func() {
		defer p.loops.Done()
		f(p.base)
	}()
}

// Addr is where the proxy listens.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// TLS reports whether the proxy port terminates TLS.
func (p *Proxy) TLS() bool { return p.cfg.TLSCert != "" }

// Shutdown stops accepting, waits for requests in flight up to ctx, stops
// the loops and writes (or spools) the usage not yet flushed.
func (p *Proxy) Shutdown(ctx context.Context) error {
	var err error
	if p.done != nil {
		err = p.srv.ShutdownWithContext(ctx)
		<-p.done
	}
	p.loopsMu.Lock()
	p.closing = true
	p.loopsMu.Unlock()
	p.stop()
	p.loops.Wait()
	p.meter.final(ctx)
	fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.activity.flush(fctx) // best effort: activity is not spooled
	return err
}

// serve dispatches a request on the proxy port.
func (p *Proxy) serve(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	switch {
	case under(path, "/api/cp"):
		p.controlPlane(ctx, path)
	case under(path, "/auth"), under(path, "/api/console"):
		p.console(ctx, path)
	case under(path, "/console"):
		p.consolePage(ctx, path)
	default:
		p.dataPlane(ctx, path)
	}
}

// hostLabel is the first DNS label of a Host header, without port or
// trailing dots, lowercased; shared says the host fronts many clusters.
func (p *Proxy) hostLabel(host string) (label string, shared bool) {
	host = strings.ToLower(host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimRight(host, ".")
	for _, s := range p.cfg.SharedHosts {
		if strings.TrimRight(strings.ToLower(s), ".") == host {
			return "", true
		}
	}
	label, _, _ = strings.Cut(host, ".")
	return label, false
}

// transportError answers requests fasthttp could not read, as JSON like
// every other answer of the proxy.
func transportError(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		writeError(ctx, errTooLarge)
		return
	}
	writeError(ctx, newError(http.StatusBadRequest, "bad_request", "unreadable request"))
}
