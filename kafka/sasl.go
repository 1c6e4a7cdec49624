package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/queen-mq/queen/kafka/logbound"
)

// saslStage is where a connection is in the SASL exchange.
type saslStage int

const (
	saslExpectHandshake    saslStage = iota // nothing yet
	saslExpectRawToken                      // SaslHandshake v0 done: the next frame is a bare PLAIN token
	saslExpectAuthenticate                  // SaslHandshake v1 done: the next request is SaslAuthenticate
	saslAuthenticated                       // logged in with SaslAuthenticate: may authenticate again (KIP-368)
	saslAuthenticatedRaw                    // logged in with the v0 flow, which cannot authenticate again
)

// How much of a refused login's client-chosen text is logged.
const (
	maxLoggedName  = 64
	maxLoggedError = 256
)

// The SASL mechanisms queen offers, as SaslHandshake names them.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
)

// mechanisms lists the mechanisms c turns on, in the order offered.
func (c Config) mechanisms() []string {
	var out []string
	if c.Authenticate != nil {
		out = append(out, MechanismPlain)
	}
	if c.Scram != nil {
		out = append(out, MechanismScramSHA256, MechanismScramSHA512)
	}
	if c.Bearer != nil {
		out = append(out, MechanismOAuthBearer)
	}
	return out
}

// cutGS2Header splits off the GS2 header (RFC 5801 §4) SCRAM and
// OAUTHBEARER client messages start with: a channel binding flag, "n"
// (none) or "y" (the client could bind but thinks the server cannot; no
// binding is offered), then an optional "a=" authorization id, as sent,
// each followed by a comma. rest is what follows the header.
func cutGS2Header(msg string) (authzid, rest string, err error) {
	flag, after, ok := strings.Cut(msg, ",")
	if !ok || (flag != "n" && flag != "y") {
		return "", "", errors.New("channel binding is not supported")
	}
	authzid, rest, ok = strings.Cut(after, ",")
	if !ok || (authzid != "" && !strings.HasPrefix(authzid, "a=")) {
		return "", "", errors.New("malformed authorization id")
	}
	return strings.TrimPrefix(authzid, "a="), rest, nil
}

func (c *Conn) saslStage() saslStage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sasl
}

// authState is the connection's SASL state, and whether an authenticated
// session has expired (it is closed then, bar re-authentication).
func (c *Conn) authState(now time.Time) (stage saslStage, authenticated, expired bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sasl, c.authenticated, c.authenticated && !c.authBy.IsZero() && !now.Before(c.authBy)
}

// authenticatePlain checks a PLAIN token (RFC 4616: authzid NUL user NUL
// password) with the configured authenticator and, on success, logs the
// connection in (see login); after is the stage it reaches. The error text
// is meant for the client; the authenticator's own error is only logged.
func (c *Conn) authenticatePlain(ctx context.Context, token []byte, after saslStage) error {
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 {
		return fmt.Errorf("invalid SASL/PLAIN token: expected 3 NUL-separated fields, got %d", len(parts))
	}
	authzid, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" || password == "" {
		return errors.New("invalid SASL/PLAIN token: empty user name or password")
	}
	if authzid != "" && authzid != user {
		return errors.New("the authorization id must be empty or equal to the user name")
	}
	principal, err := c.srv.cfg.Authenticate(ctx, user, password)
	if err != nil {
		c.refused(MechanismPlain, user, err)
		return errors.New("invalid username or password")
	}
	if principal.User == "" {
		principal.User = user
	}
	return c.login(MechanismPlain, principal, after)
}

// refused logs a refused login. The user name is the client's choice, up
// to the pre-login frame cap, and refusals come as fast as it can
// reconnect: a bounded prefix is logged, at most one line a second.
func (c *Conn) refused(mechanism, user string, err error) {
	if ok, held := c.srv.refusals.Pass(time.Now()); ok {
		c.log.Info("kafka SASL authentication refused", "mechanism", mechanism, "user", logbound.Clip(user, maxLoggedName),
			"err", logbound.Clip(err.Error(), maxLoggedError), "refusals_not_logged", held)
	}
}

