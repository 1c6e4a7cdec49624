package broker

import (
	"errors"
	"fmt"

	"github.com/queen-mq/queen/wire"
)

// Partition caps: every partition of a tenant's topics is listed by a
// Metadata for all topics and walked by the caches, so how many one
// request may create and how many a tenant may hold are bounded (a single
// CreateTopics of 1,000,000 partitions made every Metadata take 2 s).
// QUEEN_KAFKA_MAX_PARTITIONS stays the per-topic bound.
const (
	DefaultMaxPartitionsPerRequest = 10000
	DefaultMaxTenantPartitions     = 100000
	DefaultMetadataMaxPartitions   = 100000
)

// A queue created over HTTP is not bound by those caps: one partition per
// customer makes millions. Kafka clients cannot use such a topic (every
// client keeps per-partition state and refreshes metadata every few
// minutes; a million partitions is a 30 MB answer each time), so a topic
// with more than MetadataMaxPartitions partitions is shown to Kafka with
// POLICY_VIOLATION and no partitions instead of being listed whole; HTTP
// consumers pop it with partitions=N. The default equals the tenant cap,
// so no topic Kafka could create is hidden by it.

// overMetadataCap reports whether a topic of n partitions is too large to
// show Kafka clients.
func (b *Broker) overMetadataCap(n int) bool { return n > b.cfg.MetadataMaxPartitions }

// errPartitionBudget refuses partitions over a cap: POLICY_VIOLATION, which
// clients do not retry (THROTTLING_QUOTA_EXCEEDED would be retried, and a
// cap does not lift with time).
var errPartitionBudget = errors.New("kafka: partition cap")

// checkNewPartitions refuses adding added partitions to the tenant's Kafka
// topics when that goes over either cap; inRequest are those the same
// request has already added (a Metadata auto-creating topic after topic),
// which count toward the request's cap and are already in the tenant's.
// The tenant count is read before the proposals, so concurrent requests
// may together pass the tenant cap by at most one request's worth.
func (b *Broker) checkNewPartitions(tenant wire.ID, inRequest, added int) error {
	if inRequest+added > b.cfg.MaxPartitionsPerRequest {
		return fmt.Errorf("%w: one request may create at most %d partitions (QUEEN_KAFKA_MAX_PARTITIONS_PER_REQUEST), this one %d",
			errPartitionBudget, b.cfg.MaxPartitionsPerRequest, inRequest+added)
	}
	held := 0
	for _, t := range b.engine.KafkaTopics(tenant) {
		if t.Kafka {
			held += t.Partitions
		}
	}
	if held+added > b.cfg.MaxTenantPartitions {
		return fmt.Errorf("%w: the tenant's topics hold %d partitions, at most %d (QUEEN_KAFKA_MAX_TENANT_PARTITIONS)",
			errPartitionBudget, held, b.cfg.MaxTenantPartitions)
	}
	return nil
}
