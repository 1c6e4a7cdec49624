package kafka

import (
	"context"
	"errors"
	"net"
	"time"
)

// drainPoll is how often Drain looks for connections with nothing left to
// answer.
const drainPoll = 20 * time.Millisecond

// drainQuiet is how long a connection must have sent nothing before Drain
// closes it. A request the client sent just before the close would be
// cut off; one that stays quiet this long has, in all likelihood, moved
// its traffic to the leaders Metadata now names.
const drainQuiet = 500 * time.Millisecond

// Drain is the first half of a graceful stop: it stops accepting, then
// closes each connection once it has answered every request it read and
// sent nothing for drainQuiet, until ctx ends, when it closes the rest. A client whose connection
// closes between requests reconnects elsewhere, as it does when a Kafka
// broker shuts down; one whose request was cut off at the deadline sees a
// connection error, which Kafka clients retry. Close still has to be
// called; after Drain it finds nothing left to close.
func (s *Server) Drain(ctx context.Context) error {
	s.mu.Lock()
	ln := s.ln
	s.closed = true // admit refuses from now on
	s.mu.Unlock()
	var err error
	if ln != nil {
		if cerr := ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = cerr
		}
	}
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	for {
		busy := 0
		quiet := time.Now().Add(-drainQuiet).UnixNano()
		s.mu.Lock()
		for c := range s.conns {
			if c.unanswered.Load() == 0 && c.lastRead.Load() < quiet {
				c.shutdown()
			} else {
				busy++
			}
		}
		s.mu.Unlock()
		if busy == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-t.C:
		}
	}
}
