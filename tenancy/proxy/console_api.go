package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// The console's JSON API for one cluster, /api/console/clusters/:slug[/…]:
// what the console pages show a signed-in person with a role there (an
// operator everywhere). Members are shown to admins only.

var errNoRole = newError(http.StatusForbidden, "forbidden", "no role on this cluster")

// consoleCluster serves /api/console/clusters/:slug and below.
func (p *Proxy) consoleCluster(ctx *fasthttp.RequestCtx, method string, parts []string) {
	s, err := p.consoleSession(ctx)
	if err != nil {
		writeError(ctx, err)
		return
	}
	c, found, err := p.clusterBySlug(ctx, parts[0])
	if err != nil {
		writeError(ctx, err)
		return
	}
	role := ""
	if found {
		role = s.user.Roles[c.ID]
		if s.operator {
			role = RoleAdmin
		}
	}
	if role == "" { // a cluster one has no role on is not shown to exist
		writeError(ctx, errNoRole)
		return
	}
	if method != "GET" && method != "HEAD" {
		p.consoleChange(ctx, method, c, role, parts[1:])
		return
	}
	sub := strings.Join(parts[1:], "/")
	var out any
	switch sub {
	case "":
		out, err = p.consoleOverview(ctx, c, role)
	case "usage":
		if days := ctx.QueryArgs().GetUintOrZero("days"); days > 0 {
			var rows []usageDay
			rows, err = p.store.usageDays(ctx, c.ID, time.Now().AddDate(0, 0, -min(days, 400)))
			out = map[string]any{"days": rows}
			break
		}
		var rows []usageMinute
		rows, err = p.store.usage(ctx, c.ID, time.Now().Add(-time.Hour))
		out = map[string]any{"minutes": rows}
	case "queues":
		tenant, terr := p.tenantOf(c)
		if terr != nil {
			writeError(ctx, terr)
			return
		}
		// The broker's list pages; the console walks it by the same cursor.
		q := fasthttp.AcquireArgs()
		defer fasthttp.ReleaseArgs(q)
		for _, name := range []string{"limit", "cursor"} {
			if v := ctx.QueryArgs().Peek(name); len(v) > 0 {
				q.SetBytesV(name, v)
			}
		}
		// As the session: with ACLs on, the page lists what its user may
		// DESCRIBE, as the dashboard's own listing does.
		status, body := p.brokerCallAs(ConsolePrincipal(s.user.ID), "GET", "/api/v1/resources/queues?"+q.String(), tenant, nil)
		ctx.SetStatusCode(status)
		ctx.SetContentType("application/json")
		ctx.SetBody(body)
		return
	case "keys":
		out, err = p.clusterKeys(ctx, c.ID)
	case "members":
		if role != RoleAdmin {
			writeError(ctx, errNotPermitted)
			return
		}
		out, err = p.clusterMembers(ctx, c.ID)
	default:
		writeError(ctx, errNotFound)
		return
	}
	if err != nil {
		writeError(ctx, err)
		return
	}
	writeJSON(ctx, http.StatusOK, out)
}

// consoleOverview is a cluster's plan, limits and month-to-date usage.
func (p *Proxy) consoleOverview(ctx context.Context, c *Cluster, role string) (any, error) {
	v, err := p.view(ctx, c)
	if err != nil {
		return nil, err
	}
	month, err := p.monthToDate(ctx, c.ID, time.Now())
	if err != nil {
		return nil, err
	}
	return map[string]any{"cluster": map[string]string{"id": c.ID, "slug": c.Slug, "plan_code": c.Plan, "status": c.Status},
		"role": role, "limits": v.limits, "features": v.plan.Features, "month_to_date": month}, nil
}

// monthToDate sums a cluster's usage this calendar month (UTC) by class:
// the day rows of the days before yesterday, and the minute rows of
// yesterday and today, which the hourly rollup may not have caught up
// with. So the overview, which the console polls, reads at most two days
// of minutes whatever the date, not a month of them.
func (p *Proxy) monthToDate(ctx context.Context, cluster string, now time.Time) (map[string]*meterRow, error) {
	now = now.UTC()
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	minutesFrom := time.Date(now.Year(), now.Month(), now.Day()-1, 0, 0, 0, 0, time.UTC)
	if minutesFrom.Before(monthStart) { // the 1st: this month has no yesterday
		minutesFrom = monthStart
	}
	out := map[string]*meterRow{}
	add := func(op string, r meterRow) {
		if out[op] == nil {
			out[op] = &meterRow{}
		}
		out[op].add(r)
	}
	if monthStart.Before(minutesFrom) {
		days, err := p.store.usageDays(ctx, cluster, monthStart)
		if err != nil {
			return nil, err
		}
		for _, d := range days {
			if d.Day < minutesFrom.Format(time.DateOnly) {
				add(d.Op, d.meterRow)
			}
		}
	}
	minutes, err := p.store.usage(ctx, cluster, minutesFrom)
	if err != nil {
		return nil, err
	}
	for _, m := range minutes {
		if m.Minute <= minuteOf(now) {
			add(m.Op, m.meterRow)
		}
	}
	return out, nil
}

// clusterKeys lists a cluster's keys, never their hashes.
func (p *Proxy) clusterKeys(ctx context.Context, cluster string) (any, error) {
	type keyView struct {
		ID      string   `json:"id"`
		Name    string   `json:"name"`
		Scopes  []string `json:"scopes"`
		Revoked bool     `json:"revoked"`
	}
	out := []keyView{}
	err := p.store.scan(ctx, "key/", "", func(_ string, val []byte) bool {
		var k APIKey
		if json.Unmarshal(val, &k) == nil && k.ClusterID == cluster {
			out = append(out, keyView{k.ID, k.Name, k.Scopes, k.Revoked})
		}
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return map[string]any{"keys": out}, err
}

// clusterMembers lists the people with a role on a cluster.
func (p *Proxy) clusterMembers(ctx context.Context, cluster string) (any, error) {
	out := []member{}
	err := p.store.scan(ctx, "user/", "", func(_ string, val []byte) bool {
		var u User
		if json.Unmarshal(val, &u) == nil && u.Roles[cluster] != "" {
			out = append(out, member{u.ID, u.Email, u.Roles[cluster]})
		}
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Email < out[j].Email })
	return map[string]any{"members": out}, err
}
