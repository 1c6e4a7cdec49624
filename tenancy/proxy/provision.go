package proxy

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"
	"golang.org/x/crypto/bcrypt"
)

// Creating the proxy's rows. Every ensure* call is idempotent: a row that
// exists is returned as it is (created false), and two nodes racing to
// create one agree on the same row, since creation is a put-if-absent on
// the row's unique key and the loser rereads.

var slugPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// validSlug reports whether s is a DNS label (a-z, 0-9, '-', at most 63).
func validSlug(s string) bool { return slugPattern.MatchString(s) }

func newID() string { return uuid.NewString() }

// ensureTenant returns the tenant slug, creating it if absent.
func (s *kvStore) ensureTenant(ctx context.Context, slug, name string) (*Tenant, bool, error) {
	for range 3 {
		var t Tenant
		found, err := s.get(ctx, tenantKey(slug), &t)
		if err != nil || found {
			return &t, false, err
		}
		t = Tenant{ID: newID(), Slug: slug, Name: name, Status: StatusActive}
		ok, err := s.apply(ctx, putOp(tenantKey(slug), t, true))
		if err != nil || ok {
			return &t, ok, err
		}
	}
	return nil, false, fmt.Errorf("%w: tenant %s keeps changing", ErrConflict, slug)
}

// defaultPlan is the plan a provisioning request without one gets.
const defaultPlan = "free"

// ensureTenantCluster is the step every provisioning route shares: the
// plan (defaultPlan when empty) must exist, the tenant is found or created
// and must not be on its way out, and its cluster is found or created.
func (s *kvStore) ensureTenantCluster(ctx context.Context, tenantSlug, tenantName, clusterSlug, plan string,
	overrides Limits) (t *Tenant, c *Cluster, tCreated, cCreated bool, err error) {
	if plan == "" {
		plan = defaultPlan
	}
	if err = s.checkPlan(ctx, plan); err != nil {
		return nil, nil, false, false, err
	}
	if t, tCreated, err = s.ensureTenant(ctx, tenantSlug, tenantName); err != nil {
		return nil, nil, false, false, err
	}
	if t.Status == StatusDeleting {
		return nil, nil, false, false, errTenantDeleting
	}
	c, cCreated, err = s.ensureCluster(ctx, t, clusterSlug, plan, overrides)
	return t, c, tCreated, cCreated, err
}

// ensureCluster returns the cluster slug of tenant t, creating it on plan
// with overrides if absent. A slug another tenant holds is a conflict.
func (s *kvStore) ensureCluster(ctx context.Context, t *Tenant, slug, plan string, overrides Limits) (*Cluster, bool, error) {
	for range 3 {
		var r ref
		found, err := s.get(ctx, clusterSlugKey(slug), &r)
		if err != nil {
			return nil, false, err
		}
		if found {
			var c Cluster
			if found, err = s.get(ctx, clusterKey(r.ID), &c); err != nil || !found {
				return nil, false, fmt.Errorf("%w: cluster %s has an index row and no cluster row", ErrConflict, slug)
			}
			if c.TenantID != t.ID {
				return nil, false, fmt.Errorf("%w: cluster %s belongs to another tenant", ErrConflict, slug)
			}
			return &c, false, nil
		}
		if overrides == nil {
			overrides = Limits{}
		}
		c := Cluster{ID: newID(), Slug: slug, TenantID: t.ID, TenantSlug: t.Slug, BrokerTenant: uuid.NewString(),
			Plan: plan, Status: StatusActive, Overrides: overrides}
		ok, err := s.apply(ctx, putOp(clusterSlugKey(slug), ref{ID: c.ID}, true), putOp(clusterKey(c.ID), c, false))
		if err != nil || ok {
			return &c, ok, err
		}
	}
	return nil, false, fmt.Errorf("%w: cluster %s keeps changing", ErrConflict, slug)
}

// errUserGone: a user row deleted between a read and an update of it.
var errUserGone = errors.New("proxy: the user row is gone")

