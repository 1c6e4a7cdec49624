package kafka

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestDrainAnswersWhatWasAskedThenCloses: Drain stops accepting at once,
// closes an idle connection, and closes a busy one only after the request
// it is serving has been answered.
func TestDrainAnswersWhatWasAskedThenCloses(t *testing.T) {
	h := newBlockingHandler()
	s := startServer(t, Config{}, func(s *Server) { must(t, s.RegisterHandler(12, h.handle)) })
	idle, busy := dialRaw(t, s), dialRaw(t, s)
	idle.roundTrip(heartbeat("fast"))
	h.waitStarted(t)
	corr := busy.send(heartbeat("block"))
	h.waitStarted(t)

	addr := s.Addr().String()
	drained := make(chan error, 1)
	go func() { drained <- s.Drain(context.Background()) }()
	idle.expectClosed()
	waitFor(t, "the listener to close", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case err := <-drained:
		t.Fatalf("Drain returned (%v) while a request was unanswered", err)
	default:
	}
	close(h.release)
	busy.recv(heartbeat(""), corr)
	busy.expectClosed()
	if err := within(t, drained); err != nil {
		t.Fatal(err)
	}
}
