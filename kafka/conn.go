package kafka

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Conn is one client connection. Handlers receive it to learn who is calling.
//
// Goroutines: serve (the reader) owns the connection; it starts one writer
// and one goroutine per request, and waits for all of them before it
// returns.
type Conn struct {
	srv *Server
	id  uint64
	raw net.Conn // the TCP connection; closing it ends everything
	nc  net.Conn // what requests are read from: raw, or TLS over raw
	log *slog.Logger

	ctx       context.Context // cancelled by shutdown
	cancel    context.CancelFunc
	closeOnce sync.Once

	tlsState *tls.ConnectionState // set before the first request

	// inflight holds the requests read and not yet answered, in request
	// order; only the reader sends and closes, only the writer receives.
	// Its capacity is one less than the in-flight limit because the writer
	// holds one more slot while it waits for that response.
	inflight   chan *pending
	unanswered atomic.Int32 // slots queued or held by the writer
	lastRead   atomic.Int64 // unix nanos a request last began to arrive (Drain)
	handlers   sync.WaitGroup

	turns turnTable // per API key request order, for Ordered

	// lastFrame is the size of the last frame body read whole; the read
	// loop alone uses it (readFrameBody).
	lastFrame int
	// share is the budget of the share the connection logged in with
	// (Config.ShareOf); nil before login or without one.
	share atomic.Pointer[shareBudget]

	// ip is the client address the per-IP limit counts; unauthCounted
	// says the connection counts among those not logged in. Both belong
	// to the server's mutex.
	ip            string
	unauthCounted bool

	mu        sync.Mutex
	sasl      saslStage
	mechanism string      // chosen by the last SaslHandshake
	scram     *scramLogin // a SCRAM exchange under way (sasl_scram.go)
	// bearerRefused: an OAUTHBEARER token was refused with an error
	// challenge, which the next message acknowledges (sasl_oauth.go).
	bearerRefused bool
	authenticated bool
	principal     Principal
	// authBy is when the connection must have logged in, or logged in
	// again, by (zero: nothing is due); authTimer closes it then.
	authBy    time.Time
	authTimer *time.Timer
}

// pending is one request's slot in the response order.
type pending struct {
	ready      chan struct{} // closed once the fields below are final
	frame      []byte        // the encoded response; nil writes nothing
	closeAfter bool          // close the connection after writing frame
	err        error         // close the connection without writing
}

func newConn(s *Server, nc net.Conn) *Conn {
	ctx, cancel := context.WithCancel(s.ctx)
	id := s.nextConnID.Add(1)
	conn := nc
	if s.cfg.TLS != nil {
		conn = tls.Server(nc, s.cfg.TLS) // the handshake happens in serve
	}
	return &Conn{
		srv:      s,
		id:       id,
		raw:      nc,
		nc:       conn,
		log:      s.log.With("conn", id, "remote", nc.RemoteAddr().String()),
		ctx:      ctx,
		cancel:   cancel,
		inflight: make(chan *pending, s.cfg.MaxInFlightPerConnection-1),
	}
}

// ID identifies the connection in logs; unique per server.
func (c *Conn) ID() uint64 { return c.id }

// RemoteAddr is the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.raw.RemoteAddr() }

// LocalAddr is the listener address the client reached.
func (c *Conn) LocalAddr() net.Addr { return c.raw.LocalAddr() }

// Logger is the server's logger with the connection's id and address.
func (c *Conn) Logger() *slog.Logger { return c.log }

// TLSConnectionState is the TLS state (SNI server name, peer certificates)
// of a TLS connection; false on plaintext.
func (c *Conn) TLSConnectionState() (tls.ConnectionState, bool) {
	if c.tlsState == nil {
		return tls.ConnectionState{}, false
	}
	return *c.tlsState, true
}

// Principal is who the connection authenticated as with SASL; false when
// SASL is off or has not completed.
func (c *Conn) Principal() (Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.principal, c.authenticated
}

func (c *Conn) isAuthenticated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.authenticated
}

// shutdown cancels the connection's handlers and closes the socket, which
// unblocks the reader and the writer. Safe to call from anywhere, any number
// of times. It closes the TCP connection under TLS directly: a TLS
// close_notify could block on a client that stopped reading.
func (c *Conn) shutdown() {
	c.closeOnce.Do(func() {
		c.cancel()
		_ = c.raw.Close()
	})
}

