package kafka

import (
	"encoding/binary"
	"fmt"
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

// TestConnectionsBeforeLoginAreCapped: past MaxUnauthenticatedConnections
// a new connection is closed at once unless some other address holds more
// places than its own, and past a quarter of them from one address it is
// closed whatever the others hold; a login or a close frees its place.
func TestConnectionsBeforeLoginAreCapped(t *testing.T) {
	s := startServer(t, Config{Authenticate: tenantAuthenticator, MaxUnauthenticatedConnections: 8}, nil)
	var first []*rawClient
	for i := 2; i < 10; i++ {
		c := dialFrom(t, s, fmt.Sprintf("127.0.0.%d", i))
		c.roundTrip(apiVersionsRequest(3))
		first = append(first, c)
	}
	dialFrom(t, s, "127.0.0.2").expectClosed() // all eight places taken, no one holds more

	login(t, first[0]) // 127.0.0.2 has its place again, and so has the node
	again := dialFrom(t, s, "127.0.0.2")
	again.roundTrip(apiVersionsRequest(3))
	dialFrom(t, s, "127.0.0.3").expectClosed()

	first[1].conn.Close() // 127.0.0.3's
	waitFor(t, "the closed connection to free its place", func() bool { return s.OpenConnections() == 8 })
	dialFrom(t, s, "127.0.0.3").roundTrip(apiVersionsRequest(3))
	first[0].roundTrip(apiVersionsRequest(3)) // the logged-in one was never at risk

	// A quarter of the places from one address, then no more, whoever
	// else holds what.
	s2 := startServer(t, Config{Authenticate: tenantAuthenticator, MaxUnauthenticatedConnections: 8}, nil)
	for range 2 {
		dialFrom(t, s2, "127.0.0.2").roundTrip(apiVersionsRequest(3))
	}
	dialFrom(t, s2, "127.0.0.2").expectClosed()
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

// TestStalledStrangersCannotLockOutOtherHosts (issue 33 item 6): a few
// addresses each holding their share of the places before login must not
// refuse every other host's login. A newcomer from an address holding
// fewer places takes the oldest place of the address holding the most; an
// address never takes the places of one holding no more than itself.
func TestStalledStrangersCannotLockOutOtherHosts(t *testing.T) {
	const places = 16 // 4 addresses × a quarter each fill them
	s := startServer(t, Config{Authenticate: tenantAuthenticator, MaxUnauthenticatedConnections: places}, nil)
	attackers := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}
	stalled := map[string][]*rawClient{}
	for _, ip := range attackers {
		for range places / 4 {
			c := dialFrom(t, s, ip)
			c.roundTrip(apiVersionsRequest(3))
			stalled[ip] = append(stalled[ip], c)
		}
	}
	// Every other host still logs in, again and again, while the stalled
	// addresses keep trying to fill every place: they take each other's,
	// never the newcomer's.
	for range 4 {
		c := dialFrom(t, s, "127.0.0.6")
		c.roundTrip(apiVersionsRequest(3))
		for _, ip := range attackers {
			for range 2 {
				tryApiVersions(dialFrom(t, s, ip))
			}
		}
		login(t, c)
		c.roundTrip(apiVersionsRequest(3))
	}
	// The first evicted was the oldest of the heaviest addresses.
	stalled["127.0.0.2"][0].expectClosed()
}

// tryApiVersions reports whether c is served an ApiVersions, false when the
// server closed it.
func tryApiVersions(c *rawClient) bool {
	c.corr++
	c.conn.SetWriteDeadline(time.Now().Add(testTimeout))
	if _, err := c.conn.Write(c.fmt.AppendRequest(nil, apiVersionsRequest(3), c.corr)); err != nil {
		return false
	}
	_, err := c.readFrame()
	return err == nil
}
