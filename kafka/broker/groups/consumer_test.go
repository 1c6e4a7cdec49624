package groups

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

var topicT = [16]byte{1}

// consumerHarness is a coordinator over one topic "t" whose partition
// count a test may change.
type consumerHarness struct {
	t          *testing.T
	c          *Coordinator
	clock      *fakeClock
	partitions int32
}

func newConsumerHarness(t *testing.T, partitions int32) *consumerHarness {
	h := &consumerHarness{t: t, clock: &fakeClock{}, partitions: partitions}
	h.c = New(Config{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Minute, Clock: h.clock,
		Topics:                 func() []TopicInfo { return []TopicInfo{{Name: "t", ID: topicT, Partitions: h.partitions}} },
		ConsumerSessionTimeout: 10 * time.Second})
	t.Cleanup(h.c.Close)
	return h
}

// beat sends a full heartbeat of member at epoch owning parts of t.
func (h *consumerHarness) beat(member string, epoch int32, parts ...int32) ConsumerHeartbeatResult {
	return h.c.ConsumerHeartbeat(ConsumerHeartbeat{Group: "cg", MemberID: member, MemberEpoch: epoch,
		RebalanceTimeout: 30 * time.Second, SubscribedTopics: []string{"t"}, Owned: map[[16]byte][]int32{topicT: parts}})
}

// ok checks a heartbeat succeeded at epoch with exactly parts assigned.
func (h *consumerHarness) ok(r ConsumerHeartbeatResult, epoch int32, parts ...int32) {
	h.t.Helper()
	if r.Err != nil || r.MemberEpoch != epoch || fmt.Sprint(r.Assignment[topicT]) != fmt.Sprint(parts) {
		h.t.Fatalf("heartbeat: %+v, want epoch %d and partitions %v", r, epoch, parts)
	}
	h.checkNoDoubleHolding()
}

// checkNoDoubleHolding: no partition is held (assigned or being revoked)
// by two members.
func (h *consumerHarness) checkNoDoubleHolding() {
	h.t.Helper()
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	cg := h.c.consumers["cg"]
	if cg == nil {
		return
	}
	seen := map[tp]string{}
	for _, m := range cg.members {
		for _, held := range []map[tp]int32{m.assigned, m.revoking} {
			for p := range held {
				if other, dup := seen[p]; dup && other != m.id {
					h.t.Fatalf("partition %d held by %s and %s", p.part, other, m.id)
				}
				seen[p] = m.id
			}
		}
	}
}

// TestConsumerGroupHandsPartitionsOverWithoutOverlap: a second member
// gets its share only after the first has revoked it; the first keeps
// the rest throughout.
func TestConsumerGroupHandsPartitionsOverWithoutOverlap(t *testing.T) {
	h := newConsumerHarness(t, 4)
	h.ok(h.beat("a", 0), 1, 0, 1, 2, 3)
	h.ok(h.beat("a", 1, 0, 1, 2, 3), 1, 0, 1, 2, 3)

	h.ok(h.beat("b", 0), 2) // b's share is still a's
	h.ok(h.beat("a", 1, 0, 1, 2, 3), 1, 0, 1)
	h.ok(h.beat("b", 2), 2) // not released yet
	if r := h.beat("b", 1); r.Err != kerr.FencedMemberEpoch {
		t.Fatalf("b at a wrong epoch: %+v", r)
	}
	h.ok(h.beat("a", 1, 0, 1), 2, 0, 1) // released: a moves on
	h.ok(h.beat("b", 2), 2, 2, 3)
	if d, _ := h.c.DescribeConsumer("cg"); d.State != Stable || d.Epoch != 2 || len(d.Members) != 2 {
		t.Fatalf("describe: %+v", d)
	}

	// a's answer was lost: it may heartbeat at its previous epoch with
	// what it was given before.
	if r := h.beat("a", 1, 0, 1); r.Err != nil || r.MemberEpoch != 2 {
		t.Fatalf("previous epoch: %+v", r)
	}
	if r := h.beat("a", 1, 0, 1, 2); r.Err != kerr.FencedMemberEpoch {
		t.Fatalf("previous epoch owning more than given: %+v", r)
	}

	// b leaves: a gets everything.
	if r := h.c.ConsumerHeartbeat(ConsumerHeartbeat{Group: "cg", MemberID: "b", MemberEpoch: leaveEpoch}); r.Err != nil || r.MemberEpoch != leaveEpoch {
		t.Fatalf("leave: %+v", r)
	}
	h.ok(h.beat("a", 2, 0, 1), 3, 0, 1, 2, 3)
	if r := h.beat("b", 2); r.Err != kerr.UnknownMemberID {
		t.Fatalf("b after leaving: %+v", r)
	}
}

