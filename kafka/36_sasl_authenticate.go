package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate (key 36), v0-1, registered only when SASL is on. It
// carries the PLAIN token after a v1 SaslHandshake, on a new connection or
// to re-authenticate an authenticated one (KIP-368). Wrong credentials
// answer SASL_AUTHENTICATION_FAILED and close the connection. The session
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
	if err := c.authenticatePlain(ctx, req.SASLAuthBytes, saslAuthenticated); err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed: " + err.Error()
		resp.ErrorMessage = &msg
		return resp, ErrCloseAfterResponse
	}
	resp.SessionLifetimeMillis = c.sessionLifetime()
	return resp, nil
}
