package proxy

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// The control plane, /api/cp/* (spec §6.11): what a provisioning system
// drives. It delivers commands at least once, so every route is safe to
// repeat and a retry answers the same ids.

// cpBodyLimit caps control-plane bodies.
const cpBodyLimit = 1 << 20

// cpTokenHeader carries QUEEN_PROXY_CP_TOKEN.
const cpTokenHeader = "x-queen-cp-token"

var (
	errBadCPToken     = newError(http.StatusUnauthorized, "unauthorized", "bad control-plane token")
	errClusterUnknown = newError(http.StatusNotFound, "cluster_unknown", "no such cluster")
	errTenantUnknown  = newError(http.StatusNotFound, "tenant_unknown", "no such tenant")
	errKeyUnknown     = newError(http.StatusNotFound, "key_unknown", "no such key")
	errNotDeleting    = newError(http.StatusConflict, "not_deleting", "the tenant's status is not deleting")
	errNotPurged      = newError(http.StatusConflict, "not_purged", "the tenant's clusters still hold queues; purge first")
	errSystemTenant   = newError(http.StatusConflict, "system_tenant", "the cluster's data is in the broker's default tenant (QUEEN_PROXY_TENANT_HEADER=false)")
	errTenantDeleting = newError(http.StatusConflict, "deleting", "the tenant is being deleted")
	errNotSeeded      = newError(http.StatusServiceUnavailable, "unavailable", "the proxy's state is not seeded yet")
	errS3Unavailable  = newError(http.StatusNotFound, "s3_unavailable", "this build has no S3 sink")
	errCPTooLarge     = newError(http.StatusRequestEntityTooLarge, "payload_too_large", "control-plane bodies are capped at 1 MiB")
)

func invalid(format string, args ...any) *httpError {
	return newError(http.StatusBadRequest, "invalid", fmt.Sprintf(format, args...))
}

func tokenEqual(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// cpTokenOK checks the control-plane token header, in constant time.
func (p *Proxy) cpTokenOK(ctx *fasthttp.RequestCtx) bool {
	return tokenEqual(string(ctx.Request.Header.Peek(cpTokenHeader)), p.cfg.CPToken)
}

// cpRequest is one control-plane call: its path segments after /api/cp
// and its body.
type cpRequest struct {
	ctx    *fasthttp.RequestCtx
	method string
	parts  []string
	body   []byte
}

// status decodes a {"status": ...} body naming one of allowed.
func (r *cpRequest) status(allowed []string) (string, error) {
	var q struct {
		Status string `json:"status"`
	}
	if err := r.decode(&q); err != nil {
		return "", err
	}
	if !slices.Contains(allowed, q.Status) {
		return "", invalid("status must be one of %s", strings.Join(allowed, ", "))
	}
	return q.Status, nil
}

func (r *cpRequest) decode(v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
		return invalid("the body is not the JSON this route takes: %v", err)
	}
	return nil
}

// controlPlane guards and routes /api/cp/*: 404 everywhere without a
// token configured, the token checked before any body is read.
func (p *Proxy) controlPlane(ctx *fasthttp.RequestCtx, path string) {
	if p.cfg.CPToken == "" {
		refuse(ctx, errNotFound)
		return
	}
	if !p.cpTokenOK(ctx) {
		refuse(ctx, errBadCPToken)
		return
	}
	body, err := readBody(ctx, cpBodyLimit)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			err = errCPTooLarge
		}
		refuse(ctx, err)
		return
	}
	r := &cpRequest{ctx: ctx, method: string(ctx.Method()), body: body,
		parts: strings.Split(strings.Trim(strings.TrimPrefix(path, "/api/cp"), "/"), "/")}
	code, out, err := p.cpRoute(ctx, r)
	if err != nil {
		writeError(ctx, err)
		return
	}
	writeJSON(ctx, code, out)
}

