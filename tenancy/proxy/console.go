package proxy

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"
	"golang.org/x/crypto/bcrypt"
)

// The console's JSON API and sign-in, for people (spec §6.10). Sessions
// are HS256 tokens signed with QUEEN_PROXY_JWT_SECRET whose subject is
// the user id; API keys are refused here. Without a secret there are no
// sessions and these routes answer 404.

// sessionTTL is how long a console session lasts.
const sessionTTL = 12 * time.Hour

// sessionCookie carries the session for browsers; API clients send it as
// a bearer token.
const sessionCookie = "queen_session"

// sessionInfo is a verified session.
type sessionInfo struct {
	user     *User
	operator bool
}

var errBadSession = newError(http.StatusUnauthorized, "unauthorized", "invalid or expired session")

// issueSession signs a session for u. Its id (jti) makes every session a
// token of its own, so signing one out (revokeSession) leaves the user's
// others, even two signed in the same second.
func (p *Proxy) issueSession(u *User, now time.Time) (string, error) {
	claims := jwt.RegisteredClaims{ID: newID(), Subject: u.ID, IssuedAt: jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(sessionTTL)), Issuer: "queen-proxy"}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(p.cfg.JWTSecret))
}

// sessionClaims verifies a session token's signature, issuer and expiry.
func (p *Proxy) sessionClaims(token string) (*jwt.RegisteredClaims, error) {
	if p.cfg.JWTSecret == "" || token == "" {
		return nil, errBadSession
	}
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return []byte(p.cfg.JWTSecret), nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer("queen-proxy"), jwt.WithExpirationRequired())
	if err != nil {
		return nil, errBadSession
	}
	return &claims, nil
}

// Sessions are stateless tokens that every node accepts, so a sign-out
// revokes its token with a row in the proxy's replicated state (the KV
// of the system tenant, as keys and users are): revokedSessionKey, written
// with the invalidation feed's bump and a KV TTL until the token expires,
// so the rows are bounded by the sessions signed out in the last
// sessionTTL and go away by themselves. The node that signs out drops its
// cache at once, the others at their next poll of the feed.

// revokedSession is the row of a signed-out session token.
type revokedSession struct {
	Expires int64 `json:"expires"` // the token's exp, Unix seconds
}

// revokedSessionKey is the row revoking token: its sha256, never the
// token.
func revokedSessionKey(token string) string { return "session-revoked/" + HashKey(token) }

// revokeSession revokes a session token until it expires. A token that
// does not verify (expired, malformed, an API key) is no session: nothing
// to revoke.
func (p *Proxy) revokeSession(ctx context.Context, token string, now time.Time) error {
	claims, err := p.sessionClaims(token)
	if err != nil {
		return nil
	}
	exp := claims.ExpiresAt.Time
	op := putOp(revokedSessionKey(token), revokedSession{Expires: exp.Unix()}, false)
	// Until the token expires, and a second more: TTLs are whole seconds.
	op.TTLSec = uint32(min(max(exp.Sub(now), 0), sessionTTL)/time.Second) + 1
	_, err = p.store.apply(ctx, op)
	return err
}

// session verifies a session token, not signed out, and loads its user.
func (p *Proxy) session(ctx context.Context, token string) (*sessionInfo, error) {
	claims, err := p.sessionClaims(token)
	if err != nil {
		return nil, err
	}
	if _, revoked, err := load[revokedSession](ctx, p.cache, revokedSessionKey(token)); err != nil {
		return nil, err
	} else if revoked {
		return nil, errBadSession
	}
	u, found, err := load[User](ctx, p.cache, userKey(claims.Subject))
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errBadSession
	}
	return &sessionInfo{user: u, operator: u.Operator && p.cfg.OperatorEnabled}, nil
}

// console serves /auth/* and /api/console/*.
func (p *Proxy) console(ctx *fasthttp.RequestCtx, path string) {
	if p.cfg.JWTSecret == "" {
		refuse(ctx, errNotFound)
		return
	}
	method := string(ctx.Method())
	if p.oauthRoute(ctx, path) {
		return
	}
	switch {
	case method == "POST" && path == "/auth/login":
		p.login(ctx)
	case method == "POST" && path == "/auth/logout":
		// Only the pages' own scripts sign out (webHeader): a form on
		// another site posting here would otherwise end the session.
		if len(ctx.Request.Header.Peek(webHeader)) == 0 {
			refuse(ctx, errSignOutHeader)
			return
		}
		p.logout(ctx)
	case method == "GET" && path == "/auth/providers":
		p.providers(ctx)
	case method == "GET" && path == "/api/console/me":
		p.consoleMe(ctx)
	case method == "GET" && path == "/api/console/operator/clusters":
		p.operatorClusters(ctx)
	case strings.HasPrefix(path, "/api/console/clusters/"):
		p.consoleCluster(ctx, method, strings.Split(strings.TrimPrefix(path, "/api/console/clusters/"), "/"))
	default:
		refuse(ctx, errNotFound)
	}
}

// logout signs out: it revokes the request's session tokens (bearer and
// cookie) on every node and clears the cookie. When the revocation cannot
// be written (the KV has no majority) it answers that error and keeps the
// cookie, so the client knows the session still works.
func (p *Proxy) logout(ctx *fasthttp.RequestCtx) {
	cookie, err := sessionCookieFor(ctx)
	if err != nil {
		refuse(ctx, err)
		return
	}
	for _, token := range []string{bearer(ctx), cookie} {
		if err := p.revokeSession(ctx, token, time.Now()); err != nil {
			writeError(ctx, err)
			return
		}
	}
	ctx.Response.Header.Set("Set-Cookie", sessionCookie+"=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax")
	writeJSON(ctx, http.StatusOK, map[string]bool{"ok": true})
}

