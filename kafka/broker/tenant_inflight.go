package broker

import (
	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// DefaultTenantMaxInflightBytes bounds one tenant's request bytes in
// flight on a node (QUEEN_KAFKA_TENANT_MAX_INFLIGHT_BYTES).
const DefaultTenantMaxInflightBytes = 64 << 20

// tenantShares makes each tenant a share of the listener's request budget
// (kafka.Config.ShareOf): the connections of one tenant hold at most
// TenantMaxInflightBytes of request frames on the node together, so one
// tenant's producers cannot hold the whole node-wide budget while raft
// commits, as the HTTP door bounds each tenant's push items. A tenant over
// its share is not read further until its requests are answered, as
// Kafka mutes a channel: its clients wait and nothing is refused. (Refusing
// with NOT_ENOUGH_REPLICAS and a throttle, as before, halved a tenant's
// produce throughput.) The default tenant (no tenancy) is the whole node
// and has no share.
func tenantShares(cfg *Config) {
	cfg.Listener.MaxBufferedRequestBytesPerShare = cfg.TenantMaxInflightBytes
	cfg.Listener.ShareOf = func(p kafka.Principal) string {
		id, ok := p.Identity.(Identity)
		if !ok || id.Tenant == wire.DefaultTenant {
			return ""
		}
		return id.Tenant.String()
	}
}
