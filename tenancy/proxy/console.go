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

// issueSession signs a session for u.
func (p *Proxy) issueSession(u *User, now time.Time) (string, error) {
	claims := jwt.RegisteredClaims{Subject: u.ID, IssuedAt: jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(sessionTTL)), Issuer: "queen-proxy"}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(p.cfg.JWTSecret))
}

// session verifies a session token and loads its user.
func (p *Proxy) session(ctx context.Context, token string) (*sessionInfo, error) {
	if p.cfg.JWTSecret == "" || token == "" {
		return nil, errBadSession
	}
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return []byte(p.cfg.JWTSecret), nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer("queen-proxy"), jwt.WithExpirationRequired())
	if err != nil {
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
		ctx.Response.Header.Set("Set-Cookie", sessionCookie+"=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax")
		writeJSON(ctx, http.StatusOK, map[string]bool{"ok": true})
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
// elsewhere makes too, but such a page cannot add a header of its own
// without a CORS preflight, which the proxy never grants: so the cookie
// carries a change (any method but GET and HEAD) only with this header.
const webHeader = "X-Queen-Web"

// sessionCookieFor is the request's session cookie when it may act as
// the request's credential, "" otherwise (see webHeader).
func sessionCookieFor(ctx *fasthttp.RequestCtx) string {
	if ctx.IsGet() || ctx.IsHead() || len(ctx.Request.Header.Peek(webHeader)) > 0 {
		return string(ctx.Request.Header.Cookie(sessionCookie))
	}
	return ""
}

// consoleSession is the session of a console request: its bearer token or
// cookie (sessionCookieFor). API keys are refused.
func (p *Proxy) consoleSession(ctx *fasthttp.RequestCtx) (*sessionInfo, error) {
	token := bearer(ctx)
	if token == "" {
		token = sessionCookieFor(ctx)
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
