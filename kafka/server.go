package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka/logbound"
)

// Handler serves one API key. It runs on its own goroutine; handlers of one
// connection may run concurrently, and their responses are written in
// request order whatever order they finish in.
//
// The response's version is set to the request's before it is encoded. A
// handler reports Kafka errors inside the response (see ErrorResponse); a
// returned error means the request cannot be answered and closes the
// connection, except ErrCloseAfterResponse, which writes the response first.
// For Produce with acks=0 the response is dropped and may be nil; one with a
// partition error closes the connection, Kafka's way of telling an acks=0
// producer.
//
// ctx is cancelled when the connection or the server closes; handlers must
// return promptly then, because Close waits for them.
type Handler func(ctx context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error)

// ErrCloseAfterResponse, returned with a response, writes the response and
// then closes the connection (failed authentication, fatal client errors).
var ErrCloseAfterResponse = errors.New("kafka: close the connection after this response")

// Server accepts Kafka connections and dispatches their requests.
type Server struct {
	cfg         Config
	log         *slog.Logger
	handlers    map[int16]Handler // frozen by Start
	advertised  []kmsg.ApiVersionsResponseApiKey
	budget      *byteBudget
	shares      shareBudgets // per share (Config.ShareOf), within budget
	saslEnabled bool

	ctx    context.Context // cancelled by Close; parent of every connection's
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and every connection's serve

	mu           sync.Mutex
	started      bool
	closed       bool // no more connections admitted (Drain or Close)
	closeStarted bool // Close ran
	ln           net.Listener
	conns        map[*Conn]struct{}
	perIP        map[string]int // open connections by client address
	// unauthenticated counts, with SASL on, the connections that have not
	// logged in (Conn.unauthCounted); unauthenticatedPerIP holds them by
	// client address, oldest first, so a full pool can give up the oldest
	// place of its heaviest address (admitStranger).
	unauthenticated      int
	unauthenticatedPerIP map[string][]*Conn

	nextConnID   atomic.Uint64
	lastLimitLog atomic.Int64  // unix nanos of the last "over the limit" log
	refusals     logbound.Gate // refused logins' log lines (sasl.go)
	evictions    logbound.Gate // strangers closed for another address's (admit)
}

// NewServer validates cfg and returns a server with the built-in handlers
// registered: ApiVersions, and SaslHandshake/SaslAuthenticate when
// cfg.Authenticate is set.
func NewServer(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:         cfg,
		log:         cfg.Logger,
		handlers:    map[int16]Handler{keyApiVersions: handleApiVersions},
		budget:      newByteBudget(cfg.MaxBufferedRequestBytes),
		shares:      shareBudgets{max: cfg.MaxBufferedRequestBytesPerShare},
		saslEnabled: len(cfg.mechanisms()) > 0,
		ctx:         ctx,
		cancel:      cancel,
		conns:       map[*Conn]struct{}{},
		perIP:       map[string]int{},

		unauthenticatedPerIP: map[string][]*Conn{},
		refusals:             logbound.Gate{Interval: time.Second},
		evictions:            logbound.Gate{Interval: time.Second},
	}
	if s.saslEnabled {
		s.handlers[keySaslHandshake] = handleSaslHandshake
		s.handlers[keySaslAuthenticate] = handleSaslAuthenticate
	}
	return s, nil
}

// RegisterHandler installs the handler for an API key of the version table.
// It must be called before Start; ApiVersions and the SASL keys are built in.
func (s *Server) RegisterHandler(key int16, h Handler) error {
	if h == nil {
		return fmt.Errorf("kafka: nil handler for %s", KeyName(key))
	}
	if _, ok := SupportedVersions(key); !ok {
		return fmt.Errorf("kafka: API key %d (%s) is not in the version table", key, KeyName(key))
	}
	switch key {
	case keyApiVersions, keySaslHandshake, keySaslAuthenticate:
		return fmt.Errorf("kafka: %s is built in", KeyName(key))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return fmt.Errorf("kafka: RegisterHandler(%s) after Start", KeyName(key))
	}
	if _, dup := s.handlers[key]; dup {
		return fmt.Errorf("kafka: a handler for %s is already registered", KeyName(key))
	}
	s.handlers[key] = h
	return nil
}

