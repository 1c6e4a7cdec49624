// Package transport is the raft transport between queen nodes, over
// HTTP/1.1, one listener per raft group (group N on raft port + N).
//
// Dragonboat's message batches travel as a stream: one long POST per peer
// connection whose chunked body carries length-prefixed batches, answered
// 200 as soon as the headers pass so both ends know the stream is open
// (stream.go). A request per batch made every batch wait for the previous
// one's answer, and the per-request work was a third of a follower's CPU.
// Snapshot chunks stay one POST each: their answer says whether the
// receiver still wants the stream.
//
// A stream is raw when the peer takes it (raw.go): the same frames, but
// after the same header checks the receiver takes the connection over
// (HTTP/1.1 upgrade, 101 queen-raft/1) and the frames go straight on the
// TCP or TLS connection, one write per frame, without the io.Pipe and the
// chunk framing that were 19% of a node's CPU in a 3-node cluster. A
// peer of an older build answers 404 for it, and gets the chunked POST,
// which stays served for older senders.
//
// Every request carries the cluster's raft token in x-queen-raft-token. The
// receiving side checks it in constant time from the headers alone, before a
// single body byte is read, and answers a wrong token with 401 and closes the
// connection: a peer without the token can neither vote, append nor install a
// snapshot, and cannot make this node decode anything. The sending side
// reports a 401 as an error (and a warning in its log) that says its token
// was refused.
//
// Every wait on a peer is bounded (Timeouts): connecting, a stream's
// answer, each piece of a frame written, a snapshot chunk's exchange, and on
// the receiving side a stream without frames and a body that stops
// arriving. A peer that accepts connections and then neither reads nor
// answers fails its sends in seconds while the other peers' streams go on.
//
// With TLS (Config.TLS, QUEEN_RAFT_TLS_*) every listener serves TLS only
// and every call is made over TLS; with a CA both ends present
// certificates and verify each other's (tls.go). The token is still
// checked, from the headers, before any body byte: TLS says the peer holds
// a certificate of the cluster, the token that it is configured for it.
//
// This package knows nothing about queues or commands; it moves dragonboat's
// bytes and nothing else.
package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/queen-mq/queen/crypto/nodetls"
	"github.com/queen-mq/queen/crypto/secret"
)

// Header names on every raft RPC.
const (
	TokenHeader = "X-Queen-Raft-Token"
	GroupHeader = "X-Queen-Raft-Group"

	streamPath = "/raft/v1/stream"
	chunkPath  = "/raft/v1/chunk"
	timePath   = "/raft/v1/time"
)

// ErrRefused is the error a send returns when the peer refused this node's
// token. Its text is what operators grep for.
var ErrRefused = errors.New("refused this node's QUEEN_RAFT_TOKEN")

// Config configures the transport of one group.
type Config struct {
	Token        string   // empty: no check (the node warns at boot)
	AcceptTokens []string // also accepted (never sent) while Token is rotated
	Group        int
	MaxBodyBytes int64 // largest message batch accepted; chunks are capped separately
	Logger       *slog.Logger
	// Drop, when set, is consulted before every send: a non-nil error drops
	// the send as if the peer were unreachable. Tests use it to partition.
	Drop func(target string) error
	// Timeouts bound every wait on a peer; zero fields take the defaults.
	Timeouts Timeouts
	// Clock, when set, answers the time route with this node's clock in
	// unix milliseconds, which peers compare theirs with (raftgroups/clock).
	Clock func() int64
	// TLS, when set, makes every listener serve TLS only and every call
	// use TLS; nil is plaintext.
	TLS *nodetls.Config
	// Node, when set, serves node-to-node HTTP calls under /node/v1/ on
	// this listener (node.go); group 0's carries it.
	Node http.Handler
	// LinkToken and Link, when both set, serve a standby's reads under
	// LinkPrefix on this listener, behind LinkToken (link.go).
	LinkToken string
	Link      http.Handler

	// chunkedOnly makes every outgoing stream a chunked POST, as before
	// raw streams: the tests and the benchmark that compare the two.
	chunkedOnly bool
}

