package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka/logbound"
)

// SaslHandshake (key 17), v0-1, registered only when SASL is on. It picks
// the mechanism, among those configured, and the flow: after v0 the client
// sends its token as a bare size-prefixed frame (see rawSaslToken; PLAIN
// only, as the exchanges of the other mechanisms need SaslAuthenticate's
// framing of errors); after v1 it sends SaslAuthenticate. On a connection that logged in with SaslAuthenticate a
// v1 handshake starts a re-authentication (KIP-368). Any other handshake
// is ILLEGAL_SASL_STATE; either refusal closes the connection, as in Kafka.
func handleSaslHandshake(_ context.Context, c *Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = c.srv.cfg.mechanisms()

	c.mu.Lock()
	defer c.mu.Unlock()
	reauth := c.sasl == saslAuthenticated && req.Version >= 1
	if c.sasl != saslExpectHandshake && !reauth {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, ErrCloseAfterResponse
	}
	if !slices.Contains(resp.SupportedMechanisms, req.Mechanism) || (req.Version == 0 && req.Mechanism != MechanismPlain) {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.log.Info("kafka SASL mechanism refused", "mechanism", logbound.Clip(req.Mechanism, maxLoggedName), "handshake_version", req.Version)
		return resp, ErrCloseAfterResponse
	}
	c.mechanism, c.scram, c.bearerRefused = req.Mechanism, nil, false
	if req.Version == 0 {
		c.sasl = saslExpectRawToken
	} else {
		c.sasl = saslExpectAuthenticate
	}
	return resp, nil
}
