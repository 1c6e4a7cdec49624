package authn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queen-mq/queen/crypto/secret"
)

// Verification errors. Every error Verify returns wraps ErrUnauthenticated
// (answer 401) and one of the more specific sentinels below.
var (
	ErrUnauthenticated = errors.New("authn: authentication required")
	ErrDisabled        = errors.New("JWT authentication is disabled")
	ErrMalformed       = errors.New("malformed token")
	ErrAlgorithm       = errors.New("token algorithm not accepted")
	ErrUnknownKey      = errors.New("no key for token")
	ErrSignature       = errors.New("bad token signature")
	ErrExpired         = errors.New("token expired")
	ErrNotYetValid     = errors.New("token not valid yet")
	ErrIssuer          = errors.New("wrong token issuer")
	ErrAudience        = errors.New("wrong token audience")
	ErrClaims          = errors.New("invalid token claims")
)

// maxTokenLen bounds the token accepted, well above any real broker token.
const maxTokenLen = 16 << 10

// minHMACSecret is the secret length below which New warns (RFC 7518 §3.2
// asks for a key at least as long as the hash output).
const minHMACSecret = 32

// Verifier verifies broker JWTs. It is safe for concurrent use. With a JWKS
// URL it owns a refresh goroutine; call Close when done.
type Verifier struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	parser  *jwt.Parser
	methods []string // algorithms accepted, given the mode and the key material
	hmac    []byte
	static  staticKeys
	jwks    *jwksCache
	roles   map[string]Role
	skip    map[string]struct{}

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// New checks cfg and prepares a Verifier. When cfg.Enabled is false it returns
// a Verifier whose Verify fails with ErrDisabled and whose Describe says so.
// When enabled, a configuration that cannot verify any token (no key material
// at all, or none usable by the configured algorithm) is an error wrapping
// ErrConfig that names the variables to set: the boot should stop.
//
// With a JWKS URL, New fetches the keys before returning, waiting at most
// cfg.JWKSTimeout or until ctx ends. A failed first fetch is logged, not
// fatal: the keys are fetched again when a token arrives (at most every 5 s)
// and at every refresh interval. ctx bounds only that first wait; the refresh
// goroutine runs until Close. logger and client may be nil (discard logs;
// a default client whose time limit is cfg.JWKSTimeout).
func New(ctx context.Context, cfg Config, logger *slog.Logger, client *http.Client) (*Verifier, error) {
	return newVerifier(ctx, cfg, logger, client, time.Now)
}

