package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate (key 36), v0-1, registered only when SASL is on. It
// carries the PLAIN token after a v1 SaslHandshake. Wrong credentials answer
// SASL_AUTHENTICATION_FAILED and close the connection. Sessions never
// expire (session_lifetime_ms 0), so there is no re-authentication.
func handleSaslAuthenticate(ctx context.Context, c *Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.SessionLifetimeMillis = 0

	if c.saslStage() != saslExpectAuthenticate {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate must follow a v1 SaslHandshake, once"
		resp.ErrorMessage = &msg
		return resp, ErrCloseAfterResponse
	}
	if err := c.authenticatePlain(ctx, req.SASLAuthBytes); err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed: " + err.Error()
		resp.ErrorMessage = &msg
		return resp, ErrCloseAfterResponse
	}
	return resp, nil
}
