package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestOversizedFrameClosesTheConnection(t *testing.T) {
	s := startServer(t, Config{MaxRequestBytes: 1024}, nil)
	for _, size := range []uint32{1025, 1 << 31, 0xffffffff} {
		c := dialRaw(t, s)
		c.writeRaw(binary.BigEndian.AppendUint32(nil, size))
		c.expectClosed()
	}
	if got := s.budget.inUse(); got != 0 {
		t.Fatalf("%d budget bytes still held", got)
	}
	// A frame at the limit is fine.
	c := dialRaw(t, s)
	req := apiVersionsRequest(3)
	req.ClientSoftwareVersion = "1"
	frame := c.fmt.AppendRequest(nil, req, 1)
	for len(frame)-4 < 1024 { // pad the software name up to the limit
		req.ClientSoftwareName += "x"
		frame = c.fmt.AppendRequest(nil, req, 1)
	}
	req.ClientSoftwareName = req.ClientSoftwareName[:len(req.ClientSoftwareName)-(len(frame)-4-1024)]
	corr := c.send(req)
	c.recv(req, corr)
}

func TestMaxConnections(t *testing.T) {
	s := startServer(t, Config{MaxConnections: 2}, nil)
	a, b := dialRaw(t, s), dialRaw(t, s)
	a.roundTrip(apiVersionsRequest(3))
	b.roundTrip(apiVersionsRequest(3))
	over := dialRaw(t, s)
	over.expectClosed()

	a.conn.Close()
	waitFor(t, "the closed connection to be forgotten", func() bool { return s.OpenConnections() == 1 })
	dialRaw(t, s).roundTrip(apiVersionsRequest(3))
}

func TestIdleConnectionIsClosed(t *testing.T) {
	s := startServer(t, Config{IdleTimeout: 100 * time.Millisecond}, nil)
	c := dialRaw(t, s)
	c.roundTrip(apiVersionsRequest(3))
	c.expectClosed() // nothing sent: the server gives up after IdleTimeout
}

// TestCloseWaitsForEverything: Close returns with handlers cancelled and
// every connection gone, even with requests blocked in handlers.
func TestCloseWaitsForEverything(t *testing.T) {
	h := newBlockingHandler()
	s := startServer(t, Config{}, func(s *Server) { must(t, s.RegisterHandler(12, h.handle)) })
	clients := []*rawClient{dialRaw(t, s), dialRaw(t, s)}
	for _, c := range clients {
		c.send(heartbeat("block"))
	}
	h.waitStarted(t)
	h.waitStarted(t)
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Close did not return")
	}
	if n := s.OpenConnections(); n != 0 {
		t.Fatalf("%d connections left", n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.active != 0 {
		t.Fatalf("%d handlers still running after Close", h.active)
	}
	for _, c := range clients {
		c.expectClosed()
	}
	if err := s.Start(); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}

func TestByteBudget(t *testing.T) {
	b := newByteBudget(100)
	ctx := context.Background()
	must(t, b.acquire(ctx, 60))
	must(t, b.acquire(ctx, 40))
	got := make(chan error, 1)
	go func() { got <- b.acquire(ctx, 10) }()
	waitFor(t, "the acquire to wait", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.waiters == 1
	})
	b.release(60)
	must(t, within(t, got))
	// Oversized requests are admitted alone.
	b.release(40)
	b.release(10)
	must(t, b.acquire(ctx, 500))
	cctx, cancel := context.WithCancel(ctx)
	go func() { got <- b.acquire(cctx, 1) }()
	waitFor(t, "the second acquire to wait", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.waiters == 1
	})
	cancel()
	if err := within(t, got); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", err)
	}
	b.release(500)
	if b.inUse() != 0 {
		t.Fatalf("in use %d", b.inUse())
	}
}

// TestBudgetReleasedAfterRequests checks the per-request accounting over a
// real connection, failures included.
func TestBudgetReleasedAfterRequests(t *testing.T) {
	h := newBlockingHandler()
	close(h.release)
	s := startServer(t, Config{}, func(s *Server) { must(t, s.RegisterHandler(12, h.handle)) })
	c := dialRaw(t, s)
	for range 10 {
		c.roundTrip(heartbeat("g"))
	}
	bad := dialRaw(t, s)
	bad.writeRaw([]byte{0, 0, 0, 8, 3, 231, 0, 0, 0, 0, 0, 1}) // key 999
	bad.expectClosed()
	waitFor(t, "the budget to drain", func() bool { return s.budget.inUse() == 0 })
}

func TestMetadataRequestSurvivesKmsgRoundTrip(t *testing.T) {
	// Guards the raw client itself: a request it writes decodes as the
	// server would decode it.
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("x")).AppendRequest(nil, req, 7)
	d, err := decodeRequest(frame[4:])
	must(t, err)
	if d.hdr.CorrelationID != 7 || d.hdr.ClientID != "x" || !d.inWindow || d.req.GetVersion() != 9 {
		t.Fatalf("decoded %+v", d)
	}
}

// TestStalledFrameHoldsLittleBudget: announcing a large frame and sending
// little of it takes budget for what arrived, not for what was announced.
func TestStalledFrameHoldsLittleBudget(t *testing.T) {
	s := startServer(t, Config{MaxRequestBytes: 64 << 20}, nil)
	c := dialRaw(t, s)
	const sent = 300 << 10
	c.writeRaw(append(binary.BigEndian.AppendUint32(nil, 60<<20), make([]byte, sent)...))
	waitFor(t, "the reader to take in what was sent", func() bool { return s.budget.inUse() >= sent })
	if held := s.budget.inUse(); held > frameGrowth*sent {
		t.Fatalf("a stalled frame holds %d bytes of budget for %d received", held, sent)
	}
	c.conn.Close()
	waitFor(t, "the budget to be returned", func() bool { return s.budget.inUse() == 0 })
}
