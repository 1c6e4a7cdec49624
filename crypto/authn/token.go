package authn

import (
	"context"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"slices"

	"github.com/golang-jwt/jwt/v5"
)

// Verify checks a broker JWT and returns the caller it names. It refuses
// tokens that are malformed or over 16 KiB, use an algorithm that is not
// accepted (including "none"), have no matching key or a bad signature, have
// the wrong issuer or audience (when configured), or are expired, not yet
// valid, or issued in the future beyond ClockSkew. A token without "exp" is
// accepted. Errors wrap ErrUnauthenticated and a specific sentinel.
//
// A token naming a kid missing from the JWKS cache triggers a refresh (at most
// one every 5 s, shared by concurrent callers); Verify may then wait for it,
// up to JWT_JWKS_TIMEOUT_MS. VerifyContext bounds that wait with a context.
func (v *Verifier) Verify(token string) (Principal, error) {
	return v.VerifyContext(context.Background(), token)
}

// VerifyContext is Verify with a context that bounds any wait for a JWKS
// refresh.
func (v *Verifier) VerifyContext(ctx context.Context, token string) (Principal, error) {
	if !v.cfg.Enabled {
		return Principal{}, refuse(ErrDisabled, nil)
	}
	if token == "" {
		return Principal{}, refuse(ErrMalformed, errors.New("empty token"))
	}
	if len(token) > maxTokenLen {
		return Principal{}, refuse(ErrMalformed, fmt.Errorf("token longer than %d bytes", maxTokenLen))
	}
	claims := jwt.MapClaims{}
	tok, err := v.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		return v.keyFor(ctx, t)
	})
	if err != nil {
		return Principal{}, refuse(v.classify(tok, claims, err), err)
	}
	sub, _ := claims["sub"].(string)
	tenant, err := tenantOf(claims, v.cfg.TenantClaim)
	if err != nil {
		return Principal{}, refuse(ErrMalformed, err)
	}
	p := Principal{Subject: sub, Roles: v.rolesFrom(claims), Tenant: tenant}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		// The parser accepts the token while now < exp + leeway.
		p.Expires = exp.Time.Add(v.cfg.ClockSkew)
	}
	return p, nil
}

// tenantOf reads the tenant claim. Absent, the token is scoped to no
// tenant: that is the operator's credential. Present, it must name one: a
// number, an empty string or an object is refused, never read as absent,
// or an identity provider's numeric tenant ids would make every tenant's
// admin an operator.
func tenantOf(claims jwt.MapClaims, name string) (string, error) {
	raw, ok := claims[name]
	if !ok {
		return "", nil
	}
	tenant, ok := raw.(string)
	if !ok || tenant == "" {
		return "", fmt.Errorf("claim %q must be a non-empty string naming the tenant", name)
	}
	return tenant, nil
}

func refuse(kind, cause error) error {
	if cause == nil {
		return fmt.Errorf("%w: %w", ErrUnauthenticated, kind)
	}
	return fmt.Errorf("%w: %w: %w", ErrUnauthenticated, kind, cause)
}

// classify maps the jwt library's error to one of ours.
func (v *Verifier) classify(tok *jwt.Token, claims jwt.MapClaims, err error) error {
	switch {
	case errors.Is(err, ErrUnknownKey):
		return ErrUnknownKey
	case errors.Is(err, ErrAlgorithm):
		return ErrAlgorithm
	case errors.Is(err, jwt.ErrTokenMalformed):
		return ErrMalformed
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return ErrAlgorithm // alg missing or unknown to the library
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		// The library reports an algorithm outside WithValidMethods (such as
		// "none") as a signature error; say what it is.
		if tok != nil && tok.Method != nil && !slices.Contains(v.methods, tok.Method.Alg()) {
			return ErrAlgorithm
		}
		return ErrSignature
	case errors.Is(err, jwt.ErrTokenExpired):
		return ErrExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return ErrNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return ErrIssuer
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return ErrAudience
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		if _, ok := claims["iss"]; v.cfg.Issuer != "" && !ok {
			return ErrIssuer
		}
		if _, ok := claims["aud"]; v.cfg.Audience != "" && !ok {
			return ErrAudience
		}
	}
	return ErrClaims
}

