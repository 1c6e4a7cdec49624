package kafka

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// login runs the SaslHandshake v1 + SaslAuthenticate flow as alice.
func login(t *testing.T, c *rawClient) {
	t.Helper()
	if resp := saslHandshake(c, 1, "PLAIN"); resp.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", resp.ErrorCode)
	}
	if resp := saslAuthenticate(c, "\x00alice\x00secret"); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %s", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestStalledFramesBeforeLoginDoNotStallOthers: connections that announce
// a frame and send none of it, or one byte of it, must not take the budget
// every other client needs. Before the fix each took its frame's first
// chunk when the size arrived, and a few hundred such connections held the
// whole node-wide budget before any login.
func TestStalledFramesBeforeLoginDoNotStallOthers(t *testing.T) {
	const budget = 256 << 10
	s := startServer(t, Config{Authenticate: tenantAuthenticator, MaxRequestBytes: budget, MaxBufferedRequestBytes: budget}, nil)
	const announced = 60 << 10 // under the pre-login frame limit
	for range 8 {
		dialRaw(t, s).writeRaw(binary.BigEndian.AppendUint32(nil, announced))
	}
	const started = 4
	for range started {
		dialRaw(t, s).writeRaw(append(binary.BigEndian.AppendUint32(nil, announced), 0))
	}
	// Only the frames whose bytes began to arrive hold budget, one first
	// chunk each.
	waitFor(t, "the started frames to hold one first chunk each", func() bool {
		return s.budget.inUse() == started*(16<<10)
	})
	c := dialRaw(t, s)
	c.roundTrip(apiVersionsRequest(3))
	login(t, c)
	c.roundTrip(apiVersionsRequest(3))
}

// dialFrom connects to s from a loopback address of its own (127.0.0.0/8
// is all loopback), as a distinct client host would.
func dialFrom(t *testing.T, s *Server, ip string) *rawClient {
	t.Helper()
	d := net.Dialer{Timeout: testTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	conn, err := d.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawClient{t: t, conn: conn, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test"))}
}

// TestConnectionsBeforeLoginAreCapped: past MaxUnauthenticatedConnections,
// or past a quarter of them from one address, a new connection is closed
// at once; a login or a close frees its place.
func TestConnectionsBeforeLoginAreCapped(t *testing.T) {
	s := startServer(t, Config{Authenticate: tenantAuthenticator, MaxUnauthenticatedConnections: 8}, nil)
	var first []*rawClient
	for _, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		for range 2 {
			c := dialFrom(t, s, ip)
			c.roundTrip(apiVersionsRequest(3))
			first = append(first, c)
		}
	}
	dialFrom(t, s, "127.0.0.6").expectClosed() // all eight places taken

	login(t, first[0]) // 127.0.0.2 has one place again, and so has the node
	dialFrom(t, s, "127.0.0.3").expectClosed()
	again := dialFrom(t, s, "127.0.0.2")
	again.roundTrip(apiVersionsRequest(3))
	dialFrom(t, s, "127.0.0.6").expectClosed()

	first[2].conn.Close() // one of 127.0.0.3's
	waitFor(t, "the closed connection to free its place", func() bool { return s.OpenConnections() == 8 })
	dialFrom(t, s, "127.0.0.3").roundTrip(apiVersionsRequest(3))
	first[0].roundTrip(apiVersionsRequest(3)) // the logged-in one was never at risk
}

// TestConnectionsPerIPAreCapped: one address may hold at most
// MaxConnectionsPerIP connections, logged in or not.
func TestConnectionsPerIPAreCapped(t *testing.T) {
	s := startServer(t, Config{MaxConnectionsPerIP: 2}, nil)
	a, b := dialRaw(t, s), dialRaw(t, s)
	a.roundTrip(apiVersionsRequest(3))
	b.roundTrip(apiVersionsRequest(3))
	dialRaw(t, s).expectClosed()
	a.conn.Close()
	waitFor(t, "the closed connection to be forgotten", func() bool { return s.OpenConnections() == 1 })
	dialRaw(t, s).roundTrip(apiVersionsRequest(3))
}

// TestLoginTimeout: a connection that has not logged in LoginTimeout after
// it connected is closed, however busy it keeps; one that logged in stays.
func TestLoginTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	s := startServer(t, Config{Authenticate: tenantAuthenticator, LoginTimeout: timeout}, nil)
	silent := dialRaw(t, s)
	busy := dialRaw(t, s)
	good := dialRaw(t, s)
	login(t, good)
	start := time.Now()
	for {
		// A connection that keeps asking for ApiVersions is not idle, but
		// still a stranger: it ends once the timeout passes.
		busy.corr++
		busy.writeRaw(busy.fmt.AppendRequest(nil, apiVersionsRequest(3), busy.corr))
		if _, err := busy.readFrame(); err != nil {
			break
		}
		if time.Since(start) > testTimeout {
			t.Fatal("a connection that never logged in is still served")
		}
	}
	if elapsed := time.Since(start); elapsed < timeout/2 {
		t.Fatalf("closed after %s, before the login timeout", elapsed)
	}
	silent.expectClosed()
	for time.Since(start) < 3*timeout {
		good.roundTrip(apiVersionsRequest(3))
	}
}