// serve runs the connection to its end.
func (c *Conn) serve() {
	defer c.shutdown()
	defer c.stopAuthTimer()
	if c.srv.saslEnabled {
		c.mu.Lock()
		c.authenticateByLocked(time.Now().Add(c.srv.cfg.LoginTimeout))
		c.mu.Unlock()
	}
	if !c.handshakeTLS() {
		return
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	err := c.readLoopSafely()
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), c.ctx.Err() != nil:
		c.log.Debug("kafka connection closed", "reason", err)
	default:
		// Client-caused (bad frames, unknown keys, refused credentials):
		// worth seeing, not worth waking anyone.
		c.log.Info("kafka connection closed", "err", err)
	}
	c.shutdown()
	close(c.inflight) // the reader was its only sender
	<-writerDone
	c.handlers.Wait()
}

func (c *Conn) handshakeTLS() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(c.ctx, tlsHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.log.Debug("kafka TLS handshake failed", "err", err)
		return false
	}
	state := tc.ConnectionState()
	c.tlsState = &state
	return true
}

// recovered turns a panic into an error after logging its stack: the last
// resort that keeps one bad input from taking the process down.
func (c *Conn) recovered(where string, r any) error {
	c.log.Error("kafka panic; closing the connection", "in", where, "panic", r, "stack", string(debug.Stack()))
	return fmt.Errorf("kafka: panic in %s: %v", where, r)
}

func (c *Conn) readLoopSafely() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = c.recovered("reader", r)
		}
	}()
	return c.readLoop()
}

// readLoop reads frames until the connection ends, dispatching each.
func (c *Conn) readLoop() error {
	br := bufio.NewReaderSize(c.nc, 16<<10)
	for {
		// Before SASL completes a connection is served one request at a
		// time, so the authentication state a request sees is settled.
		serial := c.srv.saslEnabled && !c.isAuthenticated()
		limit := c.srv.cfg.MaxRequestBytes
		if serial {
			limit = min(limit, maxUnauthenticatedRequestBytes)
		}
		size, err := c.readFrameSize(br)
		if err != nil {
			return err
		}
		c.lastRead.Store(time.Now().UnixNano())
		if size < 0 || size > limit {
			return fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, size, limit)
		}
		fb := frameBudget{node: c.srv.budget, share: c.share.Load()}
		frame, err := c.readFrameBody(br, size, fb)
		if err != nil {
			return err
		}
		p, err := c.dispatch(frame, fb)
		if err != nil {
			return err
		}
		if serial {
			select {
			case <-p.ready:
			case <-c.ctx.Done():
				return c.ctx.Err()
			}
		}
	}
}

// firstChunk is the first allocation for a frame body, unless the
// connection's previous frame was larger; bodies larger than that grow
// frameGrowth-fold as their bytes arrive. Nothing is allocated, and no
// budget taken, before the body's first byte arrives, and then no more than
// frameGrowth times what arrived (or firstChunk): announcing frames costs a
// client nothing, so sizes alone must not hold the node-wide budget that
// every client needs. Each growth step copies what came so far and zeroes a
// new buffer: doubling cost the broker a fifth of its memmove at full
// produce load. A producer sends frames of similar sizes, so starting at
// the last one's size makes growth rare, and a client that stalls holds at
// most four times what it sent, or what it already sent whole once.
const (
	firstChunk  = 16 << 10
	frameGrowth = 4
)

// readFrameBody reads a body of size bytes, taking node budget for the
// buffer as it grows with the bytes actually received, and, for a
// connection with a share, the share's budget for the whole frame once its
// first byte arrives: taken in growth steps, a frame larger than the share
// would wait for room its own first bytes hold. On success the frame holds
// exactly size bytes of both, which dispatch and the handler release.
func (c *Conn) readFrameBody(br *bufio.Reader, size int, fb frameBudget) ([]byte, error) {
	var frame []byte
	shared := false
	fail := func(err error) ([]byte, error) {
		fb.node.release(cap(frame))
		if shared {
			fb.share.release(size)
		}
		return nil, fmt.Errorf("reading a %d byte frame: %w", size, err)
	}
	for len(frame) < size {
		if err := c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.IdleTimeout)); err != nil {
			return fail(err)
		}
		if _, err := br.Peek(1); err != nil {
			return fail(err)
		}
		if fb.share != nil && !shared {
			if err := fb.share.acquire(c.ctx, size); err != nil {
				return fail(err)
			}
			shared = true
		}
		arrived := len(frame) + br.Buffered()
		grown := min(size, max(frameGrowth*arrived, firstChunk, c.lastFrame))
		if err := fb.node.acquire(c.ctx, grown-cap(frame)); err != nil {
			return fail(err)
		}
		next := make([]byte, len(frame), grown)
		copy(next, frame)
		frame = next
		n, err := io.ReadFull(br, frame[len(frame):grown])
		frame = frame[:len(frame)+n]
		if err != nil {
			return fail(err)
		}
	}
	c.lastFrame = size
	return frame, nil
}

