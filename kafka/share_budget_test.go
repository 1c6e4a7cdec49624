package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareAuthenticator logs in every user with password "pw"; the share is
// the part of the user name before the dot (a tenant).
func shareAuthenticator(_ context.Context, user, password string) (Principal, error) {
	if password != "pw" {
		return Principal{}, errors.New("wrong password")
	}
	return Principal{Identity: strings.SplitN(user, ".", 2)[0]}, nil
}

func loginAs(t *testing.T, c *rawClient, user string) {
	t.Helper()
	if resp := saslHandshake(c, 1, "PLAIN"); resp.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", resp.ErrorCode)
	}
	if resp := saslAuthenticate(c, "\x00"+user+"\x00pw"); resp.ErrorCode != 0 {
		t.Fatalf("authenticate %s: %s", user, kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestShareBoundsFramesAcrossConnections: the connections of one share (a
// tenant) hold at most MaxBufferedRequestBytesPerShare of request frames
// together. A connection over it is not read until the share has room:
// its request waits and is then served, nothing is refused, and another
// share's requests go on meanwhile. Refusing instead (NOT_ENOUGH_REPLICAS
// with a throttle) halved a tenant's produce throughput (issue 33).
func TestShareBoundsFramesAcrossConnections(t *testing.T) {
	h := newBlockingHandler()
	const share = 4 << 10
	s := startServer(t, Config{Authenticate: shareAuthenticator, ShareOf: func(p Principal) string { return p.Identity.(string) },
		MaxBufferedRequestBytesPerShare: share}, func(s *Server) { must(t, s.RegisterHandler(12, h.handle)) })
	a1, a2, b := dialRaw(t, s), dialRaw(t, s), dialRaw(t, s)
	loginAs(t, a1, "acme.one")
	loginAs(t, a2, "acme.two")
	loginAs(t, b, "other.one")

	big := "block-" + strings.Repeat("x", 3<<10) // most of the share
	first := heartbeat(big)
	firstCorr := a1.send(first)
	if g := h.waitStarted(t); g != big {
		t.Fatalf("started %q", g)
	}
	second := heartbeat(big + "2")
	secondCorr := a2.send(second)
	waitFor(t, "acme's second frame to wait for its share", func() bool {
		s.shares.mu.Lock()
		defer s.shares.mu.Unlock()
		sb := s.shares.m["acme"]
		if sb == nil {
			return false
		}
		sb.mu.Lock()
		defer sb.mu.Unlock()
		return sb.waiters == 1
	})
	select {
	case g := <-h.started:
		t.Fatalf("a frame over its share was served: %q", g)
	default:
	}
	// Another share is not held up.
	if resp := b.roundTrip(heartbeat("free")).(*kmsg.HeartbeatResponse); resp.ErrorCode != 0 {
		t.Fatalf("another share's request: error %d", resp.ErrorCode)
	}
	if g := h.waitStarted(t); g != "free" {
		t.Fatalf("started %q", g)
	}
	// Room again: the waiting frame is read and served, and both answered.
	close(h.release)
	if g := h.waitStarted(t); g != big+"2" {
		t.Fatalf("started %q", g)
	}
	if resp := a1.recv(first, firstCorr).(*kmsg.HeartbeatResponse); resp.ErrorCode != 0 {
		t.Fatalf("first: error %d", resp.ErrorCode)
	}
	if resp := a2.recv(second, secondCorr).(*kmsg.HeartbeatResponse); resp.ErrorCode != 0 {
		t.Fatalf("second: error %d", resp.ErrorCode)
	}
	waitFor(t, "the budgets to drain", func() bool { return s.budget.inUse() == 0 })
	// A share no connection holds is forgotten.
	for _, c := range []*rawClient{a1, a2, b} {
		c.conn.Close()
	}
	waitFor(t, "the shares to be forgotten", func() bool {
		s.shares.mu.Lock()
		defer s.shares.mu.Unlock()
		return len(s.shares.m) == 0
	})
}

// TestFrameLargerThanItsShareIsServed: as with the node-wide budget, one
// frame larger than its share is admitted when the share holds nothing
// else, even when its bytes arrive in pieces: the share is taken for the
// whole frame once its first byte arrives. Taken in growth steps, the
// frame waited for room its own first bytes held, for ever.
func TestFrameLargerThanItsShareIsServed(t *testing.T) {
	h := newBlockingHandler()
	close(h.release)
	s := startServer(t, Config{Authenticate: shareAuthenticator, ShareOf: func(p Principal) string { return p.Identity.(string) },
		MaxBufferedRequestBytesPerShare: 4 << 10}, func(s *Server) { must(t, s.RegisterHandler(12, h.handle)) })
	c := dialRaw(t, s)
	loginAs(t, c, "acme.one")
	req := heartbeat(strings.Repeat("x", 64<<10))
	c.corr++
	frame := c.fmt.AppendRequest(nil, req, c.corr)
	c.writeRaw(frame[:100])
	waitFor(t, "the frame's first bytes to be read", func() bool {
		s.shares.mu.Lock()
		defer s.shares.mu.Unlock()
		sb := s.shares.m["acme"]
		return sb != nil && sb.inUse() > 0
	})
	c.writeRaw(frame[100:])
	if resp := c.recv(req, c.corr).(*kmsg.HeartbeatResponse); resp.ErrorCode != 0 {
		t.Fatalf("error %d", resp.ErrorCode)
	}
}
