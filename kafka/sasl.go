package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
)

// saslStage is where a connection is in the SASL exchange.
type saslStage int

const (
	saslExpectHandshake    saslStage = iota // nothing yet
	saslExpectRawToken                      // SaslHandshake v0 done: the next frame is a bare PLAIN token
	saslExpectAuthenticate                  // SaslHandshake v1 done: the next request is SaslAuthenticate
	saslAuthenticated
)

// How much of a refused login's client-chosen text is logged.
const (
	maxLoggedName  = 64
	maxLoggedError = 256
)

// mechanismPlain is the only mechanism queen offers.
const mechanismPlain = "PLAIN"

func (c *Conn) saslStage() saslStage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sasl
}

// authenticatePlain checks a PLAIN token (RFC 4616: authzid NUL user NUL
// password) with the configured authenticator and, on success, marks the
// connection authenticated. The error text is meant for the client; the
// authenticator's own error is only logged.
func (c *Conn) authenticatePlain(ctx context.Context, token []byte) error {
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
		// The user name is the client's choice, up to the pre-login frame
		// cap, and refusals come as fast as it can reconnect: log a bounded
		// prefix, at most one line a second.
		if ok, held := c.srv.refusals.pass(time.Now()); ok {
			c.log.Info("kafka SASL/PLAIN authentication refused", "user", clip(user, maxLoggedName),
				"err", clip(err.Error(), maxLoggedError), "refusals_not_logged", held)
		}
		return errors.New("invalid username or password")
	}
	if principal.User == "" {
		principal.User = user
	}
	c.mu.Lock()
	c.sasl, c.authenticated, c.principal = saslAuthenticated, true, principal
	c.mu.Unlock()
	c.log.Debug("kafka SASL/PLAIN authenticated", "user", principal.User)
	return nil
}

// rawSaslToken handles the frame after a v0 SaslHandshake: a bare PLAIN
// token, answered on success by a bare empty token (a zero size prefix). A
// refused token closes the connection without an answer, as Kafka does.
func (c *Conn) rawSaslToken(token []byte) (*pending, error) {
	if err := c.authenticatePlain(c.ctx, token); err != nil {
		return nil, fmt.Errorf("kafka: SASL/PLAIN (v0 flow) refused: %w", err)
	}
	return c.enqueueReady(&pending{frame: []byte{0, 0, 0, 0}})
}