// cpRoute runs the route r names.
func (p *Proxy) cpRoute(ctx context.Context, r *cpRequest) (int, any, error) {
	parts, m := r.parts, r.method
	switch {
	case m == "POST" && len(parts) == 1 && parts[0] == "provision":
		return p.cpProvision(ctx, r)
	case m == "POST" && len(parts) == 1 && parts[0] == "activity":
		return p.cpActivity(ctx, r)
	case m == "POST" && len(parts) == 1 && parts[0] == "bootstrap":
		return p.cpBootstrap(ctx, r)
	case m == "POST" && len(parts) == 1 && parts[0] == "tenants":
		return p.cpCreateTenant(ctx, r)
	case m == "PUT" && len(parts) == 3 && parts[0] == "tenants" && parts[2] == "status":
		return p.cpTenantStatus(ctx, r, parts[1])
	case m == "POST" && len(parts) == 3 && parts[0] == "tenants" && parts[2] == "purge":
		return p.cpPurge(ctx, parts[1])
	case m == "DELETE" && len(parts) == 2 && parts[0] == "tenants":
		return p.cpDeleteTenant(ctx, parts[1], string(r.ctx.QueryArgs().Peek("force")) == "true")
	case m == "GET" && len(parts) == 1 && parts[0] == "clusters":
		return p.cpListClusters(ctx, string(r.ctx.QueryArgs().Peek("plan")))
	case m == "POST" && len(parts) == 1 && parts[0] == "clusters":
		return p.cpCreateCluster(ctx, r)
	case len(parts) >= 2 && parts[0] == "clusters":
		return p.cpCluster(ctx, r)
	case m == "POST" && len(parts) == 1 && parts[0] == "keys":
		return p.cpCreateKey(ctx, r)
	case m == "DELETE" && len(parts) == 2 && parts[0] == "keys":
		return p.cpRevokeKey(ctx, parts[1])
	}
	return 0, nil, errNotFound
}

type provisionRequest struct {
	TenantSlug  string          `json:"tenant_slug"`
	TenantName  string          `json:"tenant_name"`
	ClusterSlug string          `json:"cluster_slug"`
	Plan        string          `json:"plan"`
	UserID      string          `json:"user_id"`
	Email       string          `json:"email"`
	Role        string          `json:"role"`
	KeyName     string          `json:"key_name"`
	KeyHash     string          `json:"key_hash"`
	Scopes      []string        `json:"scopes"`
	Overrides   json.RawMessage `json:"overrides"`
}

type provisionAnswer struct {
	BrokerTenant string          `json:"broker_tenant_uuid"`
	ClusterID    string          `json:"cluster_id"`
	Created      map[string]bool `json:"created"`
	KeyID        string          `json:"key_id"`
	Overrides    Limits          `json:"overrides"`
	PlanCode     string          `json:"plan_code"`
	TenantID     string          `json:"tenant_id"`
	UserID       string          `json:"user_id"`
}

// validate checks a provision body whole before anything is written.
func (q *provisionRequest) validate() (Limits, error) {
	switch {
	case !validSlug(q.TenantSlug):
		return nil, invalid("tenant_slug must be a DNS label")
	case !validSlug(q.ClusterSlug):
		return nil, invalid("cluster_slug must be a DNS label")
	case !validUUID(q.UserID):
		return nil, invalid("user_id must be a UUID")
	case !strings.Contains(q.Email, "@"):
		return nil, invalid("email must be an email address")
	case !slices.Contains(allRoles, q.Role):
		return nil, invalid("role must be one of %s", strings.Join(allRoles, ", "))
	case q.KeyName == "":
		return nil, invalid("key_name is required")
	case !validHash(q.KeyHash):
		return nil, invalid("key_hash must be a sha256 in lowercase hex")
	}
	scopes, err := normalizeScopes(q.Scopes)
	if err != nil {
		return nil, invalid("%v", err)
	}
	q.Scopes = scopes
	var ov Limits
	if len(q.Overrides) > 0 {
		if ov, err = parseOverrides(q.Overrides); err != nil {
			return nil, invalid("%v", err)
		}
	}
	return ov, nil
}