// Timeouts bound every wait on a peer, so a peer that is black-holed
// (accepts or half-opens a connection, then neither reads nor answers)
// fails a send within seconds, and dragonboat marks it unreachable and
// backs off, instead of a sender (or a receiving handler and its frame
// buffer) being held until the kernel gives up on the socket, which with
// a peer that keeps acknowledging with a zero window is never.
type Timeouts struct {
	Dial  time.Duration // TCP connect (2 s)
	Open  time.Duration // a stream's answer to its headers (5 s)
	Write time.Duration // a frame making no progress into the connection (10 s)
	Chunk time.Duration // one snapshot chunk sent and answered (30 s; chunks are 2 MiB)
	// Idle is how long a received stream may carry no frame (90 s):
	// dragonboat closes a connection it has not used for a minute, so a
	// longer silence means the sender is gone.
	Idle  time.Duration
	Stall time.Duration // a received frame or chunk body making no progress (10 s)
}

func (to *Timeouts) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&to.Dial, 2*time.Second)
	def(&to.Open, 5*time.Second)
	def(&to.Write, 10*time.Second)
	def(&to.Chunk, 30*time.Second)
	def(&to.Idle, 90*time.Second)
	def(&to.Stall, 10*time.Second)
}

// Factory is the dragonboat TransportFactory for one group's NodeHost. It
// keeps the transport it created so the node can read its counters.
type Factory struct {
	cfg Config
	mu  sync.Mutex
	t   *Transport
}

// NewFactory returns a factory for one group's transport.
func NewFactory(cfg Config) *Factory {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 97 << 20
	}
	cfg.Timeouts.setDefaults()
	return &Factory{cfg: cfg}
}

// Create is called by dragonboat when the NodeHost starts.
func (f *Factory) Create(nhc config.NodeHostConfig, mh raftio.MessageHandler, ch raftio.ChunkHandler) raftio.ITransport {
	t := newTransport(f.cfg, nhc.GetListenAddress(), nhc.DeploymentID, mh, ch)
	f.mu.Lock()
	f.t = t
	f.mu.Unlock()
	return t
}

// Validate checks a raft address: host:port with a port in range.
func (f *Factory) Validate(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	p, err := strconv.Atoi(port)
	return err == nil && p > 0 && p < 65536
}

