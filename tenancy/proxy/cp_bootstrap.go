package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
)

// cpBootstrap is POST /api/cp/bootstrap: a tenant, its cluster, an admin
// and, with key_name, an all-scope key the proxy mints. The plaintext key
// is answered once, when minted; a retry finds the key by its name on the
// cluster and answers its id without the plaintext, which is not kept.
func (p *Proxy) cpBootstrap(ctx context.Context, r *cpRequest) (int, any, error) {
	if !p.seeded.Load() {
		return 0, nil, errNotSeeded
	}
	var q struct {
		TenantSlug  string `json:"tenant_slug"`
		TenantName  string `json:"tenant_name"`
		ClusterSlug string `json:"cluster_slug"`
		Plan        string `json:"plan"`
		AdminEmail  string `json:"admin_email"`
		Password    string `json:"password"`
		KeyName     string `json:"key_name"`
	}
	if err := r.decode(&q); err != nil {
		return 0, nil, err
	}
	if q.ClusterSlug == "" {
		q.ClusterSlug = q.TenantSlug
	}
	switch {
	case !validSlug(q.TenantSlug) || !validSlug(q.ClusterSlug):
		return 0, nil, invalid("tenant_slug and cluster_slug must be DNS labels")
	case !strings.Contains(q.AdminEmail, "@"):
		return 0, nil, invalid("admin_email must be an email address")
	}
	t, c, tCreated, cCreated, err := p.store.ensureTenantCluster(ctx, q.TenantSlug, q.TenantName, q.ClusterSlug, q.Plan, nil)
	if err != nil {
		return 0, nil, err
	}
	pw, err := hashPassword(q.Password)
	if err != nil {
		return 0, nil, err
	}
	u, uCreated, err := p.store.ensureUser(ctx, "", q.AdminEmail, t, c.ID, RoleAdmin, pw)
	if err != nil {
		return 0, nil, err
	}
	out := map[string]any{"tenant_id": t.ID, "cluster_id": c.ID, "broker_tenant_uuid": c.BrokerTenant, "user_id": u.ID,
		"plan_code": c.Plan, "created": map[string]bool{"tenant": tCreated, "cluster": cCreated, "user": uCreated, "key": false}}
	if q.KeyName == "" {
		return http.StatusOK, out, nil
	}
	existing, err := p.store.keyNamed(ctx, c.ID, q.KeyName)
	if err != nil {
		return 0, nil, err
	}
	if existing != nil {
		out["key_id"] = existing.ID
		return http.StatusOK, out, nil
	}
	key, err := NewKey("live")
	if err != nil {
		return 0, nil, err
	}
	k, kCreated, err := p.store.ensureKey(ctx, c.ID, q.KeyName, HashKey(key), AllScopes)
	if err != nil {
		return 0, nil, err
	}
	out["key_id"] = k.ID
	out["created"].(map[string]bool)["key"] = kCreated
	if kCreated {
		out["api_key"] = key
	}
	return http.StatusOK, out, nil
}

// keyNamed finds a cluster's unrevoked key by name.
func (s *kvStore) keyNamed(ctx context.Context, cluster, name string) (*APIKey, error) {
	var found *APIKey
	err := s.scan(ctx, "key/", "", func(_ string, val []byte) bool {
		var k APIKey
		if json.Unmarshal(val, &k) == nil && k.ClusterID == cluster && k.Name == name && !k.Revoked {
			found = &k
			return false
		}
		return true
	})
	return found, err
}