// login marks the connection authenticated as principal until its
// credentials expire, at stage after. On an authenticated connection it is
// a re-authentication (KIP-368), which must name the same user, as Kafka
// requires the same principal.
func (c *Conn) login(mechanism string, principal Principal, after saslStage) error {
	if !principal.Expires.IsZero() && !time.Now().Before(principal.Expires) {
		c.log.Info("kafka SASL authentication refused: the credentials expired", "mechanism", mechanism, "user", principal.User)
		return errors.New("the credentials expired")
	}
	c.mu.Lock()
	if c.authenticated && c.principal.User != principal.User {
		was := c.principal.User
		c.mu.Unlock()
		c.log.Info("kafka SASL re-authentication refused: another user", "mechanism", mechanism, "user", principal.User, "was", was)
		return errors.New("re-authentication must keep the user name")
	}
	reauth := c.authenticated
	c.sasl, c.authenticated, c.principal = after, true, principal
	c.authenticateByLocked(principal.Expires)
	c.mu.Unlock()
	c.srv.loggedIn(c)
	if !reauth && c.srv.cfg.ShareOf != nil {
		// A re-authentication keeps the user, so it keeps the share.
		c.srv.shares.drop(c.share.Swap(c.srv.shares.hold(c.srv.cfg.ShareOf(principal))))
	}
	c.log.Debug("kafka SASL authenticated", "mechanism", mechanism, "user", principal.User, "again", reauth, "expires", principal.Expires)
	return nil
}

// sessionLifetime is what SaslAuthenticate v1 tells the client: the time
// its credentials have left, 0 when they never expire.
func (c *Conn) sessionLifetime() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.principal.Expires.IsZero() {
		return 0
	}
	return max(1, time.Until(c.principal.Expires).Milliseconds())
}

// authenticateByLocked (c.mu held) sets when the connection must have
// logged in, or logged in again, by — zero for never — and arms the timer
// that closes it then. Closing on time, rather than on the next request
// as Kafka does, also ends sessions that only wait on long polls.
func (c *Conn) authenticateByLocked(t time.Time) {
	c.authBy = t
	switch {
	case t.IsZero():
		if c.authTimer != nil {
			c.authTimer.Stop()
		}
	case c.authTimer == nil:
		c.authTimer = time.AfterFunc(time.Until(t), c.authDeadlinePassed)
	default:
		c.authTimer.Reset(time.Until(t))
	}
}

// authDeadlinePassed closes the connection if its deadline to log in has
// passed; a deadline moved meanwhile re-arms the timer instead.
func (c *Conn) authDeadlinePassed() {
	c.mu.Lock()
	by, authenticated := c.authBy, c.authenticated
	if by.IsZero() {
		c.mu.Unlock()
		return
	}
	if left := time.Until(by); left > 0 {
		c.authTimer.Reset(left)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	if authenticated {
		c.log.Info("kafka closing connection: its SASL session expired without re-authentication")
	} else {
		c.log.Info("kafka closing connection: no SASL login within the login timeout", "login_timeout", c.srv.cfg.LoginTimeout)
	}
	c.shutdown()
}

// stopAuthTimer disarms the deadline once the connection is over.
func (c *Conn) stopAuthTimer() {
	c.mu.Lock()
	c.authenticateByLocked(time.Time{})
	c.mu.Unlock()
}

// rawSaslToken handles the frame after a v0 SaslHandshake: a bare PLAIN
// token, answered on success by a bare empty token (a zero size prefix). A
// refused token closes the connection without an answer, as Kafka does.
func (c *Conn) rawSaslToken(token []byte) (*pending, error) {
	if err := c.authenticatePlain(c.ctx, token, saslAuthenticatedRaw); err != nil {
		return nil, fmt.Errorf("kafka: SASL/PLAIN (v0 flow) refused: %w", err)
	}
	return c.enqueueReady(&pending{frame: []byte{0, 0, 0, 0}})
}
