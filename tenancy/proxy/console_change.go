package proxy

import (
	"context"
	"net/http"
	"sort"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/tenancy/console"
)

// The console's pages and what a signed-in person changes there: a
// cluster's API keys (admins mint one, shown once, and revoke it), the
// sign-in methods the page offers, and the operators' list of clusters.

// maxKeyName bounds a key's name as people type it.
const maxKeyName = 100

// consolePage serves /console (the page) and /console/assets/* (its
// files and the dashboard's shared ones). The page holds no data: every
// call it makes carries the session.
func (p *Proxy) consolePage(ctx *fasthttp.RequestCtx, path string) {
	if p.cfg.JWTSecret == "" || !(ctx.IsGet() || ctx.IsHead()) {
		refuse(ctx, errNotFound)
		return
	}
	if path == "/console" || path == "/console/" {
		api.ServeAsset(ctx, console.Page())
		return
	}
	a, ok := console.Lookup(strings.TrimPrefix(path, "/console/assets/"))
	if !ok || !strings.HasPrefix(path, "/console/assets/") {
		refuse(ctx, errNotFound)
		return
	}
	api.ServeAsset(ctx, a)
}

// providers says which sign-in methods the page may offer: the password
// always (a user without one is refused at sign-in), Google and GitHub
// when configured.
func (p *Proxy) providers(ctx *fasthttp.RequestCtx) {
	c := p.oauthClients()
	writeJSON(ctx, http.StatusOK, map[string]bool{"password": true, "google": c["google"] != nil, "github": c["github"] != nil})
}

// consoleChange serves the console's writes on cluster c, for a person
// with role there, admins only: POST keys (mint), DELETE keys/:id
// (revoke); POST members (add), PUT members/:user_id (change the role),
// DELETE members/:user_id (remove from the cluster).
func (p *Proxy) consoleChange(ctx *fasthttp.RequestCtx, method string, c *Cluster, role string, parts []string) {
	route := method + " " + strings.Join(parts, "/")
	if len(parts) == 2 {
		route = method + " " + parts[0] + "/:id"
	}
	switch route {
	case "POST keys", "DELETE keys/:id", "POST members", "PUT members/:id", "DELETE members/:id":
	default:
		writeError(ctx, errNotFound)
		return
	}
	if role != RoleAdmin {
		writeError(ctx, errNotPermitted)
		return
	}
	var q struct {
		Name   string   `json:"name"`
		Scopes []string `json:"scopes"`
		Email  string   `json:"email"`
		Role   string   `json:"role"`
	}
	if method != "DELETE" {
		body, err := readBody(ctx, 64<<10)
		if err != nil {
			writeError(ctx, err)
			return
		}
		r := cpRequest{body: body}
		if err := r.decode(&q); err != nil {
			writeError(ctx, err)
			return
		}
	}
	var out any = map[string]bool{"ok": true}
	status := http.StatusOK
	var err error
	switch route {
	case "POST keys":
		status = http.StatusCreated
		out, err = p.mintKey(ctx, c, strings.TrimSpace(q.Name), q.Scopes)
	case "DELETE keys/:id":
		err = p.revokeKey(ctx, parts[1], c.ID)
	case "POST members":
		out, err = p.addMember(ctx, c, strings.TrimSpace(q.Email), q.Role)
	case "PUT members/:id":
		if !ValidRole(q.Role) {
			err = invalid("role must be one of %s", strings.Join(allRoles, ", "))
			break
		}
		err = p.setMemberRole(ctx, c, parts[1], q.Role)
	case "DELETE members/:id":
		err = p.setMemberRole(ctx, c, parts[1], "")
	}
	if err != nil {
		writeError(ctx, err)
		return
	}
	writeJSON(ctx, status, out)
}

// mintedKey is a key made on the console: the only answer that ever holds
// its plaintext.
type mintedKey struct {
	ID     string   `json:"id"`
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
	APIKey string   `json:"api_key"`
}

// mintKey makes a new key for c; only its hash is stored.
func (p *Proxy) mintKey(ctx context.Context, c *Cluster, name string, scopes []string) (*mintedKey, error) {
	scopes, err := normalizeScopes(scopes)
	switch {
	case err != nil:
		return nil, invalid("%v", err)
	case name == "":
		return nil, invalid("name is required")
	case len(name) > maxKeyName:
		return nil, invalid("name is longer than %d characters", maxKeyName)
	}
	if err := p.tenantNotDeleting(ctx, c); err != nil {
		return nil, err
	}
	plain, err := NewKey("live")
	if err != nil {
		return nil, err
	}
	k, _, err := p.store.ensureKey(ctx, c.ID, name, HashKey(plain), scopes)
	if err != nil {
		return nil, err
	}
	return &mintedKey{ID: k.ID, Name: k.Name, Scopes: k.Scopes, APIKey: plain}, nil
}

// operatorClusters lists every cluster with its tenant's status and its
// last traffic, for operators; everyone else is told there is nothing here, as on the
// operator routes.
func (p *Proxy) operatorClusters(ctx *fasthttp.RequestCtx) {
	s, err := p.consoleSession(ctx)
	if err != nil {
		writeError(ctx, err)
		return
	}
	if !s.operator {
		writeError(ctx, errNotFound)
		return
	}
	cs, err := p.store.tenantClusters(ctx, "")
	if err != nil {
		writeError(ctx, err)
		return
	}
	type row struct {
		ID           string `json:"id"`
		Slug         string `json:"slug"`
		TenantSlug   string `json:"tenant_slug"`
		Plan         string `json:"plan_code"`
		Status       string `json:"status"`
		TenantStatus string `json:"tenant_status"`
		// LastTraffic is the last request the proxy admitted for the
		// cluster (RFC 3339), null before any.
		LastTraffic *string `json:"last_traffic"`
	}
	out := make([]row, 0, len(cs))
	tenants := map[string]string{}
	for _, c := range cs {
		ts, seen := tenants[c.TenantSlug]
		if !seen {
			var t Tenant
			if _, err := p.store.get(ctx, tenantKey(c.TenantSlug), &t); err != nil {
				writeError(ctx, err)
				return
			}
			ts, tenants[c.TenantSlug] = t.Status, t.Status
		}
		act, err := p.store.activityOf(ctx, c.ID)
		if err != nil {
			writeError(ctx, err)
			return
		}
		out = append(out, row{c.ID, c.Slug, c.TenantSlug, c.Plan, c.Status, ts, msTime(act.LastTrafficMs)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	writeJSON(ctx, http.StatusOK, map[string]any{"clusters": out})
}
