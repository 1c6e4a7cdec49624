package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// principalKey is where an authenticated request keeps its principal.
const principalKey = "queen.principal"

// authorize checks a request against its route's access level when broker
// JWT is on (spec §2.2, §5.2): no or bad token → 401, a token whose roles
// do not pass the level → 403. Public routes and JWT_SKIP_PATHS pass.
func (s *Server) authorize(ctx *fasthttp.RequestCtx, level authn.Level) bool {
	if _, ok := proxiedTenant(ctx); ok {
		return true // the embedded proxy authorized it by its own credentials
	}
	v := s.cfg.Auth
	if v == nil || !v.Enabled() || level == authn.LevelPublic || v.SkipPath(string(ctx.Path())) {
		return true
	}
	token, ok := authn.BearerToken(string(ctx.Request.Header.Peek("Authorization")))
	if !ok {
		writeJSON(ctx, http.StatusUnauthorized, errorBody{Error: "Authentication required", Code: "unauthorized"})
		return false
	}
	p, err := v.Verify(token)
	if err != nil {
		s.log.Debug("http: token refused", "path", string(ctx.Path()), "err", err)
		writeJSON(ctx, http.StatusUnauthorized, errorBody{Error: "Authentication required", Code: "unauthorized"})
		return false
	}
	if !p.Allows(level) {
		writeError(ctx, errForbidden)
		return false
	}
	ctx.SetUserValue(principalKey, p)
	return true
}

// operatorRoute reports whether the route at path is an operator's: it
// acts on the node or the whole cluster (membership, grants, the ephemeral
// switch, stats), not on one tenant's data, so no tenant may use it, not
// even its admin. Every /api/v1/system/ route is one except placement,
// which shows a tenant where its own queues live, and acls, the tenant's
// own ACLs (acl_admin.go); so are /api/v1/stats/
// and /internal/ (spec §2.2). A route added under these prefixes is an
// operator's unless it is listed here.
func operatorRoute(path string) bool {
	if path == "/api/v1/system/placement" || path == aclsPath {
		return false // a tenant's own: where its queues live, its ACLs
	}
	for _, prefix := range []string{"/api/v1/system/", "/api/v1/stats/", "/internal/"} {
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

// authorizeOperator admits a request to an operator route from the
// operator only, after authorize admitted it to the route's level (admin):
// never a request scoped to a tenant, by the x-queen-tenant header or by
// the embedded proxy (which acts for a tenant and blocks these routes),
// and with broker JWT on never a token that names a tenant
// (JWT_TENANT_CLAIM): that is the tenant's admin. The operator's token is
// one of the admin role naming no tenant. With JWT off the routes stay
// open to requests not scoped to a tenant.
func (s *Server) authorizeOperator(ctx *fasthttp.RequestCtx) bool {
	p, hasToken := principalOf(ctx)
	if err := notOperator(ctx, p, hasToken); err != nil {
		writeError(ctx, err)
		return false
	}
	return true
}

// notOperator says why a request whose verified token (if hasToken) is p
// is not the operator's, or nil when it may be.
func notOperator(ctx *fasthttp.RequestCtx, p authn.Principal, hasToken bool) error {
	_, proxied := proxiedTenant(ctx)
	switch {
	case proxied || len(ctx.Request.Header.Peek(tenancy.Header)) > 0:
		return errTenantScoped
	case hasToken && p.Tenant != "":
		return errTenantToken
	}
	return nil
}

var (
	errTenantScoped = &apiError{http.StatusForbidden, "forbidden",
		"an operator route (node- or cluster-wide) is not available to a request scoped to a tenant"}
	errTenantToken = &apiError{http.StatusForbidden, "forbidden",
		"an operator route (node- or cluster-wide) needs an admin token naming no tenant; this one is a tenant's"}
)

// errForbidden is the spec's 403 for roles that do not pass a level.
var errForbidden = &apiError{http.StatusForbidden, "forbidden", "Insufficient permissions"}

// requireLevel refuses (403) a request whose token passed its route's level
// but not level, for routes whose operations need more than the route
// does. Without JWT there is no principal and nothing to refuse.
func requireLevel(ctx *fasthttp.RequestCtx, level authn.Level) error {
	if p, ok := principalOf(ctx); ok && !p.Allows(level) {
		return errForbidden
	}
	return nil
}

// principalOf is the request's authenticated principal, if any.
func principalOf(ctx *fasthttp.RequestCtx) (authn.Principal, bool) {
	p, ok := ctx.UserValue(principalKey).(authn.Principal)
	return p, ok
}

// producerSub is the JWT subject recorded on what the request pushes.
func producerSub(ctx *fasthttp.RequestCtx) string {
	if p, ok := principalOf(ctx); ok {
		return p.Subject
	}
	return ""
}

// tenantOf is the tenant a request is scoped by: the x-queen-tenant header
// in tenancy header mode (set by a trusted proxy), the default tenant
// otherwise. A token that names a tenant (JWT_TENANT_CLAIM) acts for that
// tenant only: the header is then checked against it (403 wrong_tenant).
func (s *Server) tenantOf(ctx *fasthttp.RequestCtx) (wire.ID, error) {
	if id, ok := proxiedTenant(ctx); ok {
		return id, nil
	}
	if !s.cfg.TenancyHeader {
		return wire.DefaultTenant, nil
	}
	id, err := tenancy.Parse(string(ctx.Request.Header.Peek(tenancy.Header)))
	switch {
	case errors.Is(err, tenancy.ErrMalformedTenant):
		return id, badRequest("x-queen-tenant must be a UUID")
	case errors.Is(err, tenancy.ErrReservedTenant):
		return id, &apiError{http.StatusForbidden, "reserved_tenant", "the tenant is reserved"}
	case err != nil:
		return id, err
	}
	if p, ok := principalOf(ctx); ok && p.Tenant != "" {
		if claimed, err := tenancy.Parse(p.Tenant); err != nil || claimed != id {
			return id, errWrongTenant
		}
	}
	return id, nil
}

var errWrongTenant = &apiError{http.StatusForbidden, "wrong_tenant", "the token is for another tenant"}

// callerIsOperator reports whether a request to a public route comes from
// the operator, to whom it serves more: with JWT on, a token of the admin
// role naming no tenant, on a request not scoped to a tenant (as
// authorizeOperator admits); with JWT off, anyone.
func (s *Server) callerIsOperator(ctx *fasthttp.RequestCtx) bool {
	v := s.cfg.Auth
	if v == nil || !v.Enabled() {
		return true
	}
	token, ok := authn.BearerToken(string(ctx.Request.Header.Peek("Authorization")))
	if !ok {
		return false
	}
	p, err := v.Verify(token)
	return err == nil && p.Allows(authn.LevelAdmin) && notOperator(ctx, p, true) == nil
}