func (p *Proxy) cpProvision(ctx context.Context, r *cpRequest) (int, any, error) {
	if !p.seeded.Load() {
		return 0, nil, errNotSeeded
	}
	var q provisionRequest
	if err := r.decode(&q); err != nil {
		return 0, nil, err
	}
	ov, err := q.validate()
	if err != nil {
		return 0, nil, err
	}
	t, c, tCreated, cCreated, err := p.store.ensureTenantCluster(ctx, q.TenantSlug, q.TenantName, q.ClusterSlug, q.Plan, ov)
	if err != nil {
		return 0, nil, err
	}
	u, uCreated, err := p.store.ensureUser(ctx, q.UserID, q.Email, t, c.ID, q.Role, "")
	if err != nil {
		return 0, nil, err
	}
	k, kCreated, err := p.store.ensureKey(ctx, c.ID, q.KeyName, q.KeyHash, q.Scopes)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, provisionAnswer{BrokerTenant: c.BrokerTenant, ClusterID: c.ID, KeyID: k.ID, Overrides: c.Overrides,
		PlanCode: c.Plan, TenantID: t.ID, UserID: u.ID,
		Created: map[string]bool{"cluster": cCreated, "key": kCreated, "tenant": tCreated, "user": uCreated}}, nil
}

func (p *Proxy) cpCreateTenant(ctx context.Context, r *cpRequest) (int, any, error) {
	var q struct {
		Slug string `json:"slug"`
		Name string `json:"name"`
	}
	if err := r.decode(&q); err != nil {
		return 0, nil, err
	}
	if !validSlug(q.Slug) {
		return 0, nil, invalid("slug must be a DNS label")
	}
	t, created, err := p.store.ensureTenant(ctx, q.Slug, q.Name)
	if err != nil {
		return 0, nil, err
	}
	return createdStatus(created), map[string]string{"id": t.ID}, nil
}

