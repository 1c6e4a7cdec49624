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

// Partition reassignments (KIP-455) as queen can carry them out: every
// node holds a replica of every raft group and a partition lives in one
// group, so a partition's replicas are every node, always, and a replica
// list cannot choose nodes; it chooses leadership. A partition is led by
// its group's leader, preferred on node (N mod cluster size)+1
// (docs/placement.md), so a target whose first replica is broker R moves
// the partition to a group of the tenant's that prefers R, the one holding
// the fewest partitions of the topic (the lowest on a tie), through the
// online move of raftgroups/move.go; a partition whose group already
// prefers R stays. ListPartitionReassignments lists the moves under way.

// Why an alteration is refused, per partition.
var (
	errReassignNoReplicas    = errors.New("kafka: the target replica list is empty")
	errReassignUnknownBroker = errors.New("kafka: the target names a broker that is not registered")
	errReassignDuplicate     = errors.New("kafka: the target names a broker more than once")
	errReassignNoGroup       = errors.New("kafka: no raft group of the tenant prefers the target's first broker as its leader")
	errNoReassignment        = errors.New("kafka: no reassignment is in progress for the partition")
)

// handleListPartitionReassignments (key 46, v0) lists the moves in
// progress, of the partitions asked or of every topic when none is named.
// A moving partition's replicas are every registered node (they stay so);
// adding names the target group's preferred leader and removing the
// source group's, the leadership the move carries (empty when both prefer
// the same node, a move asked over HTTP). Unknown topics and partitions
// are left out, as Kafka does. It needs admin with broker JWTs (Kafka's
// DESCRIBE on the cluster).
func (b *Broker) handleListPartitionReassignments(_ context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.Topics = []kmsg.ListPartitionReassignmentsResponseTopic{}
	tenant := b.tenantOf(c)
	var asked map[string]map[int32]bool
	if req.Topics != nil {
		asked = map[string]map[int32]bool{}
		for _, t := range req.Topics {
			if asked[t.Topic] == nil {
				asked[t.Topic] = map[int32]bool{}
			}
			for _, p := range t.Partitions {
				asked[t.Topic][p] = true
			}
		}
	}
	cur := b.currentReplicas()
	byTopic := map[string]int{}
	moves := b.engine.Moves(tenant)
	slices.SortFunc(moves, func(x, y wire.MoveInfo) int {
		if x.Queue != y.Queue {
			return cmpString(x.Queue, y.Queue)
		}
		return int(x.Index) - int(y.Index)
	})
	for _, m := range moves {
		if m.State == wire.MoveDone || m.State == wire.MoveFailed {
			continue
		}
		if asked != nil && !asked[m.Queue][int32(m.Index)] {
			continue
		}
		i, ok := byTopic[m.Queue]
		if !ok {
			t := kmsg.NewListPartitionReassignmentsResponseTopic()
			t.Topic = m.Queue
			resp.Topics = append(resp.Topics, t)
			i = len(resp.Topics) - 1
			byTopic[m.Queue] = i
		}
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition = int32(m.Index)
		rp.Replicas = slices.Clone(cur.registered)
		to, from := int32(b.engine.PreferredLeader(int(m.To))), int32(b.engine.PreferredLeader(int(m.From)))
		rp.AddingReplicas, rp.RemovingReplicas = []int32{}, []int32{}
		if to != from {
			rp.AddingReplicas, rp.RemovingReplicas = []int32{to}, []int32{from}
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// handleAlterPartitionAssignments (key 45, v0-1) starts, per partition,
// the move its target asks for (see the file comment) and answers once it
// is recorded, not done: ListPartitionReassignments shows it until it
// ends. A target naming no broker, an unregistered one or one twice is
// INVALID_REPLICA_ASSIGNMENT, as in Kafka; with v1's
// allow_replication_factor_change false, a target of another size than
// the partition's replicas is INVALID_REPLICATION_FACTOR. A target whose
// first broker leads no group of the tenant's is INVALID_REPLICA_ASSIGNMENT
// with the reason. A cancel (null replicas) cancels a move still copying
// (NO_REASSIGNMENT_IN_PROGRESS without one; past the copy the move
// finishes and the cancel is INVALID_REPLICA_ASSIGNMENT). Another move of
// the partition under way to another group is REASSIGNMENT_IN_PROGRESS.
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
			note, err := b.reassign(ctx, tenant, t.Topic, p, cur, req.Version >= 1 && !req.AllowReplicationFactorChange)
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

// reassign carries out one partition's target (see
// handleAlterPartitionAssignments): nil with an optional note when it is
// accepted, else why not. fixedFactor is v1's
// allow_replication_factor_change false.
func (b *Broker) reassign(ctx context.Context, tenant wire.ID, topic string, p kmsg.AlterPartitionAssignmentsRequestTopicPartition, cur replicaSets, fixedFactor bool) (string, error) {
	n, err := b.partitionGroup(tenant, topic, p.Partition)
	if err != nil {
		return "", err
	}
	if p.Replicas == nil {
		m, ok := b.engine.MoveOf(tenant, topic, uint32(p.Partition))
		if !ok || m.State == wire.MoveDone || m.State == wire.MoveFailed {
			return "", errNoReassignment
		}
		if _, err := b.engine.CancelMove(ctx, tenant, topic, uint32(p.Partition)); err != nil {
			return "", err
		}
		return "cancel recorded: the move stops and the partition stays in its group", nil
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
	if fixedFactor && len(target) != len(cur.live) && len(target) != len(cur.registered) {
		return "", fmt.Errorf("%w: the target has %d replicas, the partition %d, and the request does not allow changing the replication factor",
			errReplicationFactor, len(target), len(cur.live))
	}
	want := uint64(p.Replicas[0])
	if isInternalTopic(topic) && b.engine.PreferredLeader(n) != want {
		return "", fmt.Errorf("%w: broker %d (an internal topic's partitions stay in their groups)", errReassignNoGroup, want)
	}
	if b.engine.PreferredLeader(n) == want {
		if m, ok := b.engine.MoveOf(tenant, topic, uint32(p.Partition)); ok && m.State != wire.MoveDone && m.State != wire.MoveFailed {
			return fmt.Sprintf("a move to raft group %d is under way", m.To), nil
		}
		return fmt.Sprintf("nothing to move: raft group %d, which holds the partition, prefers broker %d; replicas stay every node", n, want), nil
	}
	to, ok := b.moveTarget(tenant, topic, want)
	if !ok {
		return "", fmt.Errorf("%w: broker %d", errReassignNoGroup, want)
	}
	if _, err := b.engine.StartMove(ctx, tenant, topic, uint32(p.Partition), to); err != nil {
		return "", err
	}
	return fmt.Sprintf("moving from raft group %d to raft group %d (preferred leader %d); replicas stay every node", n, to, want), nil
}

// moveTarget is the tenant's group preferring node as its leader that
// holds the fewest partitions of the topic.
func (b *Broker) moveTarget(tenant wire.ID, topic string, node uint64) (int, bool) {
	count := map[int]int{}
	for from := uint32(0); ; {
		dir := b.engine.Dir(tenant, topic, from, 4096)
		if len(dir) == 0 {
			break
		}
		for _, d := range dir {
			count[int(d.Group)]++
		}
		from = dir[len(dir)-1].Index + 1
	}
	best, found := 0, false
	for _, g := range b.engine.TenantGroups(tenant) {
		if b.engine.PreferredLeader(g) != node {
			continue
		}
		if !found || count[g] < count[best] {
			best, found = g, true
		}
	}
	return best, found
}

// reassignCode is errorCode with the answers only reassignments give.
func reassignCode(err error) int16 {
	switch {
	case errors.Is(err, errReassignNoReplicas), errors.Is(err, errReassignUnknownBroker), errors.Is(err, errReassignDuplicate),
		errors.Is(err, errReassignNoGroup), errors.Is(err, raftgroups.ErrMoveTarget), errors.Is(err, raftgroups.ErrMoveTooLate),
		errors.Is(err, raftgroups.ErrMoveFormat):
		return kerr.InvalidReplicaAssignment.Code
	case errors.Is(err, raftgroups.ErrMoveInProgress):
		return kerr.ReassignmentInProgress.Code
	case errors.Is(err, errNoReassignment):
		return kerr.NoReassignmentInProgress.Code
	}
	return errorCode(err)
}