// Start listens on cfg.Addr and serves connections in the background until
// Close.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return errors.New("kafka: server already started or closed")
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("kafka: listen on %s: %w", s.cfg.Addr, err)
	}
	s.started = true
	s.ln = ln
	s.advertised = advertisedVersions(s.handlers)
	s.wg.Add(1)
	go s.acceptLoop(ln)
	s.log.Info("boot: kafka listener started", "addr", ln.Addr().String(), "tls", s.cfg.TLS != nil,
		"sasl", strings.Join(s.cfg.mechanisms(), ","), "api_keys", len(s.advertised))
	if (s.cfg.Authenticate != nil || s.cfg.Bearer != nil) && s.cfg.TLS == nil {
		// SCRAM never sends the password; PLAIN and OAUTHBEARER do send
		// what logs in.
		s.log.Warn("kafka SASL/PLAIN or OAUTHBEARER is on over plaintext: passwords and tokens cross the network in clear")
	}
	return nil
}

// advertisedVersions lists the keys that have handlers, with their windows,
// in key order.
func advertisedVersions(handlers map[int16]Handler) []kmsg.ApiVersionsResponseApiKey {
	keys := make([]int16, 0, len(handlers))
	for k := range handlers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(keys))
	for _, k := range keys {
		w, _ := SupportedVersions(k)
		v := kmsg.NewApiVersionsResponseApiKey()
		v.ApiKey, v.MinVersion, v.MaxVersion = k, w.Min, w.Max
		out = append(out, v)
	}
	return out
}

// Addr is the address the server listens on (nil before Start).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// OpenConnections is the number of connections being served.
func (s *Server) OpenConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close stops accepting, closes every connection, and returns once every
// goroutine the server started (handlers included) has returned.
func (s *Server) Close() error {
	s.mu.Lock()
	already := s.closed && s.closeStarted
	s.closed, s.closeStarted = true, true
	ln := s.ln
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	if already {
		s.wg.Wait()
		return nil
	}
	s.cancel()
	var err error
	if ln != nil {
		if cerr := ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = fmt.Errorf("kafka: closing the listener: %w", cerr)
		}
	}
	for _, c := range conns {
		c.shutdown()
	}
	s.wg.Wait()
	return err
}

func (s *Server) acceptLoop(ln net.Listener) {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait and retry, as
			// net/http does, rather than spin or give up.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("kafka accept failed; retrying", "err", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		s.admit(nc)
	}
}

