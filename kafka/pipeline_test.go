package kafka

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPipelinedResponsesKeepRequestOrder writes several requests back to
// back; the first one's handler is held until all the later ones have run,
// so they finish first, yet the responses come back in request order.
func TestPipelinedResponsesKeepRequestOrder(t *testing.T) {
	h := newBlockingHandler()
	s := startServer(t, Config{}, func(s *Server) { must(t, s.RegisterHandler(12, h.handle)) })
	c := dialRaw(t, s)

	const n = 6
	var corrs []int32
	var batch []byte
	for i := range n {
		group := fmt.Sprintf("fast-%d", i)
		if i == 0 {
			group = "block-first"
		}
		c.corr++
		corrs = append(corrs, c.corr)
		// AppendRequest sizes the frame from the start of its dst.
		batch = append(batch, c.fmt.AppendRequest(nil, heartbeat(group), c.corr)...)
	}
	c.writeRaw(batch) // one write: the requests arrive pipelined

	// All n handlers start concurrently; the n-1 fast ones finish while the
	// first is still held.
	seen := map[string]bool{}
	for range n {
		seen[h.waitStarted(t)] = true
	}
	if !seen["block-first"] || len(seen) != n {
		t.Fatalf("handlers started: %v", seen)
	}
	waitFor(t, "the fast handlers to finish", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.active == 1
	})
	close(h.release)
	for _, corr := range corrs {
		c.recv(heartbeat(""), corr) // recv fails unless corr is next
	}
}

// TestInFlightBound: with MaxInFlightPerConnection 2 no more than two
// handlers of a connection run at once; the others wait unread.
func TestInFlightBound(t *testing.T) {
	h := newBlockingHandler()
	s := startServer(t, Config{MaxInFlightPerConnection: 2}, func(s *Server) { must(t, s.RegisterHandler(12, h.handle)) })
	c := dialRaw(t, s)
	var corrs []int32
	for i := range 5 {
		corrs = append(corrs, c.send(heartbeat(fmt.Sprintf("block-%d", i))))
	}
	h.waitStarted(t)
	h.waitStarted(t)
	waitFor(t, "two handlers running", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.active == 2
	})
	close(h.release)
	for _, corr := range corrs {
		c.recv(heartbeat(""), corr)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.maxSeen != 2 {
		t.Fatalf("%d handlers ran at once, the bound is 2", h.maxSeen)
	}
}

// TestProduceAcksZeroGetsNoResponse: the handler runs, nothing is written,
// and the next request's response is the next frame on the wire.
func TestProduceAcksZeroGetsNoResponse(t *testing.T) {
	produced := make(chan int16, 1)
	s := startServer(t, Config{}, func(s *Server) {
		must(t, s.RegisterHandler(0, func(_ context.Context, _ *Conn, kreq kmsg.Request) (kmsg.Response, error) {
			produced <- kreq.(*kmsg.ProduceRequest).Acks
			return kreq.ResponseKind(), nil
		}))
	})
	c := dialRaw(t, s)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = 0
	c.send(req)
	if acks := within(t, produced); acks != 0 {
		t.Fatalf("acks %d", acks)
	}
	c.roundTrip(apiVersionsRequest(3)) // fails if a produce response came first
}

// TestProduceAcksZeroErrorClosesTheConnection: an acks=0 producer reads no
// response, so a failed partition is reported the way Kafka reports it, by
// closing the connection: the client notices, refreshes its metadata and
// reconnects, instead of sending to a partition it cannot write forever.
func TestProduceAcksZeroErrorClosesTheConnection(t *testing.T) {
	s := startServer(t, Config{}, func(s *Server) {
		must(t, s.RegisterHandler(0, func(_ context.Context, _ *Conn, kreq kmsg.Request) (kmsg.Response, error) {
			req := kreq.(*kmsg.ProduceRequest)
			resp := req.ResponseKind().(*kmsg.ProduceResponse)
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = req.Topics[0].Topic
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.ErrorCode = kerr.NotLeaderForPartition.Code
			rt.Partitions = append(rt.Partitions, rp)
			resp.Topics = append(resp.Topics, rt)
			return resp, nil
		}))
	})
	c := dialRaw(t, s)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = 0
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rt.Partitions = append(rt.Partitions, kmsg.NewProduceRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	c.send(req)
	c.expectClosed()
}

// TestHandlerFailuresCloseTheConnection: an error, a panic, a nil or a
// mismatched response each close that connection after the responses
// before it; the server survives.
func TestHandlerFailuresCloseTheConnection(t *testing.T) {
	behaviours := map[string]Handler{
		"error": func(context.Context, *Conn, kmsg.Request) (kmsg.Response, error) {
			return nil, errors.New("engine unavailable")
		},
		"panic": func(context.Context, *Conn, kmsg.Request) (kmsg.Response, error) {
			panic("handler bug")
		},
		"nil response": func(context.Context, *Conn, kmsg.Request) (kmsg.Response, error) {
			return nil, nil
		},
		"wrong response key": func(context.Context, *Conn, kmsg.Request) (kmsg.Response, error) {
			return kmsg.NewPtrMetadataResponse(), nil
		},
	}
	for name, h := range behaviours {
		t.Run(name, func(t *testing.T) {
			s := startServer(t, Config{}, func(s *Server) { must(t, s.RegisterHandler(12, h)) })
			c := dialRaw(t, s)
			first := c.send(apiVersionsRequest(3))
			c.send(heartbeat("g"))
			c.recv(apiVersionsRequest(3), first) // answered before the failure
			c.expectClosed()
			dialRaw(t, s).roundTrip(apiVersionsRequest(3))
		})
	}
}

func TestCloseAfterResponse(t *testing.T) {
	s := startServer(t, Config{}, func(s *Server) {
		must(t, s.RegisterHandler(12, func(_ context.Context, _ *Conn, kreq kmsg.Request) (kmsg.Response, error) {
			return kreq.ResponseKind(), fmt.Errorf("fenced: %w", ErrCloseAfterResponse)
		}))
	})
	c := dialRaw(t, s)
	c.roundTrip(heartbeat("g"))
	c.expectClosed()
}

func TestRequestHeaderFromContext(t *testing.T) {
	got := make(chan RequestHeader, 1)
	s := startServer(t, Config{}, func(s *Server) {
		must(t, s.RegisterHandler(12, func(ctx context.Context, _ *Conn, kreq kmsg.Request) (kmsg.Response, error) {
			h, _ := RequestHeaderFromContext(ctx)
			got <- h
			return kreq.ResponseKind(), nil
		}))
	})
	c := dialRaw(t, s)
	corr := c.send(heartbeat("g"))
	c.recv(heartbeat(""), corr)
	h := within(t, got)
	if h.Key != 12 || h.Version != 2 || h.CorrelationID != corr || h.ClientID != "raw-test" {
		t.Fatalf("header %+v", h)
	}
}
