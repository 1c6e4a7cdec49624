package proxy

import (
	"context"
)

// The request path's reads, through the cache.

func (p *Proxy) clusterByID(ctx context.Context, id string) (*Cluster, bool, error) {
	return load[Cluster](ctx, p.cache, clusterKey(id))
}

func (p *Proxy) clusterBySlug(ctx context.Context, slug string) (*Cluster, bool, error) {
	r, found, err := load[ref](ctx, p.cache, clusterSlugKey(slug))
	if err != nil || !found {
		return nil, false, err
	}
	return p.clusterByID(ctx, r.ID)
}

func (p *Proxy) keyByHash(ctx context.Context, hash string) (*APIKey, bool, error) {
	return load[APIKey](ctx, p.cache, apiKeyKey(hash))
}

func (p *Proxy) tenantBySlug(ctx context.Context, slug string) (*Tenant, bool, error) {
	return load[Tenant](ctx, p.cache, tenantKey(slug))
}

func (p *Proxy) plan(ctx context.Context, code string) (*Plan, bool, error) {
	return load[Plan](ctx, p.cache, planKey(code))
}

// Statuses, from best to worst; the worse of a cluster's and its
// tenant's applies.
const (
	StatusActive      = "active"
	StatusPushBlocked = "push_blocked" // clusters
	StatusGrace       = "grace"        // tenants
	StatusSuspended   = "suspended"
	StatusDeleting    = "deleting"
)

var clusterStatuses = []string{StatusActive, StatusPushBlocked, StatusSuspended, StatusDeleting}
var tenantStatuses = []string{StatusActive, StatusGrace, StatusSuspended, StatusDeleting}

// statusRank orders statuses by how much they refuse.
func statusRank(s string) int {
	switch s {
	case StatusPushBlocked, StatusGrace:
		return 1
	case StatusSuspended:
		return 2
	case StatusDeleting:
		return 3
	}
	return 0
}

// clusterView is what a request needs of its cluster: the cluster, the
// status that applies and its limits.
type clusterView struct {
	cluster *Cluster
	rank    int
	limits  Limits
	plan    *Plan
}

// view gathers a cluster's tenant status and plan.
func (p *Proxy) view(ctx context.Context, c *Cluster) (*clusterView, error) {
	v := &clusterView{cluster: c, rank: statusRank(c.Status)}
	t, found, err := p.tenantBySlug(ctx, c.TenantSlug)
	if err != nil {
		return nil, err
	}
	if found {
		v.rank = max(v.rank, statusRank(t.Status))
	}
	pl, found, err := p.plan(ctx, c.Plan)
	if err != nil {
		return nil, err
	}
	if !found { // not seeded yet: the plan as seeded, or free, never unlimited
		pl = fallbackPlan(c.Plan)
	}
	v.plan = pl
	v.limits = effective(pl, c.Overrides)
	return v, nil
}

// fallbackPlan is code's seeded definition, or the free plan's.
func fallbackPlan(code string) *Plan {
	plans := seededPlans()
	for i := range plans {
		if plans[i].Code == code {
			return &plans[i]
		}
	}
	return &plans[0]
}
