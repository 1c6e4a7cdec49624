package broker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

// TestRebalanceSurvivesACoordinatorHandOffBeforeTheSync: a member's join
// is answered, then the node coordinating its group hands leadership off
// (as it does when it stops) before the member's SyncGroup. The sync, sent
// on to the new coordinator, must find the generation the join answered
// (Kafka's rule: a coordinator change keeps members and generations).
// Anything the deposed coordinator still answers goes out as
// NOT_COORDINATOR, so no client holds a generation only it knew.
// This is what TestRollingRestartUnderLoad (e2e) hit: the new coordinator
// had never heard of the group and answered UNKNOWN_MEMBER_ID, which
// franz-go hands to its user as a failed group session.
func TestRebalanceSurvivesACoordinatorHandOffBeforeTheSync(t *testing.T) {
	nodes := startCluster(t, 3)
	cl := clusterClient(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()

	const group = "handoff"
	raftGroup := nodes[0].engine.CoordinatorGroup(wire.DefaultTenant, 'g', group)
	jr := joinAlone(ctx, t, cl, group, 10000)

	// The coordinator's node hands off every raft group it leads.
	was, _, _ := nodes[0].engine.Leader(raftGroup)
	old := nodes[was-1].broker
	key := old.groupKey(wire.DefaultTenant, group)
	coord, kErr := old.groups.get(key)
	if kErr != nil {
		t.Fatalf("the coordinator before the hand-off: %v", kErr)
	}
	if kErr := old.groups.confirm(ctx, key, group, coord); kErr != nil {
		t.Fatalf("an answer of the coordinator before the hand-off: %v", kErr)
	}
	if left := nodes[was-1].host.HandOff(testWait); len(left) > 0 {
		t.Fatalf("node %d still leads raft groups %v", was, left)
	}
	// Whatever the deposed coordinator still answers (a join its timers
	// complete before it is discarded) goes out as NOT_COORDINATOR.
	if kErr := old.groups.confirm(ctx, key, group, coord); kErr != kerr.NotCoordinator {
		t.Fatalf("an answer of the deposed coordinator: %v, want NOT_COORDINATOR", kErr)
	}

	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = group, jr.MemberID, jr.Generation
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = jr.MemberID, []byte("assigned")
	sync.GroupAssignment = append(sync.GroupAssignment, a)
	sr, err := sync.RequestWith(ctx, cl)
	if err != nil || sr.ErrorCode != 0 || string(sr.MemberAssignment) != "assigned" {
		code := int16(-1)
		if sr != nil {
			code = sr.ErrorCode
		}
		t.Fatalf("sync after the hand-off: %v %v", kerr.ErrorForCode(code), err)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = group, jr.MemberID, jr.Generation
	if hr, err := hb.RequestWith(ctx, cl); err != nil || hr.ErrorCode != 0 {
		t.Fatalf("heartbeat after the hand-off: %+v %v", hr, err)
	}
	if now, _, _ := nodes[0].engine.Leader(raftGroup); now == was {
		t.Logf("leadership of raft group %d went back to node %d meanwhile", raftGroup, was)
	}
}

// TestDrainingNodeRecordsNoExpiry: a node that stops accepting Kafka
// clients while it still leads a raft group (its hand-off ran out of time)
// must not expire the members it coordinates, which can no longer reach
// it: the next leader restores the membership last recorded, and an
// expiry recorded here would cost a member its partitions (franz-go sees
// UNKNOWN_MEMBER_ID, another member reads its uncommitted records again).
// TestRollingRestartUnderLoad (e2e) hit this.
func TestDrainingNodeRecordsNoExpiry(t *testing.T) {
	n := startNode(t, func(c *Config) {
		c.GroupMinSessionTimeout, c.GroupMaxSessionTimeout = 100*time.Millisecond, time.Minute
		c.GroupJoinDelay = time.Millisecond
	})
	cl := n.client()
	ctx := ctxFor(t)
	const group = "drained"
	jr := joinAlone(ctx, t, cl, group, 300)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = group, jr.MemberID, jr.Generation
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = jr.MemberID, []byte("assigned")
	sync.GroupAssignment = append(sync.GroupAssignment, a)
	if sr, err := sync.RequestWith(ctx, cl); err != nil || sr.ErrorCode != 0 {
		t.Fatalf("sync: %+v %v", sr, err)
	}
	raftGroup := n.engine.CoordinatorGroup(wire.DefaultTenant, 'g', group)
	recorded := func() int32 {
		ms, err := n.engine.GroupMembers(ctx, raftGroup, wire.DefaultTenant)
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := ms[group]; ok && len(m.State) > 0 {
			return m.Generation
		}
		return 0
	}
	if g := recorded(); g != jr.Generation {
		t.Fatalf("recorded generation %d before the drain, want %d", g, jr.Generation)
	}

	// The member sends nothing more; the node drains while leading.
	cl.Close()
	drainCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = n.broker.Drain(drainCtx)
	// Ten session timeouts: without the fix the expiry is recorded after one.
	until := time.Now().Add(3 * time.Second)
	for time.Now().Before(until) {
		if g := recorded(); g != jr.Generation {
			t.Fatalf("the draining node recorded the group at generation %d (0: emptied), want %d kept", g, jr.Generation)
		}
		time.Sleep(50 * time.Millisecond) // an observation window, not synchronisation
	}
}

// joinRequest is a consumer join of group with one range protocol and
// session and rebalance timeouts of timeoutMs.
func joinRequest(group string, timeoutMs int32) *kmsg.JoinGroupRequest {
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType = group, "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = timeoutMs, timeoutMs
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte("m")
	join.Protocols = append(join.Protocols, p)
	return join
}

// joinAlone joins group as its only member (so its leader), with session
// and rebalance timeouts of timeoutMs, and returns the answered join.
func joinAlone(ctx context.Context, t *testing.T, cl *kgo.Client, group string, timeoutMs int32) *kmsg.JoinGroupResponse {
	t.Helper()
	join := joinRequest(group, timeoutMs)
	jr, err := join.RequestWith(ctx, cl)
	if err != nil || jr.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %+v %v", jr, err)
	}
	join.MemberID = jr.MemberID
	if jr, err = join.RequestWith(ctx, cl); err != nil || jr.ErrorCode != 0 || jr.LeaderID != jr.MemberID {
		t.Fatalf("join: %+v %v", jr, err)
	}
	return jr
}

// TestJoinAnswerWaitsForItsRecord: a join's answer names a generation the
// next coordinator must know, so it goes out only once the membership is
// recorded in raft. When the write fails (here it cannot apply within its
// timeout) while the node still leads, the member hears NOT_COORDINATOR
// and joins again, rather than holding a generation only this node's
// memory knows; a coordinator change would answer its SyncGroup or
// heartbeat UNKNOWN_MEMBER_ID, and franz-go would give up the session
// (TestRollingRestartUnderLoad, e2e, under load).
func TestJoinAnswerWaitsForItsRecord(t *testing.T) {
	var hold atomic.Bool
	release := make(chan struct{})
	nodes := startClusterWith(t, 1, func(_ int, c *raftgroups.Config) {
		c.BeforeApply = func(int) {
			if hold.Load() {
				<-release
			}
		}
	})
	t.Cleanup(func() { hold.Store(false); close(release) }) // before the nodes close
	cl := nodes[0].client()
	ctx := ctxFor(t)
	join := joinRequest("unrecorded", 30000)
	jr, err := join.RequestWith(ctx, cl)
	if err != nil || jr.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %+v %v", jr, err)
	}
	hold.Store(true) // nothing more applies: the membership write times out
	join.MemberID = jr.MemberID
	jr, err = join.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if jr.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("join answered %d (generation %d) with its membership unrecorded, want NOT_COORDINATOR", jr.ErrorCode, jr.Generation)
	}
}