// login is the local password sign-in.
func (p *Proxy) login(ctx *fasthttp.RequestCtx) {
	body, err := readBody(ctx, 64<<10)
	if err != nil {
		refuse(ctx, err)
		return
	}
	var q struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	r := cpRequest{body: body}
	if err := r.decode(&q); err != nil {
		writeError(ctx, err)
		return
	}
	bad := newError(http.StatusUnauthorized, "unauthorized", "wrong email or password")
	var ref ref
	found, err := p.store.get(ctx, userEmailKey(q.Email), &ref)
	if err != nil {
		writeError(ctx, err)
		return
	}
	var u User
	if found {
		if found, err = p.store.get(ctx, userKey(ref.ID), &u); err != nil {
			writeError(ctx, err)
			return
		}
	}
	if !found || u.PasswordHash == "" || bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(q.Password)) != nil {
		writeError(ctx, bad)
		return
	}
	token, err := p.issueSession(&u, time.Now())
	if err != nil {
		writeError(ctx, err)
		return
	}
	secure := ""
	if p.TLS() {
		secure = "; Secure"
	}
	ctx.Response.Header.Set("Set-Cookie", sessionCookie+"="+token+"; Path=/; HttpOnly; SameSite=Lax"+secure)
	writeJSON(ctx, http.StatusOK, map[string]any{"token": token, "user_id": u.ID, "email": u.Email})
}

// errSignOutHeader refuses a sign-out without webHeader.
var errSignOutHeader = newError(http.StatusForbidden, "forbidden", "sign out from the console's pages ("+webHeader+" header)")

// webHeader marks a request sent by the console's or the dashboard's own
// scripts. A browser sends the session cookie with requests a page
// elsewhere makes too (SameSite=Lax lets top-level GETs through), but such
// a page cannot add a header of its own without a CORS preflight, which
// the proxy never grants: so the cookie carries a change only with this
// header (sessionCookieFor).
const webHeader = "X-Queen-Web"

// errWebHeader refuses a change carried by the session cookie without
// webHeader.
var errWebHeader = newError(http.StatusForbidden, "web_header_required",
	"the session cookie carries a change only from the console's pages: the "+webHeader+
		" header is missing (send it, or an Authorization bearer credential)")

// sessionCookieFor is the request's session cookie as its credential, ""
// when it has none. It is the one place the proxy accepts the cookie, and
// the one rule against cross-site requests: a request that may change
// state (changesState), whatever its method, rides the cookie only with
// webHeader, and is refused errWebHeader without it. A bearer credential
// needs no header: callers look at it first.
func sessionCookieFor(ctx *fasthttp.RequestCtx) (string, error) {
	cookie := ctx.Request.Header.Cookie(sessionCookie)
	if len(cookie) == 0 {
		return "", nil
	}
	if len(ctx.Request.Header.Peek(webHeader)) == 0 && changesState(string(ctx.Method()), string(ctx.Path())) {
		return "", errWebHeader
	}
	return string(cookie), nil
}

// changesState reports whether a request may change state. Only a GET or
// HEAD can be a read: on the console's routes every one is, and on the
// data plane those the classifier calls reads (ClassRead, a gated route's
// OpRead, the ACLs' listing). Everything else counts as a change: pops
// (which lease, or with autoAck consume, messages) and the ephemeral pop
// are GETs that change.
func changesState(method, path string) bool {
	if !isGet(method) {
		return true
	}
	if under(path, "/auth") || under(path, "/api/console") {
		return false
	}
	r := Classify(method, path)
	return r.Class != ClassRead && r.Class != ClassACLDescribe && !(r.Class == ClassGated && r.Op == OpRead)
}

// consoleSession is the session of a console request: its bearer token or
// cookie (sessionCookieFor). API keys are refused.
func (p *Proxy) consoleSession(ctx *fasthttp.RequestCtx) (*sessionInfo, error) {
	token := bearer(ctx)
	if token == "" {
		var err error
		if token, err = sessionCookieFor(ctx); err != nil {
			return nil, err
		}
	}
	if strings.HasPrefix(token, KeyPrefix) {
		return nil, errKeysOnConsole
	}
	if token == "" {
		return nil, errMissingCredential
	}
	return p.session(ctx, token)
}

// consoleMe answers who is signed in and their clusters.
func (p *Proxy) consoleMe(ctx *fasthttp.RequestCtx) {
	s, err := p.consoleSession(ctx)
	if err != nil {
		writeError(ctx, err)
		return
	}
	type clusterRole struct {
		ID   string `json:"id"`
		Slug string `json:"slug"`
		Plan string `json:"plan_code"`
		Role string `json:"role"`
	}
	clusters := []clusterRole{}
	for id, role := range s.user.Roles {
		c, found, err := p.clusterByID(ctx, id)
		if err != nil {
			writeError(ctx, err)
			return
		}
		if found {
			clusters = append(clusters, clusterRole{c.ID, c.Slug, c.Plan, role})
		}
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"user_id": s.user.ID, "email": s.user.Email, "operator": s.operator,
		"clusters": clusters})
}
