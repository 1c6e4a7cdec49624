package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"
)

// Defaults for the zero values of Config.
const (
	// DefaultMaxConnections is QUEEN_KAFKA_MAX_CONNECTIONS's default.
	DefaultMaxConnections = 4096
	// DefaultMaxConnectionsPerIP is QUEEN_KAFKA_MAX_CONNECTIONS_PER_IP's
	// default: a quarter of the node's connections for one address.
	DefaultMaxConnectionsPerIP = 1024
	// DefaultMaxUnauthenticatedConnections is
	// QUEEN_KAFKA_MAX_UNAUTHENTICATED_CONNECTIONS's default. A login takes
	// a few round trips, so even a reconnect storm has few connections in
	// it at once; together with maxUnauthenticatedRequestBytes it bounds
	// what strangers can hold to 16 MiB of the request budget.
	DefaultMaxUnauthenticatedConnections = 256
	// DefaultLoginTimeout is QUEEN_KAFKA_LOGIN_TIMEOUT_MS's default.
	DefaultLoginTimeout = 10 * time.Second
	// DefaultMaxRequestBytes is Kafka's socket.request.max.bytes.
	DefaultMaxRequestBytes = 100 << 20
	// DefaultMaxInFlightPerConnection bounds pipelining per connection;
	// clients pipeline at most 5 by default.
	DefaultMaxInFlightPerConnection = 16
	// DefaultMaxBufferedRequestBytes bounds the request bytes held by all
	// connections together (raised to MaxRequestBytes if that is larger).
	DefaultMaxBufferedRequestBytes = 256 << 20
	// DefaultIdleTimeout is Kafka's connections.max.idle.ms.
	DefaultIdleTimeout = 10 * time.Minute
	// maxUnauthenticatedRequestBytes caps frames before SASL completes,
	// as Kafka's sasl.server.max.receive.size does. Kafka's 512 KiB leaves
	// room for OAUTHBEARER tokens; a PLAIN token here carries at most a
	// 16 KiB broker JWT, and every byte allowed before a login is a byte a
	// stranger may hold.
	maxUnauthenticatedRequestBytes = 64 << 10
	// tlsHandshakeTimeout bounds a TLS handshake.
	tlsHandshakeTimeout = 10 * time.Second
)

// Principal is who a SASL-authenticated connection acts as.
type Principal struct {
	// User is the SASL user name (filled from the PLAIN token when the
	// authenticator leaves it empty).
	User string
	// Identity is whatever the authenticator returned to describe the
	// caller (token claims, tenant, access level); this package never
	// looks inside it.
	Identity any
	// Expires is when the credentials stop being valid (a token's expiry);
	// zero for never. The connection must authenticate again before then
	// (KIP-368) or it is closed.
	Expires time.Time
}

// PlainAuthenticator checks a SASL/PLAIN user name and password. An error
// means the credentials are refused; the client gets
// SASL_AUTHENTICATION_FAILED without the error's text, which is logged.
type PlainAuthenticator func(ctx context.Context, user, password string) (Principal, error)

// ScramCredentials looks up the SCRAM credential of a user for a
// mechanism, SCRAM-SHA-256 or SCRAM-SHA-512, and the principal its login
// acts as. An error refuses the login as wrong credentials would.
type ScramCredentials func(ctx context.Context, mechanism, user string) (ScramCredential, Principal, error)

// BearerAuthenticator checks an OAUTHBEARER token (RFC 7628). An error
// refuses the login; its text is logged, not sent.
type BearerAuthenticator func(ctx context.Context, token string) (Principal, error)

