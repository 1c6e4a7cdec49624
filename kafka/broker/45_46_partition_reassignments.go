package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

// Partition reassignments (KIP-455) as queen can answer them: every node
// holds a replica of every raft group, and a partition lives in one group,
// so a partition's replicas are every node, always (Metadata lists them so,
// the group's leader first). Nothing is ever being reassigned, a target
// naming every node is already reached, and any other target cannot be:
// moving a partition to another raft group needs a migration protocol
// (partition and lease ids carry their group) that is not built yet.

// Why an alteration is refused, per partition.
var (
	errReassignNotReplicated = errors.New("kafka: queen replicates every partition on every node (a partition lives in one raft group, which every node holds); its replicas are every node and cannot be chosen")
	errReassignNoReplicas    = errors.New("kafka: the target replica list is empty")
	errReassignUnknownBroker = errors.New("kafka: the target names a broker that is not registered")
	errReassignDuplicate     = errors.New("kafka: the target names a broker more than once")
	errNoReassignment        = errors.New("kafka: no reassignment is in progress (every node already holds every partition)")
)

// handleListPartitionReassignments (key 46, v0) lists the reassignments in
// progress: never any (see above), so the answer is empty for the
// partitions asked and for every partition (no topic named). Kafka leaves
// unknown topics and partitions out of the answer rather than failing
// them, and so does this. It needs admin with broker JWTs (Kafka's
// DESCRIBE on the cluster).
func (b *Broker) handleListPartitionReassignments(_ context.Context, _ *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.Topics = []kmsg.ListPartitionReassignmentsResponseTopic{}
	return resp, nil
}

// handleAlterPartitionAssignments (key 45, v0-1) answers each asked
// partition by what queen can do: a target that is, as a set, the
// partition's current replicas (every node; Metadata's live ones or every
// registered one) is accepted with nothing to move; any other target is
// INVALID_REPLICA_ASSIGNMENT with the reason (as is an empty one, one
// naming an unregistered broker or naming one twice, as in Kafka); with
// v1's allow_replication_factor_change false, a target of another size is
// INVALID_REPLICATION_FACTOR, as Kafka checks it. A cancel (null replicas)
// is NO_REASSIGNMENT_IN_PROGRESS; an unknown topic or partition
// UNKNOWN_TOPIC_OR_PARTITION. An accepted target whose first replica is
// not the partition's leader moves no leadership: a partition is led by
// its raft group's leader and the replica order is not stored; the answer
// says so in its message, and ElectLeaders moves the group to its
// preferred node. Nothing is written, so no request waits.
func (b *Broker) handleAlterPartitionAssignments(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	tenant := b.tenantOf(c)

	// Read-your-writes: topics and nodes registered through another node.
	names := make([]string, 0, len(req.Topics))
	for _, t := range req.Topics {
		if !isInternalTopic(t.Topic) {
			names = append(names, t.Topic)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, raftgroups.CatchUpWait)
	_ = b.engine.CatchUpQueuesAndNodes(cctx, tenant, names...)
	cancel()

	cur := b.currentReplicas()
	for _, t := range req.Topics {
		b.catchUpUnknown(ctx, tenant, t.Topic, len(t.Partitions), func(i int) int32 { return t.Partitions[i].Partition })
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			note, err := b.reassign(tenant, t.Topic, p, cur, req.Version >= 1 && !req.AllowReplicationFactorChange)
			rp.ErrorCode = reassignCode(err)
			if err != nil && rp.ErrorCode != kerr.UnknownServerError.Code {
				note = err.Error()
			}
			if note != "" {
				rp.ErrorMessage = &note
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// replicaSets are what a partition's replicas are: the live nodes Metadata
// lists, and every registered node (the raft members, a node down
// included).
type replicaSets struct {
	live, registered []int32 // sorted
}

// currentReplicas is every partition's replica sets, the same for all.
func (b *Broker) currentReplicas() replicaSets {
	live := brokerIDs(b.brokers())
	registered := []int32{b.cfg.NodeID}
	for _, n := range b.engine.KafkaNodes() {
		registered = append(registered, int32(n.ID))
	}
	slices.Sort(live)
	slices.Sort(registered)
	return replicaSets{live: slices.Compact(live), registered: slices.Compact(registered)}
}

// reassign answers one partition's target (see
// handleAlterPartitionAssignments): nil with an optional note when it is
// accepted, else why not. fixedFactor is v1's
// allow_replication_factor_change false.
func (b *Broker) reassign(tenant wire.ID, topic string, p kmsg.AlterPartitionAssignmentsRequestTopicPartition, cur replicaSets, fixedFactor bool) (string, error) {
	n, err := b.partitionGroup(tenant, topic, p.Partition)
	if err != nil {
		return "", err
	}
	if p.Replicas == nil {
		return "", errNoReassignment
	}
	if len(p.Replicas) == 0 {
		return "", errReassignNoReplicas
	}
	target := slices.Clone(p.Replicas)
	slices.Sort(target)
	for i, id := range target {
		if i > 0 && target[i-1] == id {
			return "", fmt.Errorf("%w: broker %d", errReassignDuplicate, id)
		}
		if _, known := slices.BinarySearch(cur.registered, id); !known {
			return "", fmt.Errorf("%w: broker %d (registered: %v)", errReassignUnknownBroker, id, cur.registered)
		}
	}
	if !slices.Equal(target, cur.live) && !slices.Equal(target, cur.registered) {
		if fixedFactor && len(target) != len(cur.live) && len(target) != len(cur.registered) {
			return "", fmt.Errorf("%w: the target has %d replicas, the partition %d, and the request does not allow changing the replication factor",
				errReplicationFactor, len(target), len(cur.live))
		}
		return "", fmt.Errorf("%w: target %v, replicas %v", errReassignNotReplicated, p.Replicas, cur.live)
	}
	leader, _, ok := b.groupLeader(n)
	if ok && p.Replicas[0] != leader {
		return fmt.Sprintf("accepted, nothing to move; the leader stays %d: a partition is led by its raft group's leader (ElectLeaders moves the group to its preferred node)", leader), nil
	}
	return "", nil
}

// reassignCode is errorCode with the answers only reassignments give.
func reassignCode(err error) int16 {
	switch {
	case errors.Is(err, errReassignNotReplicated), errors.Is(err, errReassignNoReplicas),
		errors.Is(err, errReassignUnknownBroker), errors.Is(err, errReassignDuplicate):
		return kerr.InvalidReplicaAssignment.Code
	case errors.Is(err, errNoReassignment):
		return kerr.NoReassignmentInProgress.Code
	}
	return errorCode(err)
}