// Transport returns the transport once dragonboat has created it.
func (f *Factory) Transport() *Transport {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

// Transport implements raftio.ITransport over HTTP.
type Transport struct {
	cfg    Config
	listen string
	token  secret.Matcher
	link   secret.Matcher // the link token (link.go); unset: no link route
	mh     raftio.MessageHandler
	ch     raftio.ChunkHandler
	client *http.Client

	srv  *http.Server
	done chan struct{}
	// ctx ends with Close, cutting chunk sends short.
	ctx    context.Context
	cancel context.CancelFunc

	refused     atomic.Uint64 // requests this node answered with 401
	linkRefused atomic.Uint64 // link requests answered with 401
	// tlsRefused counts connections whose TLS handshake this node's
	// listener failed (no certificate, another CA, plaintext).
	tlsRefused atomic.Uint64
	scheme     string        // "http" or "https"
	rejected   atomic.Uint64 // sends a peer answered with 401
	// oversized counts batches not sent because they were over
	// MaxBodyBytes (a bug in the limits: see SendMessageBatch).
	oversized atomic.Uint64
	lastOK    sync.Map // peer address → time.Time it was last heard from or answered
	warnedAt  sync.Map // target → time.Time of the last refused-token warning

	// streams are the outgoing batch streams, ended by Close; streamsWG
	// owns their request goroutines.
	streamsMu sync.Mutex
	streams   map[*stream]struct{}
	closed    bool
	streamsWG sync.WaitGroup
	// rawIn are the raw streams this node receives (raw.go): net/http
	// forgets a connection once it is hijacked, so Close ends them and
	// rawInWG waits for the handlers reading them.
	rawIn   map[net.Conn]struct{}
	rawInWG sync.WaitGroup
	// oldPeers: target → time.Time until which streams to it are chunked,
	// because it did not take a raw one (a node of an older build).
	oldPeers sync.Map
	// rawTLS is the client TLS configuration of raw streams.
	rawTLS *tls.Config
}

func newTransport(cfg Config, listen string, deploymentID uint64, mh raftio.MessageHandler, ch raftio.ChunkHandler) *Transport {
	t := &Transport{cfg: cfg, listen: listen, mh: mh, ch: ch, token: secret.NewMatcher(cfg.Token, cfg.AcceptTokens...), link: linkMatcher(cfg), streams: map[*stream]struct{}{}, rawIn: map[net.Conn]struct{}{}}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	ht := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: cfg.Timeouts.Dial, KeepAlive: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	t.scheme = "http"
	if cfg.TLS != nil {
		t.scheme = "https"
		ht.TLSClientConfig = cfg.TLS.Client()
		t.rawTLS = cfg.TLS.Client()
		// The handshake is a wait on the peer like any other: a peer that
		// accepts and never answers it must fail the send, not hold it.
		ht.TLSHandshakeTimeout = cfg.Timeouts.Open
		// The stream is a full-duplex HTTP/1.1 request; never HTTP/2.
		ht.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.client = &http.Client{Transport: ht}
	return t
}

// Name is reported in dragonboat's logs.
func (t *Transport) Name() string { return "queen-http-token" }

// Start listens and serves raft RPCs until Close.
func (t *Transport) Start() error {
	ln, err := net.Listen("tcp", t.listen)
	if err != nil {
		return fmt.Errorf("raft transport group %d: listen %s: %w", t.cfg.Group, t.listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle(streamPath, t.guard(t.serveStream))
	mux.Handle(rawPath, t.guard(t.serveRaw))
	mux.Handle(chunkPath, t.guard(t.bodyOf(maxChunkBody, t.serveChunk)))
	if t.cfg.Clock != nil {
		mux.Handle(timePath, t.guard(t.serveTime))
	}
	if t.cfg.Node != nil {
		mux.Handle(nodePrefix, t.nodeGuard(t.cfg.Node))
	}
	t.linkMount(mux)
	// ReadHeaderTimeout also bounds a TLS handshake (net/http applies the
	// smallest of its timeouts to it).
	t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 2 * time.Second, IdleTimeout: 2 * time.Minute}
	if t.cfg.TLS != nil {
		ln = tls.NewListener(ln, t.cfg.TLS.Server())
		t.srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		t.srv.ErrorLog = t.handshakeLog()
	}
	t.done = make(chan struct{})
	go func() {
		defer close(t.done)
		_ = t.srv.Serve(ln)
	}()
	return nil
}

// Close stops the listener, drops open connections, ends the outgoing
// streams and waits for the goroutines serving and sending.
func (t *Transport) Close() error {
	t.cancel()
	if t.srv != nil {
		_ = t.srv.Close()
		<-t.done
	}
	t.streamsMu.Lock()
	t.closed = true
	for s := range t.streams {
		s.abort(errTransportClosed)
	}
	for c := range t.rawIn {
		_ = closeUnder(c)
	}
	t.streamsMu.Unlock()
	t.streamsWG.Wait()
	t.rawInWG.Wait()
	t.client.CloseIdleConnections()
	return nil
}

// TLSRefused counts connections this node's listener refused in the TLS
// handshake.
func (t *Transport) TLSRefused() uint64 { return t.tlsRefused.Load() }

// Refused counts raft requests this node answered with 401.
func (t *Transport) Refused() uint64 { return t.refused.Load() }

// Rejected counts sends a peer answered with 401.
func (t *Transport) Rejected() uint64 { return t.rejected.Load() }

// Oversized counts message batches dropped before sending because they
// were larger than a peer accepts.
func (t *Transport) Oversized() uint64 { return t.oversized.Load() }

// LastContact is when target was last heard from: a batch it sent here, or
// an answer to a request of ours (zero if never).
func (t *Transport) LastContact(target string) time.Time {
	if v, ok := t.lastOK.Load(target); ok {
		return v.(time.Time)
	}
	return time.Time{}
}

// guard checks method, group and token from the headers, before the body is
// touched, then hands the request to next.
func (t *Transport) guard(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Connection", "close")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if t.cfg.Token != "" && !t.token.Match(r.Header.Get(TokenHeader)) {
			t.refused.Add(1)
			w.Header().Set("Connection", "close")
			http.Error(w, "bad raft token", http.StatusUnauthorized)
			return
		}
		if t.linkAsRaft(r) {
			t.refuseLinkAsRaft(w)
			return
		}
		if g := r.Header.Get(GroupHeader); g != strconv.Itoa(t.cfg.Group) {
			w.Header().Set("Connection", "close")
			http.Error(w, "wrong raft group for this port", http.StatusMisdirectedRequest)
			return
		}
		next(w, r)
	})
}

