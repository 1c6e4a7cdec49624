package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

// Kafka's internal topics. Queen keeps committed offsets as queue positions
// and transactions in raft state, not in these logs, but clients expect to
// see them: a regex consumer (franz-go's ConsumeRegex, librdkafka's
// "^.*" subscriptions) leaves out every topic Metadata marks internal, and
// admin tools show them as such. So each tenant sees both, marked internal,
// with one partition per raft group of the tenant: partition i stands for
// the i-th raft group, whose leader coordinates the consumer groups and
// transactional ids hashed onto it (docs/placement.md), as Kafka's
// coordinators are the leaders of these topics' partitions. They hold no
// records: produce is refused as Kafka refuses it from clients, and
// ListOffsets answers 0 for both ends (docs/kafka.md).
var internalTopics = []string{"__consumer_offsets", "__transaction_state"}

// errInternalTopic refuses to create, write or delete an internal topic.
var errInternalTopic = fmt.Errorf("%w: an internal topic; queen keeps offsets and transactions outside any log", errInvalidTopic)

func isInternalTopic(name string) bool {
	for _, t := range internalTopics {
		if name == t {
			return true
		}
	}
	return false
}

// internalTopicGroups is the raft group behind each partition of an
// internal topic of tenant, by partition index.
func internalTopicGroups(e *raftgroups.Engine, tenant wire.ID) []int {
	return e.TenantGroups(tenant)
}

// internalTopicMetadata is an internal topic as Metadata lists it.
func (b *Broker) internalTopicMetadata(tenant wire.ID, name string, leaders *groupLeaders) kmsg.MetadataResponseTopic {
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic, rt.TopicID = kmsg.StringPtr(name), topicIDOf(tenant, name, 0)
	rt.IsInternal = true
	rt.Partitions = leaders.partitions(internalTopicGroups(b.engine, tenant))
	return rt
}
