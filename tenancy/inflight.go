package tenancy

import (
	"sync"

	"github.com/queen-mq/queen/wire"
)

// Inflight bounds what each tenant has in flight on a node (push items,
// produce bytes), so one tenant's requests cannot hold a node-wide budget
// while raft commits and stall every other tenant. A tenant holding
// nothing is always admitted, so a single request larger than the limit
// is not refused for ever. Idle tenants cost nothing.
type Inflight struct {
	limit int
	mu    sync.Mutex
	used  map[wire.ID]int
}

// NewInflight returns a bound of limit per tenant.
func NewInflight(limit int) *Inflight {
	return &Inflight{limit: limit, used: map[wire.ID]int{}}
}

// Take reserves n for tenant and returns the function that gives it back,
// or false when the tenant already holds some and n would pass the limit.
func (f *Inflight) Take(tenant wire.ID, n int) (release func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	used := f.used[tenant]
	if used > 0 && used+n > f.limit {
		return nil, false
	}
	f.used[tenant] = used + n
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.used[tenant] -= n; f.used[tenant] <= 0 {
			delete(f.used, tenant)
		}
	}, true
}
