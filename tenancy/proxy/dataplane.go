package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/raftgroups/transport"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/tenancy/acl"
	"github.com/queen-mq/queen/wire"
)

// credential is who a data-plane request acts as: its cluster and what it
// may do there.
type credential struct {
	cluster *Cluster
	scopes  []string
	keyID   string // API keys
	userID  string // sessions
}

// principal is the credential's ACL principal: a key's is the one its
// Kafka login has, a session's its user's (ConsolePrincipal).
func (c *credential) principal() string {
	switch {
	case c.keyID != "":
		return acl.PrincipalForAPIKey(c.cluster.ID, c.keyID)
	case c.userID != "":
		return ConsolePrincipal(c.userID)
	}
	return acl.Anonymous // no credential names no one; authenticate never makes one
}

// dataPlane authenticates, classifies, limits, meters and hands a request
// to the broker.
func (p *Proxy) dataPlane(ctx *fasthttp.RequestCtx, path string) {
	// Whatever a client says about tenants or the raft token is its own
	// invention: the proxy sets the tenant, and only nodes hold the token.
	ctx.Request.Header.Del(tenancy.Header)
	ctx.Request.Header.Del(transport.TokenHeader)
	if path == "/health" { // for load balancers: says nothing about any cluster
		p.broker(ctx)
		return
	}
	method := string(ctx.Method())
	route := Classify(method, path)
	switch route.Class {
	case ClassBlocked:
		refuse(ctx, errRouteBlocked)
		return
	case ClassOperator:
		p.operatorRoute(ctx)
		return
	}
	cred, err := p.authenticate(ctx)
	if err != nil {
		if p.toSignIn(ctx, path, err) {
			return
		}
		refuse(ctx, err)
		return
	}
	view, err := p.view(ctx, cred.cluster)
	if err != nil {
		refuse(ctx, err)
		return
	}
	if err := admit(route, cred, view); err != nil {
		refuse(ctx, err)
		return
	}
	body, err := readBody(ctx, p.cfg.MaxBodyBytes)
	if err != nil {
		refuse(ctx, err)
		return
	}
	ops, ok := bodyRoutes(path, route, body)
	if !ok {
		refuse(ctx, errMalformedBody)
		return
	}
	route, grows := refineMixed(route, body, ops)
	if route.Class == ClassConsume && path != "/api/v1/transaction" {
		ops = []Route{route} // a KV batch on the Kafka facade's groups is consumption
	}
	if err := admitBody(ops, cred, view); err != nil {
		refuse(ctx, err)
		return
	}
	var targets []queueTarget
	msgs := 0
	switch path {
	case "/api/v1/push":
		if err := p.pushBlocked(view, time.Now()); err != nil {
			refuse(ctx, err)
			return
		}
		// The broker shows the items as it reads them: no second parse.
		api.ProxiedPush(ctx, p.pushCheck(ctx, cred.cluster, view.limits))
	case "/api/v1/configure":
		targets = configureTarget(body)
	default:
		if route.Class == ClassQueueAdmin && strings.HasPrefix(path, "/api/v1/dlq/") {
			msgs = 1 // a replay pushes its message again: it counts like a push
		}
	}
	if !p.withinLimits(ctx, route, grows, path, cred.cluster, view.limits, msgs) {
		return
	}
	if !p.withinCaps(ctx, path, cred.cluster, view.limits, targets) {
		return
	}
	if isParkedPop(ctx, path) {
		if !p.enterParked(cred.cluster, view.limits[LimitMaxParkedPops]) {
			writeRetry(ctx, time.Second, "parked_limit", "too many long-poll pops parked for this cluster")
			return
		}
		defer p.parked.leave(cred.cluster.ID)
	}
	ctx.Request.Header.Del("Authorization")
	tenant, err := p.tenantOf(cred.cluster)
	if err != nil {
		refuse(ctx, err)
		return
	}
	api.Proxied(ctx, tenant)
	api.ProxiedPrincipal(ctx, cred.principal())
	p.broker(ctx)
	code := ctx.Response.StatusCode()
	p.meter.record(cred.cluster.ID, meterOp(path), code, len(body), ctx.Response.Body())
	if code < 400 {
		p.activity.touch(cred.cluster.ID, path == "/api/v1/push" && code < 300, cred.keyID != "", time.Now())
	}
}

// refuse answers err and closes the connection when the body was not read.
func refuse(ctx *fasthttp.RequestCtx, err error) {
	if ctx.Request.Header.ContentLength() != 0 && ctx.RequestBodyStream() != nil {
		ctx.SetConnectionClose()
	}
	writeError(ctx, err)
}

