package proxy

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// Usage minutes are rolled into days every hour (spec §6.8): each
// cluster's minute rows of yesterday and today (UTC) are summed per class
// into usage-day/<cluster>/<day>/<op>, which outlive the minutes. The
// node leading the system tenant's KV group does it; the rows are
// recomputed whole, so a repeat or a change of leader counts nothing
// twice.

const (
	rollupEvery = time.Hour
	// dayRowTTL keeps day rows about 13 months.
	dayRowTTL = 400 * 24 * time.Hour
)

func dayPrefix(cluster string) string { return "usage-day/" + cluster + "/" }

// rollupLoop rolls up every hour until ctx ends.
func (p *Proxy) rollupLoop(ctx context.Context) {
	every(ctx, rollupEvery, func(ctx context.Context) {
		if !p.engine.Leads(p.engine.KVGroup(tenancy.SystemTenant)) {
			return
		}
		if err := p.rollup(ctx, time.Now()); err != nil {
			p.log.Warn("proxy: usage rollup failed", "err", err)
		}
	})
}

// rollup writes the day rows of yesterday and today for every cluster.
func (p *Proxy) rollup(ctx context.Context, now time.Time) error {
	clusters, err := p.store.tenantClusters(ctx, "")
	if err != nil {
		return err
	}
	for _, c := range clusters {
		for _, day := range []time.Time{now.UTC().AddDate(0, 0, -1), now.UTC()} {
			if err := p.rollupDay(ctx, c.ID, day.Format(time.DateOnly)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *Proxy) rollupDay(ctx context.Context, cluster, day string) error {
	prefix := usagePrefix(cluster)
	sums := map[string]*meterRow{}
	err := p.store.scan(ctx, prefix+day, "", func(key string, val []byte) bool {
		parts := strings.Split(strings.TrimPrefix(key, prefix), "/")
		var r meterRow
		if len(parts) != 3 || json.Unmarshal(val, &r) != nil {
			return true
		}
		if sums[parts[1]] == nil {
			sums[parts[1]] = &meterRow{}
		}
		sums[parts[1]].add(r)
		return true
	})
	if err != nil || len(sums) == 0 {
		return err
	}
	ops := make([]wire.KVOp, 0, len(sums))
	for op, r := range sums {
		o := putOp(dayPrefix(cluster)+day+"/"+op, r, false)
		o.TTLSec = uint32(dayRowTTL / time.Second)
		ops = append(ops, o)
	}
	_, err = p.store.applyQuiet(ctx, ops...)
	return err
}

// usageDay is one row of the usage route's days.
type usageDay struct {
	Day string `json:"day"`
	Op  string `json:"op"`
	meterRow
}

// usageDays reads a cluster's day rows from since on.
func (s *kvStore) usageDays(ctx context.Context, cluster string, since time.Time) ([]usageDay, error) {
	prefix := dayPrefix(cluster)
	var out []usageDay
	err := s.scan(ctx, prefix, prefix+since.UTC().Format(time.DateOnly), func(key string, val []byte) bool {
		parts := strings.Split(strings.TrimPrefix(key, prefix), "/")
		var r meterRow
		if len(parts) == 2 && json.Unmarshal(val, &r) == nil {
			out = append(out, usageDay{Day: parts[0], Op: parts[1], meterRow: r})
		}
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Day != out[j].Day {
			return out[i].Day < out[j].Day
		}
		return out[i].Op < out[j].Op
	})
	return out, err
}
