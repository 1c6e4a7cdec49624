package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// partitionLayout is each partition of topic as Metadata shows it:
// "leader replicas" with the replicas sorted, by index.
func partitionLayout(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) (map[int32]string, kadm.PartitionDetails) {
	t.Helper()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		t.Fatalf("metadata of %s: %+v", topic, td)
	}
	out := map[int32]string{}
	for p, pd := range td.Partitions {
		replicas := slices.Clone(pd.Replicas)
		slices.Sort(replicas)
		out[p] = fmt.Sprintf("%d %v", pd.Leader, replicas)
	}
	return out, td.Partitions
}

// Partition reassignments through kadm on a three-node cluster, where
// every node holds every partition: none is listed as in progress; a
// target whose first broker leads the partition's group (its preferred
// leader, after ElectLeaders) is accepted with nothing to move, a shrink
// so ordered too (replicas stay every node); a duplicate is
// INVALID_REPLICA_ASSIGNMENT; a cancel is NO_REASSIGNMENT_IN_PROGRESS; and
// Metadata is the same afterwards. Moves themselves:
// partition_move_test.go.
func TestKafkaAdminPartitionReassignments(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	adm := adminOf(e2etest.KgoClient(t, c))
	createTopics(ctx, t, adm, 3, "rsg")

	// Leaders at their preferred nodes first, so the balancer has nothing
	// left to move while Metadata is compared; then every partition led
	// and replicated on the three nodes.
	if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil); err != nil {
		t.Fatal(err)
	}
	var before map[int32]string
	var parts kadm.PartitionDetails
	for {
		before, parts = partitionLayout(ctx, t, adm, "rsg")
		settled := len(parts) == 3
		for _, pd := range parts {
			settled = settled && pd.Err == nil && pd.Leader >= 0 && len(pd.Replicas) == 3
		}
		if settled {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("partitions never led on three replicas: %v", before)
		}
		time.Sleep(100 * time.Millisecond)
	}

	set := kadm.TopicsSet{}
	set.Add("rsg", 0, 1, 2)
	listed, err := adm.ListPartitionReassignments(ctx, set)
	if err != nil || len(listed) != 0 {
		t.Fatalf("reassignments in progress: %v %+v", err, listed)
	}

	var same kadm.AlterPartitionAssignmentsReq
	for p, pd := range parts {
		same.Assign("rsg", p, pd.Replicas) // the leader first, as Metadata lists them
	}
	res, err := adm.AlterPartitionAssignments(ctx, same)
	if err != nil || res.Error() != nil || len(res["rsg"]) != 3 {
		t.Fatalf("same replicas: %v %+v", err, res)
	}

	var shrink kadm.AlterPartitionAssignmentsReq
	shrink.Assign("rsg", 0, parts[0].Replicas[:2])
	shrink.CancelAssign("rsg", 1)
	shrink.Assign("rsg", 2, []int32{parts[2].Replicas[0], parts[2].Replicas[0]})
	res, err = adm.AlterPartitionAssignments(ctx, shrink)
	if err != nil {
		t.Fatal(err)
	}
	if r := res["rsg"][0]; r.Err != nil {
		t.Fatalf("shrink, leader first: %+v", r)
	}
	if r := res["rsg"][1]; !errors.Is(r.Err, kerr.NoReassignmentInProgress) {
		t.Fatalf("cancel: %+v", r)
	}
	if r := res["rsg"][2]; !errors.Is(r.Err, kerr.InvalidReplicaAssignment) || r.ErrMessage == "" {
		t.Fatalf("duplicate: %+v", r)
	}

	if listed, err := adm.ListPartitionReassignments(ctx, set); err != nil || len(listed) != 0 {
		t.Fatalf("reassignments in progress afterwards: %v %+v", err, listed)
	}
	after, _ := partitionLayout(ctx, t, adm, "rsg")
	for p, was := range before {
		if after[p] != was {
			t.Fatalf("rsg/%d was %q, is %q after the reassignments", p, was, after[p])
		}
	}
}