// Config configures a Server. The zero value of each field picks its default.
type Config struct {
	// Addr is the listen address, host:port (":9092"; "127.0.0.1:0" for a
	// free port).
	Addr string
	// MaxConnections bounds open connections; a connection accepted over
	// the limit is closed at once.
	MaxConnections int
	// MaxConnectionsPerIP bounds the open connections from one client
	// address; a connection over the limit is closed at once.
	MaxConnectionsPerIP int
	// MaxUnauthenticatedConnections bounds, with SASL on, the connections
	// that have not logged in yet, a quarter of them from one client
	// address; a connection over the per-address share is closed at once,
	// and one over the total too unless another address holds more places
	// than its own, whose oldest connection is then closed instead.
	MaxUnauthenticatedConnections int
	// LoginTimeout closes, with SASL on, a connection that has not logged
	// in this long after it was accepted (its TLS handshake included),
	// whatever it sends meanwhile.
	LoginTimeout time.Duration
	// MaxRequestBytes bounds one request frame; a larger frame closes the
	// connection without reading it.
	MaxRequestBytes int
	// MaxInFlightPerConnection bounds the requests of one connection that
	// are read but not yet answered; the connection is not read further
	// until one is answered.
	MaxInFlightPerConnection int
	// MaxBufferedRequestBytes bounds the request frames held in memory by
	// all connections; readers wait for room before reading a frame.
	MaxBufferedRequestBytes int
	// ShareOf names the share a logged-in principal's requests count
	// against ("" for none): the connections logged in with one share (a
	// tenant) hold at most MaxBufferedRequestBytesPerShare of request
	// frames together, so one share's producers cannot take the whole
	// MaxBufferedRequestBytes while raft commits. A connection over its
	// share is not read until the share has room, as Kafka mutes a
	// channel: its client waits, nothing is refused.
	ShareOf func(Principal) string
	// MaxBufferedRequestBytesPerShare is each share's bound (0: none). As
	// with the node-wide bound, one frame larger than it is admitted when
	// the share holds nothing.
	MaxBufferedRequestBytesPerShare int
	// IdleTimeout closes a connection that sends nothing while nothing of
	// it is in flight, and one whose responses make no progress.
	IdleTimeout time.Duration
	// TLS, when set, makes the listener speak TLS only.
	TLS *tls.Config
	// Authenticate, when set, offers SASL/PLAIN; Scram SCRAM-SHA-256 and
	// SCRAM-SHA-512; Bearer OAUTHBEARER. With any of them set SASL is on:
	// until a connection authenticates it may only send ApiVersions,
	// SaslHandshake and SaslAuthenticate.
	Authenticate PlainAuthenticator
	Scram        ScramCredentials
	Bearer       BearerAuthenticator
	// Logger receives connection-level events; nil discards them.
	Logger *slog.Logger
}

// withDefaults validates c and fills its zero values.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("kafka: Config.Addr is empty"))
	}
	for name, v := range map[string]int{
		"MaxConnections": c.MaxConnections, "MaxRequestBytes": c.MaxRequestBytes,
		"MaxConnectionsPerIP": c.MaxConnectionsPerIP, "MaxUnauthenticatedConnections": c.MaxUnauthenticatedConnections,
		"MaxInFlightPerConnection": c.MaxInFlightPerConnection, "MaxBufferedRequestBytes": c.MaxBufferedRequestBytes,
	} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("kafka: Config.%s is negative (%d)", name, v))
		}
	}
	if c.MaxRequestBytes > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("kafka: Config.MaxRequestBytes %d exceeds a frame's int32 size", c.MaxRequestBytes))
	}
	if c.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("kafka: Config.IdleTimeout is negative (%s)", c.IdleTimeout))
	}
	if c.LoginTimeout < 0 {
		errs = append(errs, fmt.Errorf("kafka: Config.LoginTimeout is negative (%s)", c.LoginTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxConnectionsPerIP == 0 {
		c.MaxConnectionsPerIP = DefaultMaxConnectionsPerIP
	}
	if c.MaxUnauthenticatedConnections == 0 {
		c.MaxUnauthenticatedConnections = DefaultMaxUnauthenticatedConnections
	}
	if c.LoginTimeout == 0 {
		c.LoginTimeout = DefaultLoginTimeout
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxInFlightPerConnection == 0 {
		c.MaxInFlightPerConnection = DefaultMaxInFlightPerConnection
	}
	if c.MaxBufferedRequestBytes == 0 {
		c.MaxBufferedRequestBytes = DefaultMaxBufferedRequestBytes
	}
	c.MaxBufferedRequestBytes = max(c.MaxBufferedRequestBytes, c.MaxRequestBytes)
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c, nil
}
