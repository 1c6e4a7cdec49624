package broker

import (
	"fmt"
	"sync"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

// DefaultTenantMaxInflightBytes bounds one tenant's produce record bytes in
// flight on a node (QUEEN_KAFKA_TENANT_MAX_INFLIGHT_BYTES).
const DefaultTenantMaxInflightBytes = 64 << 20

// errTenantBusy refuses a produce over the tenant's in-flight bytes:
// NOT_ENOUGH_REPLICAS as for an overloaded group (retriable, nothing was
// written).
var errTenantBusy = fmt.Errorf("%w: the tenant's produce requests in flight hold QUEEN_KAFKA_TENANT_MAX_INFLIGHT_BYTES; retry",
	raftgroups.ErrOverloaded)

// produceThrottleMs is the throttle time a refused produce carries, so
// clients back off rather than resend at once.
const produceThrottleMs = 100

// tenantInflight bounds the produce record bytes each tenant has in flight
// (decoded, proposed, waiting for raft) on this node. The listener's request
// budget bounds all connections together; in tenancy mode one tenant's
// producers could hold all of it while raft commits and stall every other
// tenant, as the HTTP door bounds each tenant's in-flight push items. The
// default tenant (no tenancy) is not bounded here: it is the whole node.
type tenantInflight struct {
	limit int
	mu    sync.Mutex
	held  map[wire.ID]int
}

func newTenantInflight(limit int) *tenantInflight {
	return &tenantInflight{limit: limit, held: map[wire.ID]int{}}
}

// acquire takes n bytes for tenant, or reports false when that would pass
// the limit. A tenant holding nothing is always admitted, so a request
// larger than the limit alone is not refused for ever.
func (t *tenantInflight) acquire(tenant wire.ID, n int) bool {
	if tenant == wire.DefaultTenant {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	held := t.held[tenant]
	if held > 0 && held+n > t.limit {
		return false
	}
	t.held[tenant] = held + n
	return true
}

func (t *tenantInflight) release(tenant wire.ID, n int) {
	if tenant == wire.DefaultTenant {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if left := t.held[tenant] - n; left > 0 {
		t.held[tenant] = left
	} else {
		delete(t.held, tenant)
	}
}