// keyFor is the jwt.Keyfunc: the key that may verify t, given its algorithm
// (already checked against v.methods by the parser) and kid.
func (v *Verifier) keyFor(ctx context.Context, t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	fam := familyOf(alg)
	kid, _ := t.Header["kid"].(string)
	switch fam {
	case familyHMAC:
		if len(v.hmac) == 0 { // not reachable: HS* is only accepted with a secret
			return nil, fmt.Errorf("%w: %s without JWT_SECRET", ErrAlgorithm, alg)
		}
		return v.hmac, nil
	case familyRSA, familyEd:
		return v.publicKey(ctx, fam, alg, kid)
	}
	return nil, fmt.Errorf("%w: %s", ErrAlgorithm, alg)
}

func (v *Verifier) staticKey(fam family) any {
	if fam == familyRSA && v.static.rsa != nil {
		return v.static.rsa
	}
	if fam == familyEd && v.static.ed != nil {
		return v.static.ed
	}
	return nil
}

// publicKey finds the RSA or Ed25519 key for a token. With a JWKS: a kid is
// looked up (refreshing once, rate-limited, when unknown); a token without kid
// is tried against every JWKS key of its type. The JWT_PUBLIC_KEY key, when
// set, is the fallback.
func (v *Verifier) publicKey(ctx context.Context, fam family, alg, kid string) (any, error) {
	static := v.staticKey(fam)
	if v.jwks == nil {
		if static == nil {
			return nil, fmt.Errorf("%w: no %s key configured", ErrUnknownKey, alg)
		}
		return static, nil
	}
	if kid != "" {
		k, ok := v.jwks.lookup(kid)
		if !ok {
			v.refreshForUnknown(ctx, kid)
			k, ok = v.jwks.lookup(kid)
		}
		if ok {
			return k.verifies(fam, alg)
		}
		if static != nil {
			return static, nil
		}
		return nil, fmt.Errorf("%w: kid %q", ErrUnknownKey, kid)
	}
	set := v.candidates(fam, alg, static)
	if len(set.Keys) == 0 {
		v.refreshForUnknown(ctx, "")
		set = v.candidates(fam, alg, static)
	}
	if len(set.Keys) == 0 {
		return nil, fmt.Errorf("%w: no %s key in JWKS", ErrUnknownKey, alg)
	}
	return set, nil
}

func (v *Verifier) refreshForUnknown(ctx context.Context, kid string) {
	err := v.jwks.refresh(ctx, true)
	if err != nil && !errors.Is(err, errRateLimited) {
		v.log.Warn("jwt: JWKS refresh for unknown kid failed", "kid", kid, "err", err)
	}
}

func (v *Verifier) candidates(fam family, alg string, static any) jwt.VerificationKeySet {
	var set jwt.VerificationKeySet
	for _, k := range v.jwks.all() {
		if key, err := k.verifies(fam, alg); err == nil {
			set.Keys = append(set.Keys, key)
		}
	}
	if static != nil {
		set.Keys = append(set.Keys, static)
	}
	return set
}

// verifies returns k's key if it may verify a token of algorithm alg.
func (k jwk) verifies(fam family, alg string) (any, error) {
	if k.alg != "" && k.alg != alg {
		return nil, fmt.Errorf("%w: kid %q is for %s, token uses %s", ErrAlgorithm, k.kid, k.alg, alg)
	}
	switch key := k.key.(type) {
	case *rsa.PublicKey:
		if fam == familyRSA {
			return key, nil
		}
	case ed25519.PublicKey:
		if fam == familyEd {
			return key, nil
		}
	}
	return nil, fmt.Errorf("%w: kid %q holds a %T, token uses %s", ErrAlgorithm, k.kid, k.key, alg)
}

// rolesFrom collects the configured roles named by the role claims. Each
// claim may hold a string or an array of strings (the role claim is normally a
// string and the array claim an array; either form is accepted in both).
// Unknown names and non-string values are ignored.
func (v *Verifier) rolesFrom(claims jwt.MapClaims) RoleSet {
	var s RoleSet
	add := func(name string) {
		if r, ok := v.roles[name]; ok {
			s = s.With(r)
		}
	}
	for _, c := range []string{v.cfg.RolesClaim, v.cfg.RolesArrayClaim} {
		switch val := claims[c].(type) {
		case string:
			add(val)
		case []any:
			for _, e := range val {
				if name, ok := e.(string); ok {
					add(name)
				}
			}
		}
	}
	return s
}
