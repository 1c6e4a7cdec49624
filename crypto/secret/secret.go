// Package secret holds the small pieces every part of queen that handles a
// secret (JWT secret, raft and link tokens, API keys, the encryption key)
// needs: comparisons whose timing reveals neither the content nor the length
// of the secret, and masking for boot log lines.
//
// It owns no secret and keeps none: it never reads the environment, never
// logs, and never stores what it is given beyond a Matcher's digest.
package secret

import (
	"crypto/sha256"
	"crypto/subtle"
)

// Equal reports whether a and b are equal and both non-empty, in time that
// does not depend on where they differ or on whether their lengths differ:
// both sides are hashed with SHA-256 and the digests compared with
// subtle.ConstantTimeCompare. An empty side never matches, so an unset
// configured token can never be satisfied by an empty credential.
//
// Hashing still takes time proportional to the inputs' lengths; where the
// configured secret is fixed, NewMatcher hashes it once and removes even that.
func Equal(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	da, db := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(da[:], db[:]) == 1
}

// EqualBytes is Equal for byte slices.
func EqualBytes(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	da, db := sha256.Sum256(a), sha256.Sum256(b)
	return subtle.ConstantTimeCompare(da[:], db[:]) == 1
}

// Matcher checks presented credentials against configured secrets, keeping
// only their SHA-256 digests. The zero Matcher, and one made from empty
// secrets, matches nothing. A Matcher is safe for concurrent use.
type Matcher struct {
	digests [][sha256.Size]byte
	set     bool
}

// NewMatcher returns a Matcher for secret and, while one is being rotated
// out or in, the others also accepted. Empty secrets are ignored.
func NewMatcher(secret string, also ...string) Matcher {
	var m Matcher
	for _, s := range append([]string{secret}, also...) {
		if s != "" {
			m.digests = append(m.digests, sha256.Sum256([]byte(s)))
			m.set = true
		}
	}
	return m
}

// Set reports whether the Matcher was made from a non-empty secret.
func (m Matcher) Set() bool { return m.set }

// Match reports whether presented equals one of the secrets, as Equal
// does; every digest is compared, so the time taken does not say which.
func (m Matcher) Match(presented string) bool {
	if !m.set || presented == "" {
		return false
	}
	d := sha256.Sum256([]byte(presented))
	ok := 0
	for _, want := range m.digests {
		ok |= subtle.ConstantTimeCompare(d[:], want[:])
	}
	return ok == 1
}

// String keeps the digest out of logs.
func (m Matcher) String() string {
	if !m.set {
		return "secret.Matcher(<unset>)"
	}
	return "secret.Matcher(set)"
}

// GoString keeps the digest out of %#v.
func (m Matcher) GoString() string { return m.String() }

// Unset is what Mask shows for an empty secret, as in the spec's boot line
// `encryption_key=<unset>`.
const Unset = "<unset>"

// Set is what Mask shows for any other secret.
const Set = "<set>"

// Mask renders a secret for a boot log line: Unset or Set, nothing more.
// Neither its first characters nor its length are shown: both narrow a
// guess (a short token becomes worth brute-forcing), and logs are kept and
// shipped to more places than the secret should be.
func Mask(s string) string {
	if s == "" {
		return Unset
	}
	return Set
}
