package broker

import (
	"fmt"

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

// takeProduceBytes reserves a produce request's n record bytes against its
// tenant's in-flight bound (QUEEN_KAFKA_TENANT_MAX_INFLIGHT_BYTES): the
// listener's request budget bounds all connections together, and in
// tenancy mode one tenant's producers could hold all of it while raft
// commits, as the HTTP door bounds each tenant's push items. The default
// tenant (no tenancy) is not bounded here: it is the whole node.
func (b *Broker) takeProduceBytes(tenant wire.ID, n int) (release func(), ok bool) {
	if tenant == wire.DefaultTenant {
		return func() {}, true
	}
	return b.inflight.Take(tenant, n)
}
