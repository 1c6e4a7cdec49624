package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate (key 36), v0-1, registered only when SASL is on. It
// carries the mechanism's messages after a v1 SaslHandshake, on a new
// connection or to re-authenticate an authenticated one (KIP-368): one
// for PLAIN and OAUTHBEARER, two for SCRAM (client-first, then
// client-final). Wrong credentials answer SASL_AUTHENTICATION_FAILED and
// close the connection. The session
// lasts as long as the credentials: v1 answers the time they have left as
// session_lifetime_ms (0: no expiry), and a connection that has not
// authenticated again by then is closed — v0 clients too, which are not
// told.
func handleSaslAuthenticate(ctx context.Context, c *Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)

	if c.saslStage() != saslExpectAuthenticate {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate must follow a v1 SaslHandshake, once"
		resp.ErrorMessage = &msg
		return resp, ErrCloseAfterResponse
	}
	out, err := c.authenticateStep(ctx, req.SASLAuthBytes)
	resp.SASLAuthBytes = out
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed: " + err.Error()
		resp.ErrorMessage = &msg
		return resp, ErrCloseAfterResponse
	}
	resp.SessionLifetimeMillis = c.sessionLifetime()
	return resp, nil
}

// authenticateStep takes one SaslAuthenticate message of the mechanism the
// handshake chose and returns the server's answer; the connection is
// logged in once the mechanism's last message checks out.
func (c *Conn) authenticateStep(ctx context.Context, msg []byte) ([]byte, error) {
	c.mu.Lock()
	mechanism := c.mechanism
	c.mu.Unlock()
	switch mechanism {
	case MechanismPlain:
		return nil, c.authenticatePlain(ctx, msg, saslAuthenticated)
	case MechanismOAuthBearer:
		return c.authenticateBearer(ctx, msg)
	case MechanismScramSHA256, MechanismScramSHA512:
		return c.stepScram(ctx, mechanism, msg)
	}
	return nil, errors.New("no SASL mechanism was chosen")
}