// TestConsumerGroupTimeouts: a member not heard from for the session
// timeout is removed; one that keeps partitions it must revoke past its
// rebalance timeout is removed too.
func TestConsumerGroupTimeouts(t *testing.T) {
	h := newConsumerHarness(t, 2)
	h.ok(h.beat("a", 0), 1, 0, 1)
	h.ok(h.beat("b", 0), 2)
	h.ok(h.beat("a", 1, 0, 1), 1, 0) // must revoke 1, and never does
	for range 4 {
		h.clock.Advance(7 * time.Second) // heartbeats within the session, still owning 1
		h.ok(h.beat("a", 1, 0, 1), 1, 0)
		h.ok(h.beat("b", 2), 2)
	}
	// 28s passed; the rebalance timeout (30s) runs out for a.
	h.clock.Advance(3 * time.Second)
	if r := h.beat("a", 1, 0, 1); r.Err != kerr.UnknownMemberID {
		t.Fatalf("a after its rebalance timeout: %+v", r)
	}
	h.ok(h.beat("b", 2), 3, 0, 1)
	h.clock.Advance(11 * time.Second)
	if r := h.beat("b", 3, 0, 1); r.Err != kerr.UnknownMemberID {
		t.Fatalf("b after its session: %+v", r)
	}
}

// TestConsumerGroupStaticMember: a static member that leaves with epoch
// -2 keeps its partitions reserved; its next incarnation (a new member
// id) takes them over without a new group epoch, while the instance held
// by a live member answers UNRELEASED_INSTANCE_ID.
func TestConsumerGroupStaticMember(t *testing.T) {
	h := newConsumerHarness(t, 4)
	static := func(member string, epoch int32, parts ...int32) ConsumerHeartbeatResult {
		return h.c.ConsumerHeartbeat(ConsumerHeartbeat{Group: "cg", MemberID: member, MemberEpoch: epoch, InstanceID: "i",
			RebalanceTimeout: 30 * time.Second, SubscribedTopics: []string{"t"}, Owned: map[[16]byte][]int32{topicT: parts}})
	}
	h.ok(h.beat("a", 0), 1, 0, 1, 2, 3)
	h.ok(static("s1", 0), 2)
	h.ok(h.beat("a", 1, 0, 1, 2, 3), 1, 0, 1)
	h.ok(h.beat("a", 1, 0, 1), 2, 0, 1)
	h.ok(static("s1", 2), 2, 2, 3)
	if r := static("s2", 0); r.Err != kerr.UnreleasedInstanceID {
		t.Fatalf("second incarnation while the first is live: %+v", r)
	}
	if r := static("s1", staticLeaveEpoch); r.Err != nil || r.MemberEpoch != staticLeaveEpoch {
		t.Fatalf("static leave: %+v", r)
	}
	h.ok(h.beat("a", 2, 0, 1), 2, 0, 1) // no new epoch: the partitions wait for the instance
	if r := static("s1", 2, 2, 3); r.Err != kerr.FencedMemberEpoch {
		t.Fatalf("heartbeat of the incarnation that left: %+v", r)
	}
	h.ok(static("s2", 0), 2, 2, 3)
	if d, _ := h.c.DescribeConsumer("cg"); d.Epoch != 2 || len(d.Members) != 2 {
		t.Fatalf("after the static rejoin: %+v", d)
	}
	if r := static("s1", 2); r.Err != kerr.FencedInstanceID {
		t.Fatalf("old incarnation: %+v", r)
	}
}

// TestConsumerGroupFollowsTopicGrowth: a topic growing gives the group a
// new target at the next heartbeat.
func TestConsumerGroupFollowsTopicGrowth(t *testing.T) {
	h := newConsumerHarness(t, 1)
	h.ok(h.beat("a", 0), 1, 0)
	h.partitions = 3
	h.ok(h.beat("a", 1, 0), 2, 0, 1, 2)
}

// TestConsumerGroupAssignors: range gives consecutive ranges; uniform
// balances and keeps what members had.
func TestConsumerGroupAssignors(t *testing.T) {
	subs := map[string][]TopicInfo{"a": {{Name: "t", ID: topicT, Partitions: 5}}, "b": {{Name: "t", ID: topicT, Partitions: 5}}}
	r := assignRange([]string{"a", "b"}, subs)
	if len(r["a"]) != 3 || !r["a"][tp{topicT, 2}] || len(r["b"]) != 2 || !r["b"][tp{topicT, 3}] {
		t.Fatalf("range: %v", r)
	}
	prev := map[string]map[tp]bool{"b": {{topicT, 0}: true, {topicT, 1}: true, {topicT, 2}: true, {topicT, 3}: true}}
	u := assignUniform([]string{"a", "b"}, subs, prev)
	if len(u["a"])+len(u["b"]) != 5 || len(u["b"]) != 3 || !u["b"][tp{topicT, 0}] || u["a"][tp{topicT, 0}] {
		t.Fatalf("uniform: %v", u)
	}
}

