package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/wire"
)

// alterAssignments asks one AlterPartitionReassignments of version
// version for topic's partitions, each to its replicas (nil: a cancel),
// and returns each partition's answer by index.
func alterAssignments(t *testing.T, cl *kgo.Client, version int16, allowRF bool, topic string, targets map[int32][]int32) map[int32]kmsg.AlterPartitionAssignmentsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.Version, req.AllowReplicationFactorChange = version, allowRF
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = topic
	for p, replicas := range targets {
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = p, replicas
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Topic != topic || resp.AllowReplicationFactorChange != allowRF && version >= 1 {
		t.Fatalf("answer: %+v", resp)
	}
	out := map[int32]kmsg.AlterPartitionAssignmentsResponseTopicPartition{}
	for _, p := range resp.Topics[0].Partitions {
		out[p.Partition] = p
	}
	if len(out) != len(targets) {
		t.Fatalf("%d partitions asked, answered %+v", len(targets), resp.Topics[0].Partitions)
	}
	return out
}

// wantCode fails unless p answered code with a message containing say.
func wantCode(t *testing.T, what string, p kmsg.AlterPartitionAssignmentsResponseTopicPartition, code int16, say string) {
	t.Helper()
	msg := ""
	if p.ErrorMessage != nil {
		msg = *p.ErrorMessage
	}
	if p.ErrorCode != code || !strings.Contains(msg, say) {
		t.Fatalf("%s: %v %q, want %v with %q", what, kerr.ErrorForCode(p.ErrorCode), msg, kerr.ErrorForCode(code), say)
	}
}

// TestPartitionReassignments asks a three-node cluster, through a node
// other than the one that created the topic: nothing is listed at first;
// a target whose first broker is the preferred leader of the partition's
// group moves nothing; one naming another broker first moves the
// partition to the group that broker leads, listed until it is done; an
// unknown broker, a duplicate and an empty list are
// INVALID_REPLICA_ASSIGNMENT saying why; v1 without replication factor
// changes refuses a shrink as INVALID_REPLICATION_FACTOR; a cancel with no
// move is NO_REASSIGNMENT_IN_PROGRESS and an unknown partition or topic
// UNKNOWN_TOPIC_OR_PARTITION.
func TestPartitionReassignments(t *testing.T) {
	nodes := startCluster(t, 3)
	createTopic(t, nodes[0].client(), "ra", 2)
	cl := nodes[2].client()

	list := kmsg.NewPtrListPartitionReassignmentsRequest()
	for _, topics := range [][]kmsg.ListPartitionReassignmentsRequestTopic{nil, {{Topic: "ra", Partitions: []int32{0, 1, 7}}, {Topic: "nope", Partitions: []int32{0}}}} {
		list.Topics = topics
		resp, err := list.RequestWith(ctxFor(t), cl)
		if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 0 {
			t.Fatalf("list %+v: %v %+v", topics, err, resp)
		}
	}
	ctx := ctxFor(t)
	for _, n := range nodes {
		for g := range n.engine.TenantGroups(wire.DefaultTenant) {
			for n.engine.ActiveFormat(g) < wire.FormatV9 {
				if ctx.Err() != nil {
					t.Fatal("groups never reached format 9")
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}

	g0 := partitionGroupOf(t, nodes[0], "ra", 0)
	pref := int32(nodes[0].engine.PreferredLeader(g0))
	other := pref%3 + 1
	third := other%3 + 1
	got := alterAssignments(t, cl, 1, true, "ra", map[int32][]int32{0: {pref, other, third}})
	wantCode(t, "preferred leader first", got[0], 0, "nothing to move")

	got = alterAssignments(t, cl, 1, true, "ra", map[int32][]int32{0: {other, pref}})
	wantCode(t, "another first", got[0], 0, "moving")
	for {
		g := partitionGroupOf(t, nodes[2], "ra", 0)
		list.Topics = nil
		resp, err := list.RequestWith(ctxFor(t), cl)
		if err == nil && len(resp.Topics) == 0 && int32(nodes[2].engine.PreferredLeader(g)) == other {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the move never ended: group %d, list %+v %v", g, resp, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	got = alterAssignments(t, cl, 1, true, "ra", map[int32][]int32{0: {1, 2, 3, 4}})
	wantCode(t, "unknown broker", got[0], kerr.InvalidReplicaAssignment.Code, "not registered")
	got = alterAssignments(t, cl, 1, false, "ra", map[int32][]int32{0: {pref}, 1: {}})
	wantCode(t, "shrink, factor fixed", got[0], kerr.InvalidReplicationFactor.Code, "replication factor")
	wantCode(t, "empty", got[1], kerr.InvalidReplicaAssignment.Code, "empty")
	got = alterAssignments(t, cl, 0, true, "ra", map[int32][]int32{0: {pref, pref, other}})
	wantCode(t, "duplicate", got[0], kerr.InvalidReplicaAssignment.Code, "more than once")
	got = alterAssignments(t, cl, 1, true, "ra", map[int32][]int32{0: nil, 5: {1, 2, 3}})
	wantCode(t, "cancel", got[0], kerr.NoReassignmentInProgress.Code, "no reassignment")
	wantCode(t, "unknown partition", got[5], kerr.UnknownTopicOrPartition.Code, "")
	got = alterAssignments(t, cl, 1, true, "nope", map[int32][]int32{0: {1, 2, 3}})
	wantCode(t, "unknown topic", got[0], kerr.UnknownTopicOrPartition.Code, "")
	got = alterAssignments(t, cl, 1, true, "__consumer_offsets", map[int32][]int32{0: {1, 2, 3}})
	wantCode(t, "internal topic", got[0], 0, "")
}

// partitionGroupOf is the raft group holding topic's partition index.
func partitionGroupOf(t *testing.T, n *testNode, topic string, index uint32) int {
	t.Helper()
	d, ok := n.engine.DirByIndex(wire.DefaultTenant, topic, index)
	if !ok {
		t.Fatalf("%s/%d has no directory entry", topic, index)
	}
	return int(d.Group)
}