func createdStatus(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// tenantClusters lists the clusters of tenant id.
func (s *kvStore) tenantClusters(ctx context.Context, tenantID string) ([]Cluster, error) {
	var out []Cluster
	err := s.scan(ctx, "cluster/", "", func(_ string, val []byte) bool {
		var c Cluster
		if json.Unmarshal(val, &c) == nil && (tenantID == "" || c.TenantID == tenantID) {
			out = append(out, c)
		}
		return true
	})
	return out, err
}

func (p *Proxy) cpTenantStatus(ctx context.Context, r *cpRequest, slug string) (int, any, error) {
	status, err := r.status(tenantStatuses)
	if err != nil {
		return 0, nil, err
	}
	t, err := update(ctx, p.store, tenantKey(slug), errTenantUnknown, func(row *Tenant) (bool, error) {
		return setTo(&row.Status, status), nil
	})
	if err != nil {
		return 0, nil, err
	}
	cs, err := p.store.tenantClusters(ctx, t.ID)
	if err != nil {
		return 0, nil, err
	}
	list := make([]map[string]string, 0, len(cs))
	for _, c := range cs {
		list = append(list, map[string]string{"broker_tenant_uuid": c.BrokerTenant, "id": c.ID, "slug": c.Slug})
	}
	return http.StatusOK, map[string]any{"clusters": list, "ok": true, "tenant_id": t.ID}, nil
}

// brokerTenant is the broker tenant a cluster's data lives in, refusing
// the broker's default tenant and the proxy's own.
func (p *Proxy) brokerTenant(c *Cluster) (wire.ID, error) {
	if !p.cfg.TenantHeader {
		return wire.ID{}, errSystemTenant
	}
	id, err := wire.ParseID(c.BrokerTenant)
	if err != nil || id == wire.DefaultTenant || id == tenancy.SystemTenant {
		return wire.ID{}, errSystemTenant
	}
	return id, nil
}

// queuesOf lists a broker tenant's queues after a barrier on its groups.
func (p *Proxy) queuesOf(ctx context.Context, tenant wire.ID) ([]storage.QueueView, error) {
	bctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	if err := p.engine.BarrierGroups(bctx, p.engine.TenantGroups(tenant)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return p.engine.Queues(tenant, storage.QueueFilter{Partitions: true}, p.engine.NowMs()), nil
}

// cpPurge deletes the queues of every cluster of a deleting tenant. A
// pass that finds nothing left says done.
func (p *Proxy) cpPurge(ctx context.Context, slug string) (int, any, error) {
	var t Tenant
	found, err := p.store.get(ctx, tenantKey(slug), &t)
	if err != nil {
		return 0, nil, err
	}
	if !found {
		return http.StatusOK, map[string]any{"clusters": []any{}, "done": true, "existed": false}, nil
	}
	if t.Status != StatusDeleting {
		return 0, nil, errNotDeleting
	}
	cs, err := p.store.tenantClusters(ctx, t.ID)
	if err != nil {
		return 0, nil, err
	}
	allDone := true
	list := make([]map[string]any, 0, len(cs))
	for i := range cs {
		bt, err := p.brokerTenant(&cs[i])
		if err != nil {
			return 0, nil, err
		}
		qs, err := p.queuesOf(ctx, bt)
		if err != nil {
			return 0, nil, err
		}
		deleted := 0
		for _, q := range qs {
			status, body := p.brokerCall("DELETE", "/api/v1/resources/queues/"+q.Name, bt, nil)
			if status >= 300 && status != http.StatusNotFound {
				return 0, nil, fmt.Errorf("%w: deleting queue %s: %d %s", ErrUnavailable, q.Name, status, body)
			}
			deleted += len(q.Partitions)
		}
		done := len(qs) == 0
		allDone = allDone && done
		list = append(list, map[string]any{"broker_tenant_uuid": cs[i].BrokerTenant, "done": done,
			"partitions_deleted": deleted, "slug": cs[i].Slug})
	}
	return http.StatusOK, map[string]any{"clusters": list, "done": allDone, "existed": true}, nil
}

// cpDeleteTenant removes a purged, deleting tenant's rows: its clusters,
// their keys, its users. force skips the deleting gate only.
func (p *Proxy) cpDeleteTenant(ctx context.Context, slug string, force bool) (int, any, error) {
	var t Tenant
	found, err := p.store.get(ctx, tenantKey(slug), &t)
	if err != nil {
		return 0, nil, err
	}
	if !found {
		return http.StatusOK, map[string]any{"clusters": []any{}, "existed": false}, nil
	}
	if t.Status != StatusDeleting && !force {
		return 0, nil, errNotDeleting
	}
	cs, err := p.store.tenantClusters(ctx, t.ID)
	if err != nil {
		return 0, nil, err
	}
	ops := []wire.KVOp{deleteOp(tenantKey(slug))}
	list := make([]map[string]string, 0, len(cs))
	ids := map[string]bool{}
	for i := range cs {
		bt, err := p.brokerTenant(&cs[i])
		if err != nil {
			return 0, nil, err
		}
		qs, err := p.queuesOf(ctx, bt)
		if err != nil {
			return 0, nil, err
		}
		if len(qs) > 0 {
			return 0, nil, errNotPurged
		}
		ids[cs[i].ID] = true
		ops = append(ops, deleteOp(clusterKey(cs[i].ID)), deleteOp(clusterSlugKey(cs[i].Slug)))
		list = append(list, map[string]string{"broker_tenant_uuid": cs[i].BrokerTenant, "cluster_id": cs[i].ID, "slug": cs[i].Slug})
	}
	err = p.store.scan(ctx, "key/", "", func(_ string, val []byte) bool {
		var k APIKey
		if json.Unmarshal(val, &k) == nil && ids[k.ClusterID] {
			ops = append(ops, deleteOp(apiKeyKey(k.Hash)), deleteOp(apiKeyIDKey(k.ID)))
		}
		return true
	})
	for id := range ids { // usage rows expire by themselves; activity rows do not
		if err == nil {
			err = p.store.scan(ctx, activityPrefix(id), "", func(key string, _ []byte) bool {
				ops = append(ops, deleteOp(key))
				return true
			})
		}
	}
	if err != nil {
		return 0, nil, err
	}
	err = p.store.scan(ctx, "user/", "", func(_ string, val []byte) bool {
		var u User
		if json.Unmarshal(val, &u) == nil && u.TenantID == t.ID {
			ops = append(ops, deleteOp(userKey(u.ID)), deleteOp(userEmailKey(u.Email)))
		}
		return true
	})
	if err != nil {
		return 0, nil, err
	}
	for len(ops) > 0 { // the tenant row goes first: a retry after a partial delete finds nothing
		n := min(len(ops), wire.MaxKVOpsPerCall-1)
		if _, err := p.store.apply(ctx, ops[:n]...); err != nil {
			return 0, nil, err
		}
		ops = ops[n:]
	}
	return http.StatusOK, map[string]any{"clusters": list, "existed": true}, nil
}

func (p *Proxy) cpListClusters(ctx context.Context, plan string) (int, any, error) {
	cs, err := p.store.tenantClusters(ctx, "")
	if err != nil {
		return 0, nil, err
	}
	out := make([]Cluster, 0, len(cs))
	for _, c := range cs {
		if plan == "" || c.Plan == plan {
			out = append(out, c)
		}
	}
	return http.StatusOK, map[string]any{"clusters": out}, nil
}

func (p *Proxy) cpCreateCluster(ctx context.Context, r *cpRequest) (int, any, error) {
	var q struct {
		TenantSlug string `json:"tenant_slug"`
		TenantName string `json:"tenant_name"`
		Slug       string `json:"slug"`
		Plan       string `json:"plan"`
	}
	if err := r.decode(&q); err != nil {
		return 0, nil, err
	}
	if !validSlug(q.TenantSlug) || !validSlug(q.Slug) {
		return 0, nil, invalid("tenant_slug and slug must be DNS labels")
	}
	t, c, _, created, err := p.store.ensureTenantCluster(ctx, q.TenantSlug, q.TenantName, q.Slug, q.Plan, nil)
	if err != nil {
		return 0, nil, err
	}
	return createdStatus(created), map[string]string{"id": c.ID, "tenant_id": t.ID, "broker_tenant_uuid": c.BrokerTenant, "slug": c.Slug}, nil
}

// findCluster reads a cluster named by id or slug, from the KV.
func (p *Proxy) findCluster(ctx context.Context, idOrSlug string) (*Cluster, error) {
	id := idOrSlug
	if !validUUID(idOrSlug) {
		var r ref
		found, err := p.store.get(ctx, clusterSlugKey(idOrSlug), &r)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, errClusterUnknown
		}
		id = r.ID
	}
	var c Cluster
	found, err := p.store.get(ctx, clusterKey(id), &c)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errClusterUnknown
	}
	return &c, nil
}