// TestConsumerGroupCommitsAndKinds: commits need OffsetCommit v9, the
// member's epoch or an earlier one no older than when it got the
// partition, and partitions it holds; a group id is classic or consumer,
// not both.
func TestConsumerGroupCommitsAndKinds(t *testing.T) {
	h := newConsumerHarness(t, 2)
	h.ok(h.beat("a", 0), 1, 0, 1)
	commit := func(version int16, gen int32, parts ...int32) *kerr.Error {
		return h.c.AdmitCommit(Commit{Group: "cg", MemberID: "a", Generation: gen, Version: version,
			Partitions: map[string][]int32{"t": parts}})
	}
	for _, c := range []struct {
		version int16
		gen     int32
		parts   []int32
		want    *kerr.Error
	}{
		{9, 1, []int32{0, 1}, nil},
		{8, 1, []int32{0}, kerr.UnsupportedVersion},
		{9, 2, []int32{0}, kerr.StaleMemberEpoch},
		{9, 0, []int32{0}, kerr.StaleMemberEpoch},
	} {
		if err := commit(c.version, c.gen, c.parts...); err != c.want {
			t.Errorf("commit v%d at %d of %v: %v, want %v", c.version, c.gen, c.parts, err, c.want)
		}
	}
	h.ok(h.beat("b", 0), 2)
	h.ok(h.beat("a", 1, 0, 1), 1, 0) // revoking 1: still a's to commit
	if err := commit(9, 1, 1); err != nil {
		t.Fatalf("commit of a partition being revoked: %v", err)
	}
	h.ok(h.beat("a", 1, 0), 2, 0)
	if err := commit(9, 1, 0); err != nil {
		t.Fatalf("commit at the previous epoch of a partition held since it: %v", err)
	}
	h.ok(h.beat("b", 2), 2, 1)
	if err := commit(9, 2, 1); err != nil {
		t.Fatalf("commit of a partition just given away: %v", err)
	}
	h.ok(h.beat("b", 2, 1), 2, 1)
	h.ok(h.beat("a", 2, 0), 2, 0)
	bCommit := Commit{Group: "cg", MemberID: "b", Generation: 1, Version: 9, Partitions: map[string][]int32{"t": {1}}}
	if err := h.c.AdmitCommit(bCommit); err != kerr.StaleMemberEpoch {
		t.Fatalf("commit at an epoch before the partition was the member's: %v", err)
	}
	if err := h.c.AdmitCommit(Commit{Group: "cg", Generation: -1, Version: 9}); err != kerr.UnknownMemberID {
		t.Fatalf("admin commit to a live consumer group: %v", err)
	}

	h.c.mu.Lock()
	res, _ := h.c.join(JoinRequest{Group: "cg", ProtocolType: "consumer", Protocols: []Protocol{{Name: "range"}},
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second})
	h.c.mu.Unlock()
	if res.Err != kerr.InconsistentGroupProtocol {
		t.Fatalf("classic join of a consumer group: %+v", res)
	}
	if r := h.c.ConsumerHeartbeat(ConsumerHeartbeat{Group: "g", MemberEpoch: 0, Owned: map[[16]byte][]int32{}, SubscribedTopics: []string{"t"}}); r.Err != nil {
		t.Fatalf("consumer join of a new group: %+v", r)
	}
	if err := h.c.Delete("cg"); err != kerr.NonEmptyGroup {
		t.Fatalf("delete of a live consumer group: %v", err)
	}
	ls := h.c.List()
	if len(ls) != 2 || !ls[0].Consumer {
		t.Fatalf("list: %+v", ls)
	}
}

// TestConsumerGroupSurvivesACoordinatorChange: a new coordinator built
// from what the old one recorded continues the group mid-handover:
// members heartbeat at their epochs, a partition still held by its old
// owner is not given to the new one until released, and a group that
// emptied is recorded as gone.
func TestConsumerGroupSurvivesACoordinatorChange(t *testing.T) {
	h := newConsumerHarness(t, 2)
	recorded := map[string]Recorded{}
	h.c.cfg.Persist = func(group string, gen int32, state []byte) { recorded[group] = Recorded{gen, state} }
	h.ok(h.beat("a", 0), 1, 0, 1)
	h.ok(h.beat("b", 0), 2)
	h.ok(h.beat("a", 1, 0, 1), 1, 0) // a is giving up 1 and has not released it
	if r := recorded["cg"]; r.Generation != 2 || len(r.State) == 0 {
		t.Fatalf("recorded %+v", r)
	}
	h.c.Close()

	h2 := &consumerHarness{t: t, clock: &fakeClock{}, partitions: 2}
	h2.c = New(Config{Clock: h2.clock, Restore: recorded, Persist: h.c.cfg.Persist,
		Topics: func() []TopicInfo { return []TopicInfo{{Name: "t", ID: topicT, Partitions: 2}} }})
	t.Cleanup(h2.c.Close)
	h2.ok(h2.beat("b", 2), 2) // 1 is still a's
	h2.ok(h2.beat("a", 1, 0), 2, 0)
	h2.ok(h2.beat("b", 2), 2, 1)

	for _, m := range []string{"a", "b"} {
		if r := h2.c.ConsumerHeartbeat(ConsumerHeartbeat{Group: "cg", MemberID: m, MemberEpoch: leaveEpoch}); r.Err != nil {
			t.Fatalf("leave of %s: %+v", m, r)
		}
	}
	if r, ok := recorded["cg"]; !ok || r.State != nil {
		t.Fatalf("recorded after the group emptied: %+v", r)
	}
}
