package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

// Read-your-writes across nodes (raftgroups/catchup.go, docs/decisions.md):
// a topic created, grown, deleted or reconfigured through one node is seen
// by the next request through any other. Metadata and admin requests catch
// this node up on the groups they read before reading; produce, fetch and
// the other partition requests catch up only for a partition they do not
// find, before answering UNKNOWN_TOPIC_OR_PARTITION.

// catchUpTopics makes this node's replicas of topics' homes current, within
// raftgroups.CatchUpWait.
func (b *Broker) catchUpTopics(ctx context.Context, tenant wire.ID, topics ...string) error {
	ctx, cancel := context.WithTimeout(ctx, raftgroups.CatchUpWait)
	defer cancel()
	return b.engine.CatchUpQueues(ctx, tenant, topics...)
}

// catchUpKV makes this node's replica of tenant's KV group current (group
// configs live there), within raftgroups.CatchUpWait.
func (b *Broker) catchUpKV(ctx context.Context, tenant wire.ID) error {
	ctx, cancel := context.WithTimeout(ctx, raftgroups.CatchUpWait)
	defer cancel()
	return b.engine.Barrier(ctx, b.engine.KVGroup(tenant))
}

// catchUpTenant makes this node's replicas of every group holding tenant's
// topics current, and the node registry's, within raftgroups.CatchUpWait.
func (b *Broker) catchUpTenant(ctx context.Context, tenant wire.ID) error {
	ctx, cancel := context.WithTimeout(ctx, raftgroups.CatchUpWait)
	defer cancel()
	return b.engine.CatchUpTenant(ctx, tenant)
}

// catchUpMetadata makes this node's replicas of what a Metadata request
// lists current: every group of the tenant when it lists every topic (or
// names one by id), else the homes of the topics it names; and group 0,
// which holds the brokers' addresses.
func (b *Broker) catchUpMetadata(ctx context.Context, tenant wire.ID, req *kmsg.MetadataRequest) error {
	names := make([]string, 0, len(req.Topics))
	for _, t := range req.Topics {
		if t.Topic == nil {
			return b.catchUpTenant(ctx, tenant)
		}
		names = append(names, *t.Topic)
	}
	if req.Topics == nil {
		return b.catchUpTenant(ctx, tenant)
	}
	ctx, cancel := context.WithTimeout(ctx, raftgroups.CatchUpWait)
	defer cancel()
	return b.engine.CatchUpQueuesAndNodes(ctx, tenant, names...)
}

// catchUpStoredGroups makes this node's replicas of every group of the
// tenant current, within raftgroups.CatchUpWait: a consumer group is known
// by its positions, each in the raft group of its partition, committed
// through whichever node. Past the wait the client hears
// COORDINATOR_LOAD_IN_PROGRESS and asks again.
func (b *Broker) catchUpStoredGroups(ctx context.Context, tenant wire.ID) *kerr.Error {
	ctx, cancel := context.WithTimeout(ctx, raftgroups.CatchUpWait)
	defer cancel()
	if err := b.engine.BarrierGroups(ctx, b.engine.TenantGroups(tenant)); err != nil {
		return kerr.CoordinatorLoadInProgress
	}
	return nil
}

// catchUpUnknown catches this node up on topic when one of the n
// partitions partition(i) names is not known here, so the handler that
// looks them up next finds what another node has just created. Known
// partitions (the common case) cost a cache lookup each. A catch-up that
// fails leaves the answer to this node's replica: the handler then says
// what it holds.
func (b *Broker) catchUpUnknown(ctx context.Context, tenant wire.ID, topic string, n int, partition func(int) int32) {
	if isInternalTopic(topic) {
		return
	}
	var missing []uint32
	for i := range n {
		if p := partition(i); p >= 0 {
			if _, ok := b.partition(tenant, topic, p); !ok {
				missing = append(missing, uint32(p))
			}
		}
	}
	if len(missing) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, raftgroups.CatchUpWait)
	defer cancel()
	_ = b.engine.CatchUpPartitions(ctx, tenant, topic, missing...)
}
