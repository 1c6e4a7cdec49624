package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
)

// A cluster's members as its admins manage them on the console: add a
// person by email with a role, change the role, remove them from the
// cluster. A person is a user of the cluster's tenant; one the console
// adds has no password and signs in with Google or GitHub under that
// email. The cluster always keeps an admin.

var (
	errLastAdmin     = newError(http.StatusConflict, "last_admin", "the cluster's last admin cannot be removed or demoted")
	errMemberUnknown = newError(http.StatusNotFound, "member_unknown", "no such member of this cluster")
	errOtherTenant   = newError(http.StatusConflict, "conflict", "this email belongs to a person of another tenant")
)

// member is a person's row in a cluster's member list.
type member struct {
	UserID string `json:"user_id"`
	Email  string `json:"email"`
	Role   string `json:"role"`
}

// addMember gives the person with email role on c, making them a user of
// c's tenant when new. Someone already a member keeps their role: the
// answer says which it is.
func (p *Proxy) addMember(ctx context.Context, c *Cluster, email, role string) (*member, error) {
	switch {
	case !strings.Contains(email, "@") || len(email) > 254 || strings.ContainsAny(email, " \t\r\n/"):
		return nil, invalid("email must be an email address")
	case !ValidRole(role):
		return nil, invalid("role must be one of %s", strings.Join(allRoles, ", "))
	}
	var t Tenant
	if found, err := p.store.get(ctx, tenantKey(c.TenantSlug), &t); err != nil {
		return nil, err
	} else if !found {
		return nil, errTenantUnknown
	}
	var r ref
	if found, err := p.store.get(ctx, userEmailKey(email), &r); err != nil {
		return nil, err
	} else if found {
		var u User
		if _, err := p.store.get(ctx, userKey(r.ID), &u); err != nil {
			return nil, err
		}
		if u.TenantID != t.ID {
			return nil, errOtherTenant
		}
	}
	u, _, err := p.store.ensureUser(ctx, "", email, &t, c.ID, role, "")
	if err != nil {
		return nil, err
	}
	return &member{u.ID, u.Email, u.Roles[c.ID]}, nil
}

// setMemberRole changes a member's role on c; "" removes them from c.
// The last admin stays.
func (p *Proxy) setMemberRole(ctx context.Context, c *Cluster, userID, role string) error {
	// Role changes on one cluster serialize on its guard row: two admins
	// demoting each other at once would otherwise each count the other
	// and leave the cluster with none.
	_, err := updateGuarded(ctx, p.store, userKey(userID), rolesGuardKey(c.ID), errMemberUnknown, func(u *User) (bool, error) {
		return p.changeRole(ctx, c, u, role)
	})
	return err
}

// rolesGuardKey is the counter every role change on cluster bumps.
func rolesGuardKey(cluster string) string { return "cluster-roles/" + cluster }

// changeRole sets u's role on c in place; false when it has it already.
func (p *Proxy) changeRole(ctx context.Context, c *Cluster, u *User, role string) (bool, error) {
	current := u.Roles[c.ID]
	if current == "" {
		return false, errMemberUnknown
	}
	if current == role {
		return false, nil
	}
	if current == RoleAdmin {
		admins := 0
		err := p.store.scan(ctx, "user/", "", func(_ string, val []byte) bool {
			var o User
			if json.Unmarshal(val, &o) == nil && o.Roles[c.ID] == RoleAdmin {
				admins++
			}
			return true
		})
		if err != nil {
			return false, err
		}
		if admins <= 1 {
			return false, errLastAdmin
		}
	}
	if role == "" {
		delete(u.Roles, c.ID)
	} else {
		u.Roles[c.ID] = role
	}
	return true, nil
}