// cpCluster serves /api/cp/clusters/:id-or-slug[/...].
func (p *Proxy) cpCluster(ctx context.Context, r *cpRequest) (int, any, error) {
	c, err := p.findCluster(ctx, r.parts[1])
	if err != nil {
		return 0, nil, err
	}
	sub := strings.Join(r.parts[2:], "/")
	switch {
	case r.method == "GET" && sub == "":
		var t Tenant
		if _, err := p.store.get(ctx, tenantKey(c.TenantSlug), &t); err != nil {
			return 0, nil, err
		}
		pl := fallbackPlan(c.Plan)
		if _, err := p.store.get(ctx, planKey(c.Plan), pl); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, map[string]any{"cluster": c, "tenant": t, "plan": pl, "limits": effective(pl, c.Overrides)}, nil
	case r.method == "PUT" && sub == "overrides":
		ov, err := parseOverrides(r.body)
		if err != nil {
			return 0, nil, invalid("%v", err)
		}
		_, err = update(ctx, p.store, clusterKey(c.ID), errClusterUnknown, func(row *Cluster) (bool, error) {
			row.Overrides = ov
			return true, nil
		})
		return http.StatusOK, map[string]bool{"ok": true}, err
	case r.method == "PUT" && sub == "status":
		status, err := r.status(clusterStatuses)
		if err != nil {
			return 0, nil, err
		}
		_, err = update(ctx, p.store, clusterKey(c.ID), errClusterUnknown, func(row *Cluster) (bool, error) {
			return setTo(&row.Status, status), nil
		})
		return http.StatusOK, map[string]bool{"ok": true}, err
	case sub == "s3" && (r.method == "GET" || r.method == "PUT" || r.method == "DELETE"):
		return 0, nil, errS3Unavailable
	case r.method == "GET" && sub == "usage":
		if days := r.ctx.QueryArgs().GetUintOrZero("days"); days > 0 {
			rows, err := p.store.usageDays(ctx, c.ID, time.Now().AddDate(0, 0, -min(days, 400)))
			return http.StatusOK, map[string]any{"days": rows}, err
		}
		rows, err := p.store.usage(ctx, c.ID, time.Now().Add(-time.Hour))
		return http.StatusOK, map[string]any{"minutes": rows}, err
	case r.method == "GET" && sub == "queues", r.method == "POST" && sub == "configure":
		bt, err := p.brokerTenant(c)
		if err != nil {
			return 0, nil, err
		}
		path := "/api/v1/resources/queues"
		if sub == "configure" {
			path = "/api/v1/configure"
		}
		status, body := p.brokerCall(r.method, path, bt, r.body)
		return status, json.RawMessage(body), nil
	}
	return 0, nil, errNotFound
}