// admit starts serving nc, or closes it when the server is closing or one
// of the connection limits is reached.
func (s *Server) admit(nc net.Conn) {
	ip := remoteIP(nc)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	var refused string
	var evicted *Conn
	switch {
	case len(s.conns) >= s.cfg.MaxConnections:
		refused = "max connections reached"
	case s.perIP[ip] >= s.cfg.MaxConnectionsPerIP:
		refused = "max connections per IP reached"
	case s.saslEnabled && len(s.unauthenticatedPerIP[ip]) >= unauthenticatedPerIP(s.cfg.MaxUnauthenticatedConnections):
		refused = "max connections not logged in from one IP reached"
	case s.saslEnabled && s.unauthenticated >= s.cfg.MaxUnauthenticatedConnections:
		if evicted = s.strangerToEvict(ip); evicted == nil {
			refused = "max connections not logged in reached"
		} else {
			// Its place is the newcomer's from now on; the close below
			// ends its serve, whose forget finds it uncounted already.
			s.uncountUnauthenticated(evicted)
		}
	}
	if refused != "" {
		s.mu.Unlock()
		_ = nc.Close()
		// Rate-limited: a reconnect storm must not flood the log.
		now := time.Now().UnixNano()
		if last := s.lastLimitLog.Load(); now-last > int64(time.Second) && s.lastLimitLog.CompareAndSwap(last, now) {
			s.log.Warn("kafka connection refused: "+refused, "max_connections", s.cfg.MaxConnections,
				"max_connections_per_ip", s.cfg.MaxConnectionsPerIP,
				"max_unauthenticated_connections", s.cfg.MaxUnauthenticatedConnections, "remote", nc.RemoteAddr().String())
		}
		return
	}
	c := newConn(s, nc)
	c.ip = ip
	s.conns[c] = struct{}{}
	s.perIP[ip]++
	if s.saslEnabled {
		c.unauthCounted = true
		s.unauthenticated++
		s.unauthenticatedPerIP[ip] = append(s.unauthenticatedPerIP[ip], c)
	}
	s.wg.Add(1)
	s.mu.Unlock()
	if evicted != nil {
		evicted.shutdown()
		// Rate-limited like the refusals: stalled hosts reconnecting as
		// fast as they can must not flood the log.
		if ok, held := s.evictions.Pass(time.Now()); ok {
			s.log.Info("kafka connection not logged in closed to make room for another address's",
				"closed", evicted.RemoteAddr().String(), "for", nc.RemoteAddr().String(),
				"max_unauthenticated_connections", s.cfg.MaxUnauthenticatedConnections, "held_back", held)
		}
	}
	go func() {
		defer s.wg.Done()
		defer s.forget(c)
		c.serve()
	}()
}

// remoteIP is the address a connection's per-IP limit counts it under.
func remoteIP(nc net.Conn) string {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}

// unauthenticatedPerIP is how many of the places for connections not
// logged in one client address may take: a quarter, so that a single host
// cannot fill them alone.
func unauthenticatedPerIP(places int) int { return max(1, places/4) }

// strangerToEvict (s.mu held) picks, when every place for connections not
// logged in is taken, the one a newcomer from ip may have: the oldest
// connection of the address holding the most places (the oldest of them on
// a tie), when that address holds more than ip does. A few hosts holding
// stalled connections could otherwise refuse every other host's login for
// as long as they keep the places filled (issue 33): now each newcomer
// costs the heaviest holder its oldest stranger, a host never loses a place
// to one holding as many, and a login, which takes a few round trips, is
// over long before the stalled hosts' reconnects could reach it. nil when
// no address holds more than ip.
func (s *Server) strangerToEvict(ip string) *Conn {
	own := len(s.unauthenticatedPerIP[ip])
	var victim *Conn
	heaviest := own
	for addr, held := range s.unauthenticatedPerIP {
		if addr == ip || len(held) == 0 || len(held) < heaviest {
			continue
		}
		if len(held) > heaviest || victim == nil || held[0].id < victim.id {
			heaviest, victim = len(held), held[0]
		}
	}
	if heaviest <= own {
		return nil
	}
	return victim
}

// loggedIn takes c out of the connections that have not logged in.
func (s *Server) loggedIn(c *Conn) {
	s.mu.Lock()
	s.uncountUnauthenticated(c)
	s.mu.Unlock()
}

// uncountUnauthenticated (s.mu held) takes c out of the connections not
// logged in, once.
func (s *Server) uncountUnauthenticated(c *Conn) {
	if !c.unauthCounted {
		return
	}
	c.unauthCounted = false
	s.unauthenticated--
	held := slices.DeleteFunc(s.unauthenticatedPerIP[c.ip], func(o *Conn) bool { return o == c })
	if len(held) == 0 {
		delete(s.unauthenticatedPerIP, c.ip)
	} else {
		s.unauthenticatedPerIP[c.ip] = held
	}
}

func (s *Server) forget(c *Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if s.perIP[c.ip]--; s.perIP[c.ip] <= 0 {
		delete(s.perIP, c.ip)
	}
	s.uncountUnauthenticated(c)
	s.mu.Unlock()
	s.shares.drop(c.share.Swap(nil))
}
