package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// testTimeout bounds every wait in these tests.
const testTimeout = 10 * time.Second

// testLogger sends server logs to the test log (shown on failure or -v).
// After the test ends it goes quiet instead of panicking.
type testLogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	level := slog.LevelInfo
	if os.Getenv("QUEEN_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// startServer starts a server on a free 127.0.0.1 port; register adds
// handlers before Start. The server is closed when the test ends, and the
// test fails if goroutines it started are still running then.
func startServer(t testing.TB, cfg Config, register func(*Server)) *Server {
	t.Helper()
	before := runtime.NumGoroutine()
	cfg.Addr = "127.0.0.1:0"
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if register != nil {
		register(s)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		// Close waits for its own goroutines; the test's clients may
		// still be unwinding, so poll for the count to come back.
		waitFor(t, "goroutines to end after Close", func() bool { return runtime.NumGoroutine() <= before })
	})
	return s
}

// waitFor polls cond until it holds, failing the test at testTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// within receives from ch, failing the test at testTimeout.
func within[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		var zero T
		t.Fatalf("timed out waiting on a %T channel", zero)
		return zero
	}
}

// rawClient speaks the wire protocol by hand with kmsg-encoded bodies.
type rawClient struct {
	t    testing.TB
	conn net.Conn
	fmt  *kmsg.RequestFormatter
	corr int32
}

func dialRaw(t testing.TB, s *Server) *rawClient {
	t.Helper()
	conn, err := net.DialTimeout("tcp", s.Addr().String(), testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawClient{t: t, conn: conn, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test"))}
}

// send writes req and returns its correlation id.
func (c *rawClient) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	c.writeRaw(c.fmt.AppendRequest(nil, req, c.corr))
	return c.corr
}

func (c *rawClient) writeRaw(b []byte) {
	c.t.Helper()
	c.conn.SetWriteDeadline(time.Now().Add(testTimeout))
	if _, err := c.conn.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one size-prefixed frame.
func (c *rawClient) readFrame() ([]byte, error) {
	c.conn.SetReadDeadline(time.Now().Add(testTimeout))
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.conn, frame); err != nil {
		return nil, err
	}
	return frame, nil
}

// recv reads the response to a request of req's key and version and checks
// its correlation id.
func (c *rawClient) recv(req kmsg.Request, corr int32) kmsg.Response {
	c.t.Helper()
	frame, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("reading the %s response: %v", KeyName(req.Key()), err)
	}
	resp, gotCorr, err := parseResponse(req, frame)
	if err != nil {
		c.t.Fatal(err)
	}
	if gotCorr != corr {
		c.t.Fatalf("%s response has correlation id %d, want %d", KeyName(req.Key()), gotCorr, corr)
	}
	return resp
}

// roundTrip sends req and returns its response.
func (c *rawClient) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	return c.recv(req, c.send(req))
}

func parseResponse(req kmsg.Request, frame []byte) (kmsg.Response, int32, error) {
	if len(frame) < 4 {
		return nil, 0, errors.New("short response frame")
	}
	corr := int32(binary.BigEndian.Uint32(frame))
	body := frame[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() && resp.Key() != keyApiVersions {
		if len(body) == 0 || body[0] != 0 {
			return nil, corr, errors.New("flexible response header without an empty tag section")
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, corr, fmt.Errorf("decoding the %s v%d response: %w", KeyName(req.Key()), req.GetVersion(), err)
	}
	return resp, corr, nil
}

// expectClosed checks that the server closed the connection: a read ends
// with EOF or a reset rather than data or a timeout.
func (c *rawClient) expectClosed() {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(testTimeout))
	var b [1]byte
	n, err := c.conn.Read(b[:])
	if n > 0 {
		c.t.Fatalf("expected the connection to be closed, read a byte")
	}
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		c.t.Fatalf("expected the connection to be closed, got %v", err)
	}
}

func apiVersionsRequest(version int16) *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(version)
	req.ClientSoftwareName = "queen-test"
	req.ClientSoftwareVersion = "1.0.0"
	return req
}

// blockingHandler is a Heartbeat handler that holds requests whose group is
// "block" until release is closed, recording how many run at once.
type blockingHandler struct {
	mu      sync.Mutex
	active  int
	maxSeen int
	started chan string
	release chan struct{}
}

func newBlockingHandler() *blockingHandler {
	return &blockingHandler{started: make(chan string, 64), release: make(chan struct{})}
}

func (b *blockingHandler) handle(ctx context.Context, _ *Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.HeartbeatRequest)
	b.mu.Lock()
	b.active++
	b.maxSeen = max(b.maxSeen, b.active)
	b.mu.Unlock()
	defer func() { b.mu.Lock(); b.active--; b.mu.Unlock() }()
	b.started <- req.Group
	if strings.HasPrefix(req.Group, "block") {
		select {
		case <-b.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return req.ResponseKind(), nil
}

// waitStarted returns the group of the next handler to start.
func (b *blockingHandler) waitStarted(t testing.TB) string {
	t.Helper()
	select {
	case g := <-b.started:
		return g
	case <-time.After(testTimeout):
		t.Fatal("timed out waiting for a handler to start")
		return ""
	}
}

func heartbeat(group string) *kmsg.HeartbeatRequest {
	req := kmsg.NewPtrHeartbeatRequest()
	req.SetVersion(2)
	req.Group = group
	req.MemberID = "m"
	return req
}