func (p *Proxy) cpCreateKey(ctx context.Context, r *cpRequest) (int, any, error) {
	var q struct {
		ClusterID string   `json:"cluster_id"`
		Name      string   `json:"name"`
		KeyHash   string   `json:"key_hash"`
		Scopes    []string `json:"scopes"`
	}
	if err := r.decode(&q); err != nil {
		return 0, nil, err
	}
	scopes, err := normalizeScopes(q.Scopes)
	switch {
	case err != nil:
		return 0, nil, invalid("%v", err)
	case !validHash(q.KeyHash):
		return 0, nil, invalid("key_hash must be a sha256 in lowercase hex")
	case q.Name == "":
		return 0, nil, invalid("name is required")
	}
	c, err := p.findCluster(ctx, q.ClusterID)
	if err != nil {
		return 0, nil, err
	}
	if err := p.tenantNotDeleting(ctx, c); err != nil {
		return 0, nil, err
	}
	k, created, err := p.store.ensureKey(ctx, c.ID, q.Name, q.KeyHash, scopes)
	if err != nil {
		return 0, nil, err
	}
	return createdStatus(created), map[string]string{"id": k.ID}, nil
}

// tenantNotDeleting refuses new keys for a cluster whose tenant is being
// deleted.
func (p *Proxy) tenantNotDeleting(ctx context.Context, c *Cluster) error {
	var t Tenant
	if _, err := p.store.get(ctx, tenantKey(c.TenantSlug), &t); err != nil {
		return err
	}
	if t.Status == StatusDeleting {
		return errTenantDeleting
	}
	return nil
}

// cpRevokeKey revokes a key. The row stays, marked revoked, so a retry
// answers the same and the hash can never be bound again.
func (p *Proxy) cpRevokeKey(ctx context.Context, id string) (int, any, error) {
	if err := p.revokeKey(ctx, id, ""); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]bool{"ok": true}, nil
}

// revokeKey marks key id revoked; with cluster set, a key of another
// cluster is unknown.
func (p *Proxy) revokeKey(ctx context.Context, id, cluster string) error {
	var r ref
	found, err := p.store.get(ctx, apiKeyIDKey(id), &r)
	if err != nil {
		return err
	}
	if !found {
		return errKeyUnknown
	}
	_, err = update(ctx, p.store, apiKeyKey(r.Hash), errKeyUnknown, func(k *APIKey) (bool, error) {
		if cluster != "" && k.ClusterID != cluster {
			return false, errKeyUnknown
		}
		return setTo(&k.Revoked, true), nil
	})
	return err
}

// brokerCall runs one broker request in-process in tenant's scope, on
// the proxy's own account (the storage quota's reading, the control
// plane's calls): no tenant's ACL applies to it (api.ProxiedSystem).
func (p *Proxy) brokerCall(method, path string, tenant wire.ID, body []byte) (int, []byte) {
	return p.brokerCallAs("", method, path, tenant, body)
}

// brokerCallAs is brokerCall acting as an ACL principal, a person's for
// the console's pages; "" is the proxy's own account (brokerCall).
func (p *Proxy) brokerCallAs(principal, method, path string, tenant wire.ID, body []byte) (int, []byte) {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	if len(body) > 0 {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
	var rc fasthttp.RequestCtx
	rc.Init(&req, nil, nil)
	api.Proxied(&rc, tenant)
	if principal != "" {
		api.ProxiedPrincipal(&rc, principal)
	} else {
		api.ProxiedSystem(&rc)
	}
	p.broker(&rc)
	return rc.Response.StatusCode(), append([]byte(nil), rc.Response.Body()...)
}

func validUUID(s string) bool {
	_, err := wire.ParseID(s)
	return err == nil && len(s) == 36
}
