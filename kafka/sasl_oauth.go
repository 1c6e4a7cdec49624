package kafka

import (
	"bytes"
	"context"
	"errors"

	"github.com/queen-mq/queen/crypto/authn"
)

// authenticateBearer checks an OAUTHBEARER initial response (RFC 7628
// §3.1, as Kafka's KIP-255 clients send it): a GS2 header, then
// 0x01-separated key=value pairs of which auth carries "Bearer <token>",
// ended by two 0x01. The token goes to the configured authenticator.
func (c *Conn) authenticateBearer(ctx context.Context, msg []byte) error {
	token, authzid, err := parseBearer(msg)
	if err != nil {
		return err
	}
	principal, err := c.srv.cfg.Bearer(ctx, token)
	if err != nil {
		c.refused(MechanismOAuthBearer, authzid, err)
		return errors.New("invalid token")
	}
	if authzid != "" && principal.User != "" && authzid != principal.User {
		c.refused(MechanismOAuthBearer, authzid, errors.New("the authorization id is not the token's subject"))
		return errors.New("the authorization id must be empty or the token's subject")
	}
	return c.login(MechanismOAuthBearer, principal, saslAuthenticated)
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