// bearer is the request's bearer credential, "" when it has none.
func bearer(ctx *fasthttp.RequestCtx) string {
	h := string(ctx.Request.Header.Peek("Authorization"))
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// authenticate resolves the request's credential and checks it against
// the cluster the Host names.
func (p *Proxy) authenticate(ctx *fasthttp.RequestCtx) (*credential, error) {
	token := bearer(ctx)
	if token == "" {
		// The dashboard's pages, behind the console's sign-in: reads, and
		// changes its own scripts send (sessionCookieFor).
		var err error
		if token, err = sessionCookieFor(ctx); err != nil {
			return nil, err
		}
	}
	if token == "" {
		return nil, errMissingCredential
	}
	label, shared := p.hostLabel(string(ctx.Host()))
	var host *Cluster
	if !shared {
		var found bool
		var err error
		if validSlug(label) { // anything else names no cluster: not worth a read
			if host, found, err = p.clusterBySlug(ctx, label); err != nil {
				return nil, err
			}
		}
		if !found && p.cfg.DefaultCluster != "" {
			if host, found, err = p.clusterBySlug(ctx, p.cfg.DefaultCluster); err != nil {
				return nil, err
			}
		}
		if !found {
			host = nil
		}
	}
	if strings.HasPrefix(token, KeyPrefix) {
		cred, err := p.keyCredential(ctx, token)
		if err != nil {
			return nil, err
		}
		if host == nil && !shared {
			return nil, errNoCluster
		}
		if host != nil && host.ID != cred.cluster.ID {
			return nil, errKeyMismatch
		}
		return cred, nil
	}
	// A person's session holds a role per cluster: the Host must name one.
	if host == nil {
		return nil, errNoCluster
	}
	s, err := p.session(ctx, token)
	if err != nil {
		return nil, err
	}
	scopes := roleScopes[s.user.Roles[host.ID]]
	if s.operator {
		scopes = roleScopes[RoleAdmin]
	}
	if len(scopes) == 0 {
		return nil, errNotPermitted
	}
	return &credential{cluster: host, scopes: scopes, userID: s.user.ID}, nil
}

// keyCredential looks an API key up by its hash.
func (p *Proxy) keyCredential(ctx context.Context, key string) (*credential, error) {
	if !ValidKey(key) {
		return nil, errBadCredential
	}
	k, found, err := p.keyByHash(ctx, HashKey(key))
	if err != nil {
		return nil, err
	}
	if !found || k.Revoked {
		return nil, errBadCredential
	}
	c, found, err := p.clusterByID(ctx, k.ClusterID)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errBadCredential
	}
	return &credential{cluster: c, scopes: k.Scopes, keyID: k.ID}, nil
}

// admit checks status, scopes and plan features.
func admit(r Route, cred *credential, v *clusterView) error {
	if v.rank >= statusRank(StatusSuspended) {
		return errSuspended
	}
	if !r.allowedFor(cred.scopes) {
		return errNotPermitted
	}
	if v.rank >= 1 && (r.Class == ClassProduce || (r.Class == ClassGated && r.Op == OpGrow)) {
		return errPushBlocked
	}
	if r.Class == ClassGated && !slices.Contains(v.plan.Features, r.Feature) {
		return errNotInPlan
	}
	return nil
}

// admitBody admits each operation of a mixed route's body (bodyRoutes)
// as admit admits a route: an operation needs the scopes, status and plan
// feature its own route needs, whatever route carries it.
func admitBody(ops []Route, cred *credential, v *clusterView) error {
	for _, op := range ops {
		if err := admit(op, cred, v); err != nil {
			return err
		}
	}
	return nil
}

var errMalformedBody = newError(http.StatusBadRequest, "bad_request", "malformed JSON body")

// readBody reads the request body within limit (413 above it).
func readBody(ctx *fasthttp.RequestCtx, limit int) ([]byte, error) {
	stream := ctx.RequestBodyStream()
	if stream == nil {
		return ctx.Request.Body(), nil
	}
	if ctx.Request.Header.ContentLength() > limit {
		return nil, errTooLarge
	}
	// Read into a buffer of the declared size: no regrowing for the
	// usual body whose length is known.
	buf := bytes.NewBuffer(make([]byte, 0, max(0, ctx.Request.Header.ContentLength())+1))
	_, err := buf.ReadFrom(io.LimitReader(stream, int64(limit)+1))
	body := buf.Bytes()
	if err != nil {
		return nil, newError(http.StatusBadRequest, "bad_request", "unreadable request body")
	}
	if len(body) > limit {
		return nil, errTooLarge
	}
	ctx.Request.SetBodyRaw(body)
	return body, nil
}

var errTooLarge = newError(http.StatusRequestEntityTooLarge, "payload_too_large", "the request body is larger than allowed")

// tenantOf is the broker tenant a cluster's requests run in.
func (p *Proxy) tenantOf(c *Cluster) (wire.ID, error) {
	if !p.cfg.TenantHeader {
		return wire.DefaultTenant, nil
	}
	return wire.ParseID(c.BrokerTenant)
}

// operatorRoute serves the cell-wide routes: /metrics/prometheus to the
// control-plane token, the others to a live operator; 404 to anyone else
// and everywhere when operators are off.
func (p *Proxy) operatorRoute(ctx *fasthttp.RequestCtx) {
	allowed := false
	if string(ctx.Path()) == "/metrics/prometheus" && p.cfg.CPToken != "" {
		allowed = p.cpTokenOK(ctx) || tokenEqual(bearer(ctx), p.cfg.CPToken)
	}
	if !allowed && p.cfg.OperatorEnabled {
		if s, err := p.session(ctx, bearer(ctx)); err == nil && s.operator {
			allowed = true
		}
	}
	if !allowed {
		refuse(ctx, errNotFound)
		return
	}
	ctx.Request.Header.Del("Authorization")
	api.Proxied(ctx, wire.DefaultTenant)
	p.broker(ctx)
}

// toSignIn sends a browser that opens the dashboard's page without a
// live session to the console's sign-in (303 to /console), rather than
// answering it JSON; true when it did.
func (p *Proxy) toSignIn(ctx *fasthttp.RequestCtx, path string, err error) bool {
	if p.cfg.JWTSecret == "" || path != "/" || !ctx.IsGet() || !(errors.Is(err, errMissingCredential) || errors.Is(err, errBadSession)) {
		return false
	}
	// A relative Location: behind a TLS-terminating balancer the node
	// does not know the scheme the browser used.
	ctx.Response.Header.Set("Location", "/console")
	ctx.SetStatusCode(http.StatusSeeOther)
	return true
}