// maxChunkBody is the largest snapshot chunk request accepted; dragonboat
// cuts snapshots into 2 MiB chunks.
const maxChunkBody = 8 << 20

// bodyOf reads a whole request body of at most maxBody bytes and answers
// with the status next returns for it. A body that stops arriving for
// Timeouts.Stall ends the request.
func (t *Transport) bodyOf(maxBody int64, next func([]byte) int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = &deadlineReader{r: r.Body, rc: http.NewResponseController(w), timeout: t.cfg.Timeouts.Stall}
		body, err := readBody(w, r, maxBody)
		if err != nil {
			http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		w.WriteHeader(next(body))
	}
}

// readBody reads a request body of at most maxBody bytes into a buffer sized
// by Content-Length when the peer sent one: growing the buffer as the bytes
// arrived copied each chunk about twice more.
func readBody(w http.ResponseWriter, r *http.Request, maxBody int64) ([]byte, error) {
	lr := http.MaxBytesReader(w, r.Body, maxBody)
	if r.ContentLength <= 0 || r.ContentLength > maxBody {
		return io.ReadAll(lr)
	}
	// net/http stops the body at Content-Length, so reading exactly that
	// much reads all of it.
	buf := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(lr, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

func (t *Transport) serveChunk(body []byte) int {
	var c pb.Chunk
	if err := c.Unmarshal(body); err != nil {
		return http.StatusBadRequest
	}
	if !t.ch(c) {
		return http.StatusConflict
	}
	return http.StatusNoContent
}

// serveTime answers with this node's clock: 8 bytes, big-endian unix ms.
// It is behind the token like every raft route: a clock anyone could
// answer for could be moved by anyone.
func (t *Transport) serveTime(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(binary.BigEndian.AppendUint64(nil, uint64(t.cfg.Clock())))
}

// PeerTime asks the peer at target for its clock (unix ms). The caller
// times the round trip; a ctx without a deadline is bounded by
// Timeouts.Open.
func (t *Transport) PeerTime(ctx context.Context, target string) (int64, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.cfg.Timeouts.Open)
		defer cancel()
	}
	if t.cfg.Drop != nil {
		if err := t.cfg.Drop(target); err != nil {
			return 0, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url(target, timePath), nil)
	if err != nil {
		return 0, fmt.Errorf("raft transport: request to %s: %w", target, err)
	}
	req.Header.Set(TokenHeader, t.cfg.Token)
	req.Header.Set(GroupHeader, strconv.Itoa(t.cfg.Group))
	resp, err := t.client.Do(req)
	if err != nil {
		t.noteSendErr(target, err)
		return 0, fmt.Errorf("raft transport group %d: time from %s: %w", t.cfg.Group, target, err)
	}
	defer resp.Body.Close()
	var b [8]byte
	_, err = io.ReadFull(resp.Body, b[:])
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		t.rejected.Add(1)
		t.warnRefused(target)
		return 0, fmt.Errorf("raft transport group %d: peer %s %w (401)", t.cfg.Group, target, ErrRefused)
	case resp.StatusCode != http.StatusOK:
		return 0, fmt.Errorf("raft transport group %d: time from %s: %s", t.cfg.Group, target, resp.Status)
	case err != nil:
		return 0, fmt.Errorf("raft transport group %d: time from %s: %w", t.cfg.Group, target, err)
	}
	t.heard(target)
	return int64(binary.BigEndian.Uint64(b[:])), nil
}

// heard records that the peer at addr just reached us.
func (t *Transport) heard(addr string) {
	if addr != "" {
		t.lastOK.Store(addr, time.Now())
	}
}

// GetConnection returns a stream to target: a raw one when the peer takes
// it (raw.go), whose own dial fails a dead peer fast; otherwise, after a
// quick dial probe so that a dead peer fails fast and dragonboat's breaker
// backs off, a chunked one.
func (t *Transport) GetConnection(ctx context.Context, target string) (raftio.IConnection, error) {
	if t.rawFor(target) {
		s, err := t.openRaw(ctx, target)
		if !errors.Is(err, errNoRaw) {
			if err != nil {
				return nil, err
			}
			return s, nil
		}
		t.noteOldPeer(target, err)
		return t.openStream(ctx, target)
	}
	if err := t.probe(ctx, target); err != nil {
		return nil, err
	}
	return t.openStream(ctx, target)
}

