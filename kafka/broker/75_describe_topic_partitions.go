package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// maxDescribePartitions caps one DescribeTopicPartitions answer, as
// Kafka's max.request.partition.size.limit (default 2000) does: a client
// asking for more, or for 0 or less, gets at most this many and a cursor.
const maxDescribePartitions = 2000

// handleDescribeTopicPartitions (key 75, v0, KIP-966) describes topics
// page by page: the topics named (every topic of the tenant, internal
// ones too, when none is named) in name order, from the cursor's topic
// and partition on, at most response_partition_limit partitions (capped at
// maxDescribePartitions); when partitions are left, next_cursor names the
// first of them. Partitions are what Metadata says of them (leader, epoch,
// every node as replica and in sync); queen has no eligible leader
// replicas (KIP-966's ELR), so those lists are empty. Unlike Metadata,
// an unknown topic is never created, and a topic over
// QUEEN_KAFKA_METADATA_MAX_PARTITIONS is described all the same: paging is
// what bounds the answer here. A cursor naming a topic not asked for is
// INVALID_REQUEST for every topic, as in Kafka.
func (b *Broker) handleDescribeTopicPartitions(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	tenant := b.tenantOf(c)

	var names []string
	if len(req.Topics) == 0 {
		_ = b.catchUpTenant(ctx, tenant) // read-your-writes; else this node's replicas answer
		names = append(names, internalTopics...)
		for _, t := range b.engine.KafkaTopics(tenant) {
			if !isInternalTopic(t.Name) {
				names = append(names, t.Name)
			}
		}
	} else {
		for _, t := range req.Topics {
			names = append(names, t.Topic)
		}
		_ = b.catchUpTopics(ctx, tenant, names...)
	}
	slices.Sort(names)
	names = slices.Compact(names)

	first := int32(0)
	if cur := req.Cursor; cur != nil {
		if len(req.Topics) > 0 && !slices.Contains(names, cur.Topic) {
			for _, name := range names {
				rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
				rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), kerr.InvalidRequest.Code
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil
		}
		i, _ := slices.BinarySearch(names, cur.Topic)
		names = names[i:]
		first = max(cur.Partition, 0)
	}

	left := req.ResponsePartitionLimit
	if left <= 0 || left > maxDescribePartitions {
		left = maxDescribePartitions
	}
	leaders := groupLeaders{b: b, replicas: brokerIDs(b.brokers())}
	for i, name := range names {
		if i > 0 {
			first = 0
		}
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		groups, bases, ok := b.topicGroups(tenant, name, &rt)
		if !ok {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if left == 0 {
			// The page is full with this topic's partitions still to come.
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: first}
			break
		}
		if int(first) < len(groups) {
			end := min(len(groups), int(first)+int(left))
			var bs []uint32
			if bases != nil {
				bs = bases[first:end]
			}
			for j, p := range leaders.partitionsAt(groups[first:end], bs) {
				rt.Partitions = append(rt.Partitions, describedPartition(first+int32(j), p))
			}
			left -= int32(end - int(first))
			if end < len(groups) {
				resp.Topics = append(resp.Topics, rt)
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: int32(end)}
				break
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// topicGroups is the raft group of each partition of topic name (-1 for
// one that no longer exists), filling rt's id and internal mark; false
// when the tenant has no such topic.
func (b *Broker) topicGroups(tenant wire.ID, name string, rt *kmsg.DescribeTopicPartitionsResponseTopic) ([]int, []uint32, bool) {
	if isInternalTopic(name) {
		rt.TopicID, rt.IsInternal = topicIDOf(tenant, name, 0), true
		return internalTopicGroups(b.engine, tenant), nil, true
	}
	t, ok := b.engine.KafkaTopic(tenant, name)
	if !ok {
		return nil, nil, false
	}
	rt.TopicID = topicID(tenant, t)
	groups, bases := partitionGroups(b.engine.Dir(tenant, t.Name, 0, t.Partitions), t)
	return groups, bases, true
}

// partitionGroups is the raft group of each of t's partitions, by index,
// from its directory entries, -1 where none is (the topic was deleted
// since it was listed, or an HTTP queue's partition was removed as idle:
// docs/kafka.md), and their leader epoch bases (nil when none moved).
func partitionGroups(dir []wire.DirEntry, t storage.Topic) ([]int, []uint32) {
	groups := make([]int, t.Partitions)
	for i := range groups {
		groups[i] = -1
	}
	var bases []uint32
	for _, d := range dir {
		if int(d.Index) < len(groups) {
			groups[d.Index] = int(d.Group)
			if d.EpochBase > 0 {
				if bases == nil {
					bases = make([]uint32, len(groups))
				}
				bases[d.Index] = d.EpochBase
			}
		}
	}
	return groups, bases
}

// describedPartition is Metadata's partition p as partition index of a
// DescribeTopicPartitions answer.
func describedPartition(index int32, p kmsg.MetadataResponseTopicPartition) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	dp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
	dp.ErrorCode, dp.Partition = p.ErrorCode, index
	dp.LeaderID, dp.LeaderEpoch = p.Leader, p.LeaderEpoch
	dp.Replicas, dp.ISR = p.Replicas, p.ISR
	dp.EligibleLeaderReplicas, dp.LastKnownELR, dp.OfflineReplicas = []int32{}, []int32{}, []int32{}
	return dp
}
