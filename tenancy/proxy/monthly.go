package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// The monthly message quota (monthly_msgs_quota, unset on every seeded
// plan): once a cluster's pushes this calendar month (UTC) reach it, its
// pushes answer 403 monthly_quota_exceeded, in shadow mode too. The count
// is the metered push messages of every node, read from the usage rows in
// the background at most every monthlyTTL per cluster with a quota.

const monthlyTTL = 30 * time.Second

var errMonthlyQuota = newError(http.StatusForbidden, "monthly_quota_exceeded", "the cluster pushed as many messages this month as its plan allows")

func (p *Proxy) overMonthly(c *Cluster, lim Limits, now time.Time) bool {
	return p.overMeasured("monthly", c, lim[LimitMonthlyMsgsQuota], monthlyTTL, now, p.monthMessages)
}

// monthMessages adds up the push messages of c's usage rows this month.
func (p *Proxy) monthMessages(ctx context.Context, c *Cluster) (uint64, error) {
	prefix := usagePrefix(c.ID)
	month := time.Now().UTC().Format("2006-01")
	var total uint64
	err := p.store.scan(ctx, prefix+month, "", func(key string, val []byte) bool {
		if !strings.Contains(key[len(prefix):], "/push/") {
			return true
		}
		var r meterRow
		if json.Unmarshal(val, &r) == nil {
			total += uint64(r.Msgs)
		}
		return true
	})
	return total, err
}