// GetSnapshotConnection returns a connection for snapshot chunks.
func (t *Transport) GetSnapshotConnection(ctx context.Context, target string) (raftio.ISnapshotConnection, error) {
	if err := t.probe(ctx, target); err != nil {
		return nil, err
	}
	return &chunkConn{t: t, target: target}, nil
}

func (t *Transport) probe(ctx context.Context, target string) error {
	if t.cfg.Drop != nil {
		if err := t.cfg.Drop(target); err != nil {
			return err
		}
	}
	d := net.Dialer{Timeout: t.cfg.Timeouts.Dial}
	c, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return fmt.Errorf("raft transport group %d: dial %s: %w", t.cfg.Group, target, err)
	}
	return c.Close()
}

// post sends one RPC and turns any non-2xx answer into an error. The whole
// exchange, connect to answer, is bounded by Timeouts.Chunk.
func (t *Transport) post(target, path string, body []byte) error {
	if t.cfg.Drop != nil {
		if err := t.cfg.Drop(target); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.Timeouts.Chunk)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url(target, path), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("raft transport: request to %s: %w", target, err)
	}
	req.Header.Set(TokenHeader, t.cfg.Token)
	req.Header.Set(GroupHeader, strconv.Itoa(t.cfg.Group))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := t.client.Do(req)
	if err != nil {
		t.noteSendErr(target, err)
		if ctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("no answer within %v: %w", t.cfg.Timeouts.Chunk, err)
		}
		return fmt.Errorf("raft transport group %d: send to %s: %w", t.cfg.Group, target, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		t.rejected.Add(1)
		t.warnRefused(target)
		return fmt.Errorf("raft transport group %d: peer %s %w (401)", t.cfg.Group, target, ErrRefused)
	case resp.StatusCode/100 != 2:
		t.notePlainToTLS(target, resp.StatusCode)
		return fmt.Errorf("raft transport group %d: peer %s answered %s", t.cfg.Group, target, resp.Status)
	}
	t.lastOK.Store(target, time.Now())
	return nil
}

// warnRefused logs the refusal at most once every 10 s per peer: the breaker
// retries, and a log line per retry helps nobody.
func (t *Transport) warnRefused(target string) {
	now := time.Now()
	if v, ok := t.warnedAt.Load(target); ok && now.Sub(v.(time.Time)) < 10*time.Second {
		return
	}
	t.warnedAt.Store(target, now)
	t.cfg.Logger.Warn("raft: replication to peer failed: the peer refused this node's QUEEN_RAFT_TOKEN; set the same QUEEN_RAFT_TOKEN on every node",
		"peer", target, "group", t.cfg.Group)
}

// warnOversized logs a batch dropped for its size, at most once every 10 s
// per peer.
func (t *Transport) warnOversized(target string, bytes int) {
	now := time.Now()
	key := "oversized " + target
	if v, ok := t.warnedAt.Load(key); ok && now.Sub(v.(time.Time)) < 10*time.Second {
		return
	}
	t.warnedAt.Store(key, now)
	t.cfg.Logger.Error("raft: a message batch is larger than a peer accepts and was not sent; the group may not commit until the limits agree",
		"peer", target, "group", t.cfg.Group, "bytes", bytes, "limit", t.cfg.MaxBodyBytes, "dropped_total", t.oversized.Load())
}

// chunkConn sends snapshot chunks, one request each.
type chunkConn struct {
	t      *Transport
	target string
}

func (c *chunkConn) Close() {}

func (c *chunkConn) SendChunk(ch pb.Chunk) error {
	body, err := ch.Marshal()
	if err != nil {
		return fmt.Errorf("raft transport: marshal chunk: %w", err)
	}
	return c.t.post(c.target, chunkPath, body)
}

// deadlineReader bounds each read of a request body: before every read the
// connection's read deadline moves to timeout from now, so a body that
// keeps arriving, however slowly, is read to its end, and one that stops
// fails after timeout.
type deadlineReader struct {
	r       io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	if err := d.rc.SetReadDeadline(time.Now().Add(d.timeout)); err != nil {
		return 0, err
	}
	n, err := d.r.Read(p)
	if err == io.EOF {
		// The body is in: lift the deadline, or net/http's read behind a
		// handler that answers later (a relayed long poll) would hit it
		// and cancel the request.
		_ = d.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

func (d *deadlineReader) Close() error { return d.r.Close() }