// readFrameSize reads the 4-byte size prefix. Waiting past IdleTimeout ends
// the connection, unless requests of ours are still in flight: a client
// waiting on a long poll is not idle.
func (c *Conn) readFrameSize(br *bufio.Reader) (int, error) {
	var b [4]byte
	for n := 0; n < len(b); {
		if err := c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.IdleTimeout)); err != nil {
			return 0, err
		}
		m, err := br.Read(b[n:])
		n += m
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && n == 0 && c.unanswered.Load() > 0 {
				continue
			}
			if errors.Is(err, io.EOF) && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
	return int(int32(binary.BigEndian.Uint32(b[:]))), nil
}

// dispatch decodes one frame, queues its response slot and starts its
// handler. It owns the frame's budget: released here on failure, by the
// handler goroutine otherwise. An error closes the connection.
func (c *Conn) dispatch(frame []byte, fb frameBudget) (*pending, error) {
	size := len(frame)
	release := func() { fb.release(size) }

	var stage saslStage
	var authenticated, expired bool
	if c.srv.saslEnabled {
		stage, authenticated, expired = c.authState(time.Now())
	}
	if stage == saslExpectRawToken {
		defer release()
		return c.rawSaslToken(frame)
	}
	d, err := decodeRequest(frame)
	if err != nil {
		release()
		return nil, err
	}
	h := c.srv.handlers[d.hdr.Key]
	if h == nil {
		release()
		return nil, fmt.Errorf("%w: %s (key %d) has no handler", errUnknownKey, KeyName(d.hdr.Key), d.hdr.Key)
	}
	if c.srv.saslEnabled && !authenticated {
		switch d.hdr.Key {
		case keyApiVersions, keySaslHandshake, keySaslAuthenticate:
		default:
			release()
			return nil, fmt.Errorf("kafka: %s before SASL authentication", KeyName(d.hdr.Key))
		}
	}
	if expired && d.hdr.Key != keySaslHandshake && d.hdr.Key != keySaslAuthenticate {
		// The session timer closes the connection; a request that
		// slipped in first is not served on expired credentials.
		release()
		return nil, fmt.Errorf("kafka: %s after the SASL session expired", KeyName(d.hdr.Key))
	}
	if !d.inWindow {
		defer release()
		frame, err := c.srv.unsupportedVersionFrame(d)
		if err != nil {
			return nil, err
		}
		c.log.Debug("kafka request version out of window", "key", KeyName(d.hdr.Key), "version", d.hdr.Version)
		return c.enqueueReady(&pending{frame: frame})
	}

	p := &pending{ready: make(chan struct{})}
	if err := c.enqueue(p); err != nil {
		release()
		return nil, err
	}
	c.handlers.Add(1)
	go c.runHandler(p, h, d, release, c.turns.take(d.hdr.Key))
	return p, nil
}

// unsupportedVersionFrame answers a request whose version is outside the
// window. ApiVersions gets the v0 layout with the supported list, which is
// what lets a newer client retry at a version we speak.
func (s *Server) unsupportedVersionFrame(d decodedRequest) ([]byte, error) {
	if d.hdr.Key == keyApiVersions {
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(0)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.ApiKeys = s.advertised
		return appendResponseFrame(nil, d.hdr.CorrelationID, resp)
	}
	return appendResponseFrame(nil, d.hdr.CorrelationID, ErrorResponse(d.req, kerr.UnsupportedVersion.Code))
}

// enqueue takes the next response slot, waiting while the connection has
// MaxInFlightPerConnection requests unanswered.
func (c *Conn) enqueue(p *pending) error {
	c.unanswered.Add(1)
	select {
	case c.inflight <- p:
		return nil
	case <-c.ctx.Done():
		c.unanswered.Add(-1)
		return c.ctx.Err()
	}
}

// enqueueReady queues a response that needs no handler.
func (c *Conn) enqueueReady(p *pending) (*pending, error) {
	p.ready = make(chan struct{})
	close(p.ready)
	return p, c.enqueue(p)
}

