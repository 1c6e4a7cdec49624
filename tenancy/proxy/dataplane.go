package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/raftgroups/transport"
	"github.com/queen-mq/queen/tenancy"
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
	route, grows := refineMixed(route, body)
	var targets []queueTarget
	msgs := 0
	switch path {
	case "/api/v1/push":
		if p.overQuota(cred.cluster, view.limits, time.Now()) {
			refuse(ctx, errStorageQuota)
			return
		}
		if p.overMonthly(cred.cluster, view.limits, time.Now()) {
			refuse(ctx, errMonthlyQuota)
			return
		}
		if items, ok := readPush(body, view.limits); ok {
			if err := checkPush(items, view.limits); err != nil {
				refuse(ctx, err)
				return
			}
			msgs, targets = len(items), pushTargets(items)
		}
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
		if !p.parked.enter(cred.cluster.ID, view.limits[LimitMaxParkedPops], p.cfg.Enforce, p.log) {
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
	if token == "" && (ctx.IsGet() || ctx.IsHead()) {
		// The dashboard's pages, behind the console's sign-in. Reads only:
		// a cookie must not carry writes a page elsewhere could forge.
		token = string(ctx.Request.Header.Cookie(sessionCookie))
	}
	if token == "" {
		return nil, errMissingCredential
	}
	label, shared := p.hostLabel(string(ctx.Host()))
	var host *Cluster
	if !shared {
		var found bool
		var err error
		if host, found, err = p.clusterBySlug(ctx, label); err != nil {
			return nil, err
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

// pushItem is what the proxy reads of one push item: its queue,
// partition and payload size (the payload is not copied).
type pushItem struct {
	Queue     string      `json:"queue"`
	Partition string      `json:"partition"`
	Payload   payloadSize `json:"payload"`
}

// payloadSize decodes a JSON value into its length.
type payloadSize int

func (p *payloadSize) UnmarshalJSON(b []byte) error {
	*p = payloadSize(len(b))
	return nil
}

// pushLimits are the limits that need a push's items read.
var pushLimits = []string{LimitMaxItemsPerPush, LimitMaxPayloadBytes, LimitMessagesPerSec, LimitMaxQueues, LimitMaxPartitions}

// readPush decodes a push body's items once, for the size caps, the
// message rate and the queue caps; not at all when no limit needs them.
// ok is false for a body the broker will refuse as malformed.
func readPush(body []byte, lim Limits) (items []pushItem, ok bool) {
	if !slices.ContainsFunc(pushLimits, func(name string) bool { return lim[name] != nil }) {
		return nil, false
	}
	var req struct {
		Items []pushItem `json:"items"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil, false
	}
	return req.Items, true
}

// checkPush applies the size caps to a push's items; they hold in shadow
// mode too.
func checkPush(items []pushItem, lim Limits) error {
	if m := lim[LimitMaxItemsPerPush]; m != nil && int64(len(items)) > *m {
		return newError(http.StatusRequestEntityTooLarge, "payload_too_large", "the push has more items than the plan allows")
	}
	if m := lim[LimitMaxPayloadBytes]; m != nil {
		for _, it := range items {
			if int64(it.Payload) > *m {
				return newError(http.StatusRequestEntityTooLarge, "payload_too_large", "a payload is larger than the plan allows")
			}
		}
	}
	return nil
}

// withinLimits applies the rate buckets: in shadow mode a request over
// them is logged with would_block=true and passes; enforced it gets 429.
func (p *Proxy) withinLimits(ctx *fasthttp.RequestCtx, r Route, grows bool, path string, c *Cluster, lim Limits, msgs int) bool {
	if r.Class == ClassGated && (r.Op == OpRead || r.Op == OpOpen || (r.Op == OpMixed && !grows)) {
		return true // never blocked (spec §6.6)
	}
	ok, wait := p.rates.take(c.ID, lim, msgs, time.Now())
	if ok {
		return true
	}
	p.log.Info("proxy: rate limit", "target", "limits", "would_block", true, "cluster", c.Slug, "path", path,
		"enforced", p.cfg.Enforce, "retry_after_ms", wait.Milliseconds())
	if !p.cfg.Enforce {
		return true
	}
	writeRetry(ctx, wait, "rate_limited", "the cluster's request or message rate is over its plan")
	return false
}

// withinCaps applies the queue and partition caps to pushes and
// configures, in shadow mode or enforced like the rates.
func (p *Proxy) withinCaps(ctx *fasthttp.RequestCtx, path string, c *Cluster, lim Limits, targets []queueTarget) bool {
	if len(targets) == 0 {
		return true
	}
	tenant, err := p.tenantOf(c)
	if err != nil {
		return true
	}
	over := p.census.overCaps(tenant, targets, lim, time.Now())
	if over == nil {
		return true
	}
	p.log.Info("proxy: queue caps", "target", "limits", "would_block", true, "cluster", c.Slug, "path", path,
		"enforced", p.cfg.Enforce, "limit", status(over).code)
	if !p.cfg.Enforce {
		return true
	}
	writeError(ctx, over)
	return false
}

// tenantOf is the broker tenant a cluster's requests run in.
func (p *Proxy) tenantOf(c *Cluster) (wire.ID, error) {
	if !p.cfg.TenantHeader {
		return wire.DefaultTenant, nil
	}
	return wire.ParseID(c.BrokerTenant)
}

// isParkedPop reports whether a request is a long-poll pop, which holds a
// parked slot while it waits.
func isParkedPop(ctx *fasthttp.RequestCtx, path string) bool {
	if !strings.HasPrefix(path, "/api/v1/pop/queue/") && path != "/api/v1/ephemeral/pop" {
		return false
	}
	w := ctx.QueryArgs().Peek("wait")
	return bytes.Equal(w, []byte("true")) || bytes.Equal(w, []byte("1"))
}

// parkedPops counts long-poll pops parked per cluster on this node.
type parkedPops struct {
	mu sync.Mutex
	n  map[string]int64
}

// enter takes a slot; over the cap it logs would_block and, enforced,
// refuses.
func (pp *parkedPops) enter(cluster string, limit *int64, enforce bool, log interface {
	Info(string, ...any)
}) bool {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.n == nil {
		pp.n = map[string]int64{}
	}
	if limit != nil && pp.n[cluster] >= *limit {
		log.Info("proxy: parked pops", "target", "limits", "would_block", true, "cluster", cluster, "enforced", enforce)
		if enforce {
			return false
		}
	}
	pp.n[cluster]++
	return true
}

func (pp *parkedPops) leave(cluster string) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.n[cluster]--; pp.n[cluster] <= 0 {
		delete(pp.n, cluster)
	}
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