func newVerifier(ctx context.Context, cfg Config, logger *slog.Logger, client *http.Client, now func() time.Time) (*Verifier, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	v := &Verifier{cfg: cfg, log: logger, now: now, cancel: func() {}}
	v.roles = map[string]Role{
		cfg.RoleAdmin: RoleAdmin, cfg.RoleReadWrite: RoleReadWrite,
		cfg.RoleReadOnly: RoleReadOnly, cfg.RoleWriteOnly: RoleWriteOnly,
	}
	v.skip = make(map[string]struct{}, len(cfg.SkipPaths))
	for _, p := range cfg.SkipPaths {
		if p = strings.TrimSpace(p); p != "" {
			v.skip[p] = struct{}{}
		}
	}
	if !cfg.Enabled {
		return v, nil
	}
	if cfg.Secret == "" && cfg.PublicKeyPEM == "" && cfg.JWKSURL == "" {
		return nil, fmt.Errorf("%w: JWT_ENABLED=true but no key material: set JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL", ErrConfig)
	}
	if cfg.PublicKeyPEM != "" {
		if v.static, err = parsePublicKeyPEM(cfg.PublicKeyPEM); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if err := v.chooseMethods(); err != nil {
		return nil, err
	}
	if v.accepts(familyHMAC) {
		v.hmac = []byte(cfg.Secret)
		if len(cfg.Secret) < minHMACSecret {
			logger.Warn("jwt: JWT_SECRET is shorter than 32 bytes; HMAC tokens are easier to forge", "length", len(cfg.Secret))
		}
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(v.methods),
		jwt.WithLeeway(cfg.ClockSkew),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(now),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	v.parser = jwt.NewParser(opts...)

	if cfg.JWKSURL != "" && (v.accepts(familyRSA) || v.accepts(familyEd)) {
		if !strings.HasPrefix(strings.ToLower(cfg.JWKSURL), "https://") {
			logger.Warn("jwt: JWT_JWKS_URL is not https; keys can be replaced in transit", "url", RedactURL(cfg.JWKSURL))
		}
		if client == nil {
			client = &http.Client{Timeout: cfg.JWKSTimeout}
		}
		base, cancel := context.WithCancel(context.WithoutCancel(ctx))
		v.cancel = cancel
		v.jwks = &jwksCache{
			url: cfg.JWKSURL, client: client, timeout: cfg.JWKSTimeout,
			log: logger, now: now, base: base, wg: &v.wg,
		}
		if err := v.jwks.refresh(ctx, false); err != nil {
			logger.Warn("jwt: initial JWKS fetch failed; tokens are refused until keys arrive",
				"url", RedactURL(cfg.JWKSURL), "err", err)
		}
		v.wg.Add(1)
		go v.jwks.loop(cfg.JWKSRefreshInterval)
	}
	return v, nil
}

type family int

const (
	familyNone family = iota
	familyHMAC
	familyRSA
	familyEd
)

func familyOf(alg string) family {
	switch alg {
	case AlgHS256, AlgHS384, AlgHS512:
		return familyHMAC
	case AlgRS256, AlgRS384, AlgRS512:
		return familyRSA
	case AlgEdDSA:
		return familyEd
	}
	return familyNone
}

// chooseMethods decides which token algorithms are accepted: the configured
// one, or in auto mode every algorithm some configured key can verify.
// Material that the configured algorithm cannot use is ignored with a warning;
// an algorithm left without any usable material is a configuration error.
func (v *Verifier) chooseMethods() error {
	cfg := v.cfg
	have := map[family]bool{
		familyHMAC: cfg.Secret != "",
		familyRSA:  v.static.rsa != nil || cfg.JWKSURL != "",
		familyEd:   v.static.ed != nil || cfg.JWKSURL != "",
	}
	if cfg.Algorithm == AlgAuto {
		for _, a := range []string{AlgHS256, AlgHS384, AlgHS512, AlgRS256, AlgRS384, AlgRS512, AlgEdDSA} {
			if have[familyOf(a)] {
				v.methods = append(v.methods, a)
			}
		}
		return nil
	}
	fam := familyOf(cfg.Algorithm)
	if !have[fam] {
		need := map[family]string{
			familyHMAC: "JWT_SECRET",
			familyRSA:  "an RSA JWT_PUBLIC_KEY or JWT_JWKS_URL",
			familyEd:   "an Ed25519 JWT_PUBLIC_KEY or JWT_JWKS_URL",
		}[fam]
		return fmt.Errorf("%w: JWT_ALGORITHM=%s needs %s (or set JWT_ALGORITHM=auto)", ErrConfig, cfg.Algorithm, need)
	}
	if fam != familyHMAC && cfg.Secret != "" {
		v.log.Warn("jwt: JWT_SECRET is ignored with JWT_ALGORITHM=" + cfg.Algorithm)
	}
	if fam == familyHMAC && (cfg.PublicKeyPEM != "" || cfg.JWKSURL != "") {
		v.log.Warn("jwt: JWT_PUBLIC_KEY and JWT_JWKS_URL are ignored with JWT_ALGORITHM=" + cfg.Algorithm)
	}
	v.methods = []string{cfg.Algorithm}
	return nil
}

func (v *Verifier) accepts(f family) bool {
	return slices.ContainsFunc(v.methods, func(a string) bool { return familyOf(a) == f })
}

// Enabled reports whether JWT authentication is on.
func (v *Verifier) Enabled() bool { return v.cfg.Enabled }

// SkipPath reports whether path is one of the configured JWT_SKIP_PATHS
// (exact match), which need no token.
func (v *Verifier) SkipPath(path string) bool {
	_, ok := v.skip[path]
	return ok
}

// Close stops the JWKS refresh goroutine and waits for it. It is safe to call
// more than once; Verify keeps working with the keys already fetched.
func (v *Verifier) Close() error {
	v.closeOnce.Do(func() {
		if v.jwks != nil {
			v.jwks.close(v.cancel)
		} else {
			v.cancel()
		}
		v.wg.Wait()
	})
	return nil
}

// Describe is the one-line mode description for the `config: auth` boot line,
// with the secret masked and URLs stripped of credentials.
func (v *Verifier) Describe() string {
	c := v.cfg
	if !c.Enabled {
		return "jwt=disabled"
	}
	jwks := secret.Unset
	if c.JWKSURL != "" {
		jwks = RedactURL(c.JWKSURL)
	}
	opt := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	return fmt.Sprintf("jwt=enabled algorithm=%s accepts=%s secret=%s public_key=%s jwks_url=%s"+
		" jwks_refresh=%s jwks_timeout=%s issuer=%s audience=%s clock_skew=%s"+
		" roles_claim=%s roles_array_claim=%s tenant_claim=%s roles=%s/%s/%s/%s skip_paths=%s",
		c.Algorithm, strings.Join(v.methods, ","), secret.Mask(c.Secret), v.static.describe(), jwks,
		c.JWKSRefreshInterval, c.JWKSTimeout, opt(c.Issuer), opt(c.Audience), c.ClockSkew,
		c.RolesClaim, c.RolesArrayClaim, c.TenantClaim, c.RoleAdmin, c.RoleReadWrite, c.RoleReadOnly, c.RoleWriteOnly,
		strings.Join(c.SkipPaths, ","))
}

// BearerToken extracts the token from an Authorization header value
// ("Bearer <token>", scheme case-insensitive). ok is false when the header is
// absent or another scheme.
func BearerToken(authorization string) (token string, ok bool) {
	const scheme = "bearer "
	if len(authorization) <= len(scheme) || !strings.EqualFold(authorization[:len(scheme)], scheme) {
		return "", false
	}
	token = strings.TrimSpace(authorization[len(scheme):])
	return token, token != ""
}
