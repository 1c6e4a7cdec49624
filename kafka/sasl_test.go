package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// tenantAuthenticator accepts alice/secret and says she is tenant-a.
func tenantAuthenticator(_ context.Context, user, password string) (Principal, error) {
	if user == "alice" && password == "secret" {
		return Principal{Identity: "tenant-a"}, nil
	}
	return Principal{}, errors.New("unknown user or wrong password")
}

// principalRecorder is a Metadata handler that reports this server as the
// only broker and records the caller's principal.
type principalRecorder struct {
	seen chan Principal
}

func (p *principalRecorder) handle(_ context.Context, c *Conn, kreq kmsg.Request) (kmsg.Response, error) {
	resp := kreq.ResponseKind().(*kmsg.MetadataResponse)
	host, port, _ := net.SplitHostPort(c.LocalAddr().String())
	portNum, _ := strconv.Atoi(port)
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: int32(portNum)}}
	resp.ControllerID = 0
	principal, ok := c.Principal()
	if !ok {
		principal.User = "<anonymous>"
	}
	select {
	case p.seen <- principal:
	default:
	}
	return resp, nil
}

func startSASLServer(t *testing.T) (*Server, *principalRecorder) {
	rec := &principalRecorder{seen: make(chan Principal, 16)}
	s := startServer(t, Config{Authenticate: tenantAuthenticator}, func(s *Server) {
		must(t, s.RegisterHandler(3, rec.handle))
	})
	return s, rec
}

func newKgoClient(t *testing.T, s *Server, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(s.Addr().String()),
		kgo.RequestRetries(0),
		kgo.RetryTimeout(time.Second),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestSASLPlainWithKgo(t *testing.T) {
	s, rec := startSASLServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	good := newKgoClient(t, s, kgo.SASL(plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()))
	if _, err := good.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("right password: %v", err)
	}
	select {
	case p := <-rec.seen:
		if p.User != "alice" || p.Identity != "tenant-a" {
			t.Fatalf("principal %+v", p)
		}
	case <-ctx.Done():
		t.Fatal("the handler never ran")
	}

	bad := newKgoClient(t, s, kgo.SASL(plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()))
	_, err := bad.Request(ctx, kmsg.NewPtrMetadataRequest())
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: got %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if len(rec.seen) != 0 {
		t.Fatal("a request ran without authentication")
	}
}

// saslHandshake sends SaslHandshake at version with mechanism.
func saslHandshake(c *rawClient, version int16, mechanism string) *kmsg.SASLHandshakeResponse {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(version)
	req.Mechanism = mechanism
	return c.roundTrip(req).(*kmsg.SASLHandshakeResponse)
}

func saslAuthenticate(c *rawClient, token string) *kmsg.SASLAuthenticateResponse {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(1)
	req.SASLAuthBytes = []byte(token)
	return c.roundTrip(req).(*kmsg.SASLAuthenticateResponse)
}

func metadataV9() *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	return req
}

func TestSASLHandshakeV1Flow(t *testing.T) {
	s, rec := startSASLServer(t)

	c := dialRaw(t, s)
	c.roundTrip(apiVersionsRequest(3)) // allowed before authentication
	if resp := saslHandshake(c, 1, "PLAIN"); resp.ErrorCode != 0 || len(resp.SupportedMechanisms) != 1 {
		t.Fatalf("handshake: %+v", resp)
	}
	resp := saslAuthenticate(c, "\x00alice\x00secret")
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 0 {
		t.Fatalf("authenticate: %+v", resp)
	}
	c.roundTrip(metadataV9())
	if p := within(t, rec.seen); p.User != "alice" {
		t.Fatalf("principal %+v", p)
	}
	// A second v1 handshake on an authenticated connection starts a
	// re-authentication (KIP-368, TestReauthentication); a v0 one cannot,
	// and is refused.
	if resp := saslHandshake(c, 0, "PLAIN"); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("second handshake: error %d", resp.ErrorCode)
	}
	c.expectClosed()
}

func TestSASLWrongPasswordClosesAfterAnswer(t *testing.T) {
	s, _ := startSASLServer(t)
	for name, token := range map[string]string{
		"wrong password":   "\x00alice\x00nope",
		"authzid mismatch": "bob\x00alice\x00secret",
		"two fields":       "alice\x00secret",
		"empty password":   "\x00alice\x00",
	} {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, s)
			saslHandshake(c, 1, "PLAIN")
			resp := saslAuthenticate(c, token)
			if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil {
				t.Fatalf("got %+v", resp)
			}
			c.expectClosed()
		})
	}
}

func TestSASLHandshakeV0Flow(t *testing.T) {
	s, rec := startSASLServer(t)

	c := dialRaw(t, s)
	if resp := saslHandshake(c, 0, "PLAIN"); resp.ErrorCode != 0 {
		t.Fatalf("handshake: %+v", resp)
	}
	token := "\x00alice\x00secret"
	c.writeRaw(append(binary.BigEndian.AppendUint32(nil, uint32(len(token))), token...))
	frame, err := c.readFrame()
	if err != nil || len(frame) != 0 {
		t.Fatalf("raw token answer: %q %v", frame, err)
	}
	c.roundTrip(metadataV9())
	if p := within(t, rec.seen); p.User != "alice" || p.Identity != "tenant-a" {
		t.Fatalf("principal %+v", p)
	}

	bad := dialRaw(t, s)
	saslHandshake(bad, 0, "PLAIN")
	token = "\x00alice\x00nope"
	bad.writeRaw(append(binary.BigEndian.AppendUint32(nil, uint32(len(token))), token...))
	bad.expectClosed() // no answer, as in Kafka's v0 flow
}

func TestSASLGating(t *testing.T) {
	s, rec := startSASLServer(t)

	cases := map[string]func(c *rawClient){
		"metadata before authentication": func(c *rawClient) { c.send(metadataV9()) },
		"metadata after handshake only": func(c *rawClient) {
			saslHandshake(c, 1, "PLAIN")
			c.send(metadataV9())
		},
		"authenticate without handshake": func(c *rawClient) {
			if resp := saslAuthenticate(c, "\x00alice\x00secret"); resp.ErrorCode != kerr.IllegalSaslState.Code {
				t.Fatalf("error %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
			}
		},
		"unsupported mechanism": func(c *rawClient) {
			resp := saslHandshake(c, 1, "SCRAM-SHA-256")
			if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(resp.SupportedMechanisms) != 1 || resp.SupportedMechanisms[0] != "PLAIN" {
				t.Fatalf("got %+v", resp)
			}
		},
		"oversized frame before authentication": func(c *rawClient) {
			c.writeRaw(binary.BigEndian.AppendUint32(nil, 600<<10))
		},
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, s)
			run(c)
			c.expectClosed()
		})
	}
	if len(rec.seen) != 0 {
		t.Fatal("a gated request reached its handler")
	}
}

func TestSASLOffDoesNotServeSASLKeys(t *testing.T) {
	s := startServer(t, Config{}, nil)
	c := dialRaw(t, s)
	resp := c.roundTrip(apiVersionsRequest(3)).(*kmsg.ApiVersionsResponse)
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 17 || k.ApiKey == 36 {
			t.Fatalf("SASL key %d advertised with SASL off", k.ApiKey)
		}
	}
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(1)
	req.Mechanism = "PLAIN"
	c.send(req)
	c.expectClosed()
}