// ensureUser returns the user with id (or, id empty, with email),
// creating it if absent, and gives it role on cluster if it has none
// there. passwordHash is set only on creation.
func (s *kvStore) ensureUser(ctx context.Context, id, email string, t *Tenant, cluster, role, passwordHash string) (*User, bool, error) {
	email = strings.ToLower(email)
	for range 3 {
		var byEmail ref
		emailFound, err := s.get(ctx, userEmailKey(email), &byEmail)
		if err != nil {
			return nil, false, err
		}
		if id == "" && emailFound {
			id = byEmail.ID
		}
		if emailFound && byEmail.ID != id {
			return nil, false, fmt.Errorf("%w: email %s belongs to another user", ErrConflict, email)
		}
		var u User
		found := false
		if id != "" {
			if found, err = s.get(ctx, userKey(id), &u); err != nil {
				return nil, false, err
			}
		}
		if found {
			if u.Email != email {
				return nil, false, fmt.Errorf("%w: user %s has another email", ErrConflict, id)
			}
			if _, has := u.Roles[cluster]; has || cluster == "" {
				return &u, false, nil
			}
			nu, err := update(ctx, s, userKey(u.ID), errUserGone, func(row *User) (bool, error) {
				if _, has := row.Roles[cluster]; has {
					return false, nil
				}
				if row.Roles == nil {
					row.Roles = map[string]string{}
				}
				row.Roles[cluster] = role
				return true, nil
			})
			if errors.Is(err, errUserGone) {
				continue // deleted meanwhile: made again below on the next pass
			}
			return nu, false, err
		}
		if id == "" {
			id = newID()
		}
		u = User{ID: id, TenantID: t.ID, Email: email, PasswordHash: passwordHash, Roles: map[string]string{}}
		if cluster != "" {
			u.Roles[cluster] = role
		}
		ok, err := s.apply(ctx, putOp(userKey(id), u, true), putOp(userEmailKey(email), ref{ID: id}, true))
		if err != nil || ok {
			return &u, ok, err
		}
	}
	return nil, false, fmt.Errorf("%w: user %s keeps changing", ErrConflict, email)
}

// ensureKey returns the key with hash, creating it on cluster if absent.
// A hash bound to another cluster is a conflict.
func (s *kvStore) ensureKey(ctx context.Context, cluster, name, hash string, scopes []string) (*APIKey, bool, error) {
	for range 3 {
		var k APIKey
		found, err := s.get(ctx, apiKeyKey(hash), &k)
		if err != nil {
			return nil, false, err
		}
		if found {
			if k.ClusterID != cluster {
				return nil, false, fmt.Errorf("%w: the key is bound to another cluster", ErrConflict)
			}
			return &k, false, nil
		}
		k = APIKey{ID: newID(), ClusterID: cluster, Name: name, Hash: hash, Scopes: scopes}
		ok, err := s.apply(ctx, putOp(apiKeyKey(hash), k, true), putOp(apiKeyIDKey(k.ID), ref{Hash: hash}, false))
		if err != nil || ok {
			return &k, ok, err
		}
	}
	return nil, false, fmt.Errorf("%w: key keeps changing", ErrConflict)
}

// seedPlans writes the four plans that are missing; existing plans are
// left as they are.
func (s *kvStore) seedPlans(ctx context.Context) error {
	var have Plan
	for _, p := range seededPlans() {
		found, err := s.get(ctx, planKey(p.Code), &have)
		if err != nil {
			return err
		}
		if found {
			continue
		}
		op := putOp(planKey(p.Code), p, true)
		op.Required = false // another node may have written it meanwhile
		if _, err := s.apply(ctx, op); err != nil {
			return err
		}
	}
	return nil
}

// checkPlan refuses a plan code that names no plan (400 invalid).
func (s *kvStore) checkPlan(ctx context.Context, code string) error {
	var p Plan
	found, err := s.get(ctx, planKey(code), &p)
	if err != nil || found {
		return err
	}
	if slices.ContainsFunc(seededPlans(), func(p Plan) bool { return p.Code == code }) {
		return nil
	}
	return invalid("no plan %q", code)
}

// hashPassword hashes a password for local sign-in.
func hashPassword(pw string) (string, error) {
	if pw == "" {
		return "", nil
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
	return string(h), err
}