// runHandler runs h for one request and fills its response slot.
func (c *Conn) runHandler(p *pending, h Handler, d decodedRequest, release func(), tr *turn) {
	defer c.handlers.Done()
	defer tr.finish()
	defer release()
	defer close(p.ready)
	defer func() {
		if r := recover(); r != nil {
			p.frame, p.closeAfter = nil, false
			p.err = c.recovered(KeyName(d.hdr.Key)+" handler", r)
		}
	}()
	ctx := context.WithValue(context.WithValue(c.ctx, requestHeaderKey{}, d.hdr), turnKey{}, tr)
	resp, err := h(ctx, c, d.req)
	closeAfter := errors.Is(err, ErrCloseAfterResponse)
	if err != nil && !closeAfter {
		p.err = fmt.Errorf("kafka: %s v%d handler: %w", KeyName(d.hdr.Key), d.hdr.Version, err)
		return
	}
	if pr, ok := d.req.(*kmsg.ProduceRequest); ok && pr.Acks == 0 {
		// acks=0: the client reads no response. A failed partition is
		// reported as Kafka does, by closing the connection, so the
		// client refreshes its metadata instead of writing into the void.
		p.closeAfter = closeAfter || produceFailed(resp)
		return
	}
	if resp == nil {
		p.err = fmt.Errorf("kafka: %s handler returned no response", KeyName(d.hdr.Key))
		return
	}
	if resp.Key() != d.hdr.Key {
		p.err = fmt.Errorf("kafka: %s handler returned a %s response", KeyName(d.hdr.Key), KeyName(resp.Key()))
		return
	}
	resp.SetVersion(d.hdr.Version)
	p.frame, p.err = appendResponseFrame(nil, d.hdr.CorrelationID, resp)
	p.closeAfter = closeAfter
}

// produceFailed reports whether a produce response has a partition error.
func produceFailed(resp kmsg.Response) bool {
	pr, ok := resp.(*kmsg.ProduceResponse)
	if !ok {
		return false // an acks=0 handler may answer nothing at all
	}
	for _, t := range pr.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return true
			}
		}
	}
	return false
}

// writeLoop writes responses in request order, batching writes while more
// responses are ready and flushing before it waits.
func (c *Conn) writeLoop() {
	w := responseWriter{c: c, bw: bufio.NewWriterSize(c.nc, 32<<10)}
	defer func() {
		if r := recover(); r != nil {
			_ = c.recovered("writer", r)
			c.shutdown()
			for range c.inflight { // let the reader finish; it stops at ctx
			}
		}
	}()
	for {
		var p *pending
		var ok bool
		select {
		case p, ok = <-c.inflight:
		default:
			w.flush()
			p, ok = <-c.inflight
		}
		if !ok {
			w.flush()
			return
		}
		w.write(p)
		c.unanswered.Add(-1)
	}
}

// responseWriter is the writer goroutine's state.
type responseWriter struct {
	c      *Conn
	bw     *bufio.Writer
	broken bool // after a failure or a close, slots are drained unwritten
}

func (w *responseWriter) fail(err error) {
	if !w.broken && w.c.ctx.Err() == nil {
		w.c.log.Debug("kafka write failed", "err", err)
	}
	w.broken = true
	w.c.shutdown()
}

func (w *responseWriter) flush() {
	if w.broken || w.bw.Buffered() == 0 {
		return
	}
	if err := w.c.nc.SetWriteDeadline(time.Now().Add(w.c.srv.cfg.IdleTimeout)); err != nil {
		w.fail(err)
		return
	}
	if err := w.bw.Flush(); err != nil {
		w.fail(err)
	}
}

// write waits for p's response and writes it.
func (w *responseWriter) write(p *pending) {
	c := w.c
	if w.broken || c.ctx.Err() != nil {
		w.broken = true
		return
	}
	select {
	case <-p.ready:
	default:
		w.flush() // do not hold finished responses while this one runs
		select {
		case <-p.ready:
		case <-c.ctx.Done():
			w.broken = true
			return
		}
	}
	if p.err != nil {
		c.log.Warn("kafka closing connection", "err", p.err)
		w.flush() // the answers before this one still go out
		w.broken = true
		c.shutdown()
		return
	}
	if p.frame != nil {
		if err := c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.IdleTimeout)); err != nil {
			w.fail(err)
			return
		}
		if _, err := w.bw.Write(p.frame); err != nil {
			w.fail(err)
			return
		}
		// Written or copied into the buffered writer: the frame is free.
		putFrame(p.frame)
		p.frame = nil
	}
	if p.closeAfter {
		w.flush()
		w.broken = true
		c.shutdown()
	}
}

// IP is the client's IP address as text: the host ACLs match
// (tenancy/acl).
func (c *Conn) IP() string { return c.ip }
