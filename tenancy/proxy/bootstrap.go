package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// seedLoop seeds the plans and runs the bootstrap, retrying until the KV
// takes them (a cluster still electing its leaders cannot).
func (p *Proxy) seedLoop(ctx context.Context) {
	wait := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := p.seed(ctx)
		if err == nil {
			p.seeded.Store(true)
			return
		}
		// A KV still electing is expected at boot; anything else (a slug
		// another tenant holds) is the operator's to fix: say so, now and
		// then.
		if !errors.Is(err, ErrUnavailable) && attempt%30 == 0 {
			p.log.Warn("proxy: seeding the plans and the bootstrap failed; retrying", "err", err)
		} else {
			p.log.Debug("proxy: seeding not done yet; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// seed writes the plans, the bootstrap tenant and the operator flags.
func (p *Proxy) seed(ctx context.Context) error {
	if err := p.store.seedPlans(ctx); err != nil {
		return err
	}
	if b := p.cfg.Bootstrap; b.Tenant != "" {
		created, err := p.bootstrap(ctx, b)
		if err != nil {
			return err
		}
		p.log.Info("proxy: bootstrap tenant ready", "tenant", b.Tenant, "created", created)
	}
	if p.cfg.OperatorsSet {
		return p.applyOperators(ctx)
	}
	return nil
}

// bootstrap makes the tenant, its same-named cluster, the admin and the
// key of QUEEN_PROXY_BOOTSTRAP_*, whichever are missing; created says the
// tenant was made now.
func (p *Proxy) bootstrap(ctx context.Context, b Bootstrap) (bool, error) {
	t, created, err := p.store.ensureTenant(ctx, b.Tenant, b.Tenant)
	if err != nil {
		return false, fmt.Errorf("bootstrap tenant: %w", err)
	}
	c, _, err := p.store.ensureCluster(ctx, t, b.Tenant, b.Plan, nil)
	if err != nil {
		return false, fmt.Errorf("bootstrap cluster: %w", err)
	}
	pw, err := hashPassword(b.Password)
	if err != nil {
		return false, err
	}
	if _, _, err := p.store.ensureUser(ctx, "", b.Email, t, c.ID, RoleAdmin, pw); err != nil {
		return false, fmt.Errorf("bootstrap admin: %w", err)
	}
	if b.APIKey != "" {
		if _, _, err := p.store.ensureKey(ctx, c.ID, "bootstrap", HashKey(b.APIKey), AllScopes); err != nil {
			return false, fmt.Errorf("bootstrap key: %w", err)
		}
	}
	return created, nil
}

// applyOperators makes QUEEN_PROXY_OPERATORS the whole truth: listed
// users become operators, every other operator stops being one. A listed
// email with no user is skipped (it gets the flag once the user exists
// and the node restarts).
func (p *Proxy) applyOperators(ctx context.Context) error {
	var changed []User
	var scanErr error
	err := p.store.scan(ctx, "user/", "", func(_ string, val []byte) bool {
		var u User
		if scanErr = json.Unmarshal(val, &u); scanErr != nil {
			return false
		}
		want := slices.ContainsFunc(p.cfg.Operators, func(e string) bool { return strings.EqualFold(e, u.Email) })
		if u.Operator != want {
			u.Operator = want
			changed = append(changed, u)
		}
		return true
	})
	if err == nil {
		err = scanErr
	}
	if err != nil {
		return err
	}
	for _, u := range changed {
		if _, err := update(ctx, p.store, userKey(u.ID), errMemberUnknown, func(row *User) (bool, error) {
			return setTo(&row.Operator, u.Operator), nil
		}); err != nil && !errors.Is(err, errMemberUnknown) {
			return err
		}
		p.log.Info("proxy: operator flag", "email", u.Email, "operator", u.Operator)
	}
	return nil
}
