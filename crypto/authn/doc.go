// Package authn verifies queen's broker JWTs (spec §5.2) and decides what a
// verified caller may do (the access levels of §2.2).
//
// It owns: the JWT_* configuration once parsed (Config), key material (HMAC
// secret, RSA or Ed25519 public keys from PEM, keys fetched from a JWKS URL and
// the goroutine that refreshes them), token verification (Verifier.Verify),
// the mapping of role claims to the four roles, and the level check
// (Principal.Allows).
//
// It never touches: the environment (the binary reads JWT_* once at boot and
// fills a Config), HTTP routing or responses (the HTTP layer picks the Level
// for a route, extracts the bearer token, calls Verify and writes the 401/403
// bodies), the Kafka listener (SASL/PLAIN passes the password to Verify), or
// anything stored by the broker.
//
// Access levels are a set, not a ladder: write-only is not "below" read-only,
// and a read-only role does not pass a write-only route. See Level.
package authn
