package kafka

import (
	"bytes"
	"context"
	"errors"

	"github.com/queen-mq/queen/crypto/authn"
)

// bearerRefused is the error challenge that answers a token refused (RFC
// 7628 §3.2.2, as Kafka sends it).
const bearerRefused = `{"status":"invalid_token"}`

// authenticateBearer checks an OAUTHBEARER initial response (RFC 7628
// §3.1, as Kafka's KIP-255 clients send it): a GS2 header, then
// 0x01-separated key=value pairs of which auth carries "Bearer <token>",
// ended by two 0x01. The token goes to the configured authenticator. A
// token it refuses is answered as Kafka does: an error challenge, which the
// client acknowledges with a single 0x01, and the exchange then fails with
// that error (clients report "invalid_token").
func (c *Conn) authenticateBearer(ctx context.Context, msg []byte) ([]byte, error) {
	c.mu.Lock()
	refused := c.bearerRefused
	c.bearerRefused = false
	c.mu.Unlock()
	if refused {
		return nil, errors.New(bearerRefused)
	}
	token, authzid, err := parseBearer(msg)
	if err != nil {
		return nil, err
	}
	principal, err := c.srv.cfg.Bearer(ctx, token)
	if err != nil {
		c.refused(MechanismOAuthBearer, authzid, err)
		c.mu.Lock()
		c.bearerRefused = true
		c.mu.Unlock()
		return []byte(bearerRefused), nil
	}
	if authzid != "" && principal.User != "" && authzid != principal.User {
		c.refused(MechanismOAuthBearer, authzid, errors.New("the authorization id is not the token's subject"))
		return nil, errors.New("the authorization id must be empty or the token's subject")
	}
	return nil, c.login(MechanismOAuthBearer, principal, saslAuthenticated)
}

// parseBearer returns the token and authorization id of an OAUTHBEARER
// initial response.
func parseBearer(msg []byte) (token, authzid string, err error) {
	bad := func(why string) (string, string, error) {
		return "", "", errors.New("invalid SASL/OAUTHBEARER message: " + why)
	}
	header, rest, ok := bytes.Cut(msg, []byte{1})
	if !ok || !bytes.HasSuffix(rest, []byte{1, 1}) {
		return bad("expected a GS2 header and 0x01-separated pairs ending in two 0x01")
	}
	authzid, after, err := cutGS2Header(string(header))
	if err != nil {
		return bad(err.Error())
	}
	if after != "" {
		return bad("malformed GS2 header")
	}
	for _, kv := range bytes.Split(rest[:len(rest)-2], []byte{1}) {
		key, value, ok := bytes.Cut(kv, []byte("="))
		if !ok {
			return bad("a pair without '='")
		}
		if string(key) != "auth" {
			continue // extensions (KIP-342) are accepted and ignored
		}
		// The value is an HTTP Authorization header's (RFC 7628 §3.1).
		tok, ok := authn.BearerToken(string(value))
		if !ok {
			return bad(`auth must be "Bearer <token>"`)
		}
		token = tok
	}
	if token == "" {
		return bad("no auth pair")
	}
	return token, authzid, nil
}
