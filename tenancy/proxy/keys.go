package proxy

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// KeyPrefix starts every API key; it is how the proxy tells a key from a
// session token.
const KeyPrefix = "qk_"

// keyPattern is qk_<env>_ and 43 base64url characters (32 random bytes).
var keyPattern = regexp.MustCompile(`^qk_[a-z0-9]{1,16}_[A-Za-z0-9_-]{43}$`)

// ValidKey reports whether s has the API key format.
func ValidKey(s string) bool { return keyPattern.MatchString(s) }

// HashKey is the only form of a key the proxy stores: its sha256, hex.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// validHash reports whether s is a sha256 in lowercase hex.
func validHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// NewKey mints a key for env ("live", "test").
func NewKey(env string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("proxy: mint key: %w", err)
	}
	return KeyPrefix + env + "_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Key scopes.
const (
	ScopeProduce = "produce"
	ScopeConsume = "consume"
	ScopeAdmin   = "admin"
	ScopeRead    = "read"
)

// AllScopes is every scope, in the order the proxy lists them.
var AllScopes = []string{ScopeProduce, ScopeConsume, ScopeAdmin, ScopeRead}

// normalizeScopes checks a key's scopes: a non-empty set of known scopes,
// returned sorted without repeats.
func normalizeScopes(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("scopes must hold at least one of %s", strings.Join(AllScopes, ", "))
	}
	var out []string
	for _, s := range in {
		if !slices.Contains(AllScopes, s) {
			return nil, fmt.Errorf("unknown scope %q (one of %s)", s, strings.Join(AllScopes, ", "))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Human roles per cluster.
const (
	RoleAdmin    = "admin"
	RoleProducer = "producer"
	RoleConsumer = "consumer"
	RoleViewer   = "viewer"
)

var allRoles = []string{RoleAdmin, RoleProducer, RoleConsumer, RoleViewer}

// roleScopes is what a person's role lets them do, in key scopes.
var roleScopes = map[string][]string{
	RoleAdmin:    {ScopeAdmin, ScopeProduce, ScopeConsume, ScopeRead},
	RoleProducer: {ScopeProduce, ScopeRead},
	RoleConsumer: {ScopeConsume, ScopeRead},
	RoleViewer:   {ScopeRead},
}

// ValidRole reports whether r is a human role.
func ValidRole(r string) bool { return slices.Contains(allRoles, r) }
