package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// expiringAuthenticator accepts alice (and bob) with any password, for
// sessions of lifetime.
func expiringAuthenticator(lifetime time.Duration) PlainAuthenticator {
	return func(_ context.Context, user, _ string) (Principal, error) {
		if user != "alice" && user != "bob" {
			return Principal{}, errors.New("unknown user")
		}
		return Principal{Identity: "tenant-a", Expires: time.Now().Add(lifetime)}, nil
	}
}

// TestSessionLifetimeIsTheCredentials: SaslAuthenticate answers the time
// the credentials have left (KIP-368), and a connection that does not
// authenticate again by then is closed.
func TestSessionLifetimeIsTheCredentials(t *testing.T) {
	const lifetime = 300 * time.Millisecond
	s := startServer(t, Config{Authenticate: expiringAuthenticator(lifetime)}, nil)
	c := dialRaw(t, s)
	start := time.Now()
	saslHandshake(c, 1, "PLAIN")
	resp := saslAuthenticate(c, "\x00alice\x00pw")
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis <= 0 || resp.SessionLifetimeMillis > lifetime.Milliseconds() {
		t.Fatalf("authenticate answered error %d, session lifetime %d ms; want up to %d ms",
			resp.ErrorCode, resp.SessionLifetimeMillis, lifetime.Milliseconds())
	}
	c.roundTrip(apiVersionsRequest(3))
	c.expectClosed()
	if elapsed := time.Since(start); elapsed < lifetime {
		t.Fatalf("closed after %s, before the session expired", elapsed)
	}
}

// TestReauthentication: a client authenticates again on its connection
// before its session expires (KIP-368) and keeps it; it must stay the same
// user.
func TestReauthentication(t *testing.T) {
	const lifetime = 300 * time.Millisecond
	s := startServer(t, Config{Authenticate: expiringAuthenticator(lifetime)}, nil)
	c := dialRaw(t, s)
	start := time.Now()
	saslHandshake(c, 1, "PLAIN")
	saslAuthenticate(c, "\x00alice\x00pw")
	for time.Since(start) < 3*lifetime {
		if resp := saslHandshake(c, 1, "PLAIN"); resp.ErrorCode != 0 {
			t.Fatalf("re-authentication handshake: %s", kerr.ErrorForCode(resp.ErrorCode))
		}
		if resp := saslAuthenticate(c, "\x00alice\x00pw"); resp.ErrorCode != 0 || resp.SessionLifetimeMillis <= 0 {
			t.Fatalf("re-authentication: error %d, session lifetime %d ms", resp.ErrorCode, resp.SessionLifetimeMillis)
		}
		c.roundTrip(apiVersionsRequest(3))
	}
	// Another user may not take the connection over.
	saslHandshake(c, 1, "PLAIN")
	if resp := saslAuthenticate(c, "\x00bob\x00pw"); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authentication as another user: error %d", resp.ErrorCode)
	}
	c.expectClosed()

	// The v0 flow cannot re-authenticate: its session ends with its
	// credentials.
	v0 := dialRaw(t, s)
	saslHandshake(v0, 0, "PLAIN")
	v0.writeRaw(rawToken("\x00alice\x00pw"))
	if frame, err := v0.readFrame(); err != nil || len(frame) != 0 {
		t.Fatalf("raw token answer: %q %v", frame, err)
	}
	v0.expectClosed()
}

// TestSessionsWithoutExpiryLast: credentials that never expire give a
// session that never does (lifetime 0), past the login timeout too.
func TestSessionsWithoutExpiryLast(t *testing.T) {
	const loginTimeout = 200 * time.Millisecond
	s := startServer(t, Config{Authenticate: tenantAuthenticator, LoginTimeout: loginTimeout}, nil)
	c := dialRaw(t, s)
	start := time.Now()
	saslHandshake(c, 1, "PLAIN")
	if resp := saslAuthenticate(c, "\x00alice\x00secret"); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 0 {
		t.Fatalf("authenticate: %+v", resp)
	}
	for time.Since(start) < 2*loginTimeout {
		c.roundTrip(apiVersionsRequest(3))
	}
}

// TestReauthenticationRacesNothing: re-authenticating while the session
// timer fires is safe (run with -race).
func TestReauthenticationRacesNothing(t *testing.T) {
	s := startServer(t, Config{Authenticate: expiringAuthenticator(20 * time.Millisecond)}, nil)
	var wg sync.WaitGroup
	for range 4 {
		c := dialRaw(t, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Not the rawClient helpers: they fail the test, which only
			// the test's goroutine may do. A closed connection (the
			// session expired first) ends the loop, as it should.
			for range 20 {
				for _, req := range []kmsg.Request{handshakeV1(), authenticateV1("\x00alice\x00pw")} {
					c.corr++
					if _, err := c.conn.Write(c.fmt.AppendRequest(nil, req, c.corr)); err != nil {
						return
					}
					if _, err := c.readFrame(); err != nil {
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

func handshakeV1() *kmsg.SASLHandshakeRequest {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(1)
	req.Mechanism = "PLAIN"
	return req
}

func authenticateV1(token string) *kmsg.SASLAuthenticateRequest {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(1)
	req.SASLAuthBytes = []byte(token)
	return req
}

// rawToken is a PLAIN token as the v0 flow sends it: a bare frame.
func rawToken(token string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(token))), token...)
}
