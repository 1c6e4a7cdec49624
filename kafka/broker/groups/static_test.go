package groups

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/queen-mq/queen/wire"
)

func staticReq(member, instance string, protocols ...Protocol) JoinRequest {
	r := joinReq(member, protocols...)
	r.InstanceID = instance
	return r
}

// staticGroup builds a stable group of static members with the given
// instance ids (the first leads) and returns their member ids and the
// generation. Static members skip MEMBER_ID_REQUIRED.
func (h *harness) staticGroup(instances []string, protocols ...Protocol) ([]string, int32) {
	h.t.Helper()
	var joins []parked[JoinResult]
	for _, inst := range instances {
		joins = append(joins, h.join(staticReq("", inst, protocols...)))
	}
	h.clock.Advance(delay)
	h.clock.Advance(delay)
	var ids []string
	var gen int32
	for i, p := range joins {
		r := mustAnswer(h.t, p)
		if r.Err != nil || !strings.HasPrefix(r.MemberID, instances[i]+"-") {
			h.t.Fatalf("static join of %s: %+v", instances[i], r)
		}
		ids, gen = append(ids, r.MemberID), r.Generation
	}
	h.syncAll(ids, gen)
	return ids, gen
}

// TestStaticMemberRestartsWithoutRebalance: a static member that joins
// again without a member id (its process restarted) gets a new member id
// at once, at the same generation, and its old assignment from SyncGroup;
// the other member keeps heartbeating with no rebalance; the old member id
// is fenced on heartbeat, sync, commit, join and leave.
func TestStaticMemberRestartsWithoutRebalance(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.staticGroup([]string{"ia", "ib"})
	r := mustAnswer(t, h.join(staticReq("", "ib")))
	if r.Err != nil || r.Generation != gen || r.MemberID == ids[1] || !strings.HasPrefix(r.MemberID, "ib-") ||
		r.LeaderID != ids[0] || len(r.Members) != 0 || r.SkipAssignment {
		t.Fatalf("static rejoin: %+v", r)
	}
	fresh := r.MemberID
	if err := h.c.Heartbeat("g", ids[0], "ia", gen); err != nil {
		t.Fatalf("the other member's heartbeat: %v, want no rebalance", err)
	}
	s := mustAnswer(t, h.sync(fresh, gen, nil))
	if s.Err != nil || string(s.Assignment) != ids[1] {
		t.Fatalf("sync of the new incarnation: %+v, want the old assignment", s)
	}
	if err := h.c.Heartbeat("g", fresh, "ib", gen); err != nil {
		t.Fatalf("new incarnation's heartbeat: %v", err)
	}
	if d, _ := h.c.Describe("g"); d.State != Stable || len(d.Members) != 2 || d.Members[1].MemberID != fresh || d.Members[1].InstanceID != "ib" {
		t.Fatalf("describe: %+v", d)
	}

	if err := h.c.Heartbeat("g", ids[1], "ib", gen); err != kerr.FencedInstanceID {
		t.Fatalf("old incarnation's heartbeat: %v, want FENCED_INSTANCE_ID", err)
	}
	if err := h.c.ValidateCommit("g", ids[1], "ib", gen); err != kerr.FencedInstanceID {
		t.Fatalf("old incarnation's commit: %v, want FENCED_INSTANCE_ID", err)
	}
	h.c.mu.Lock()
	old, _ := h.c.sync(SyncRequest{Group: "g", MemberID: ids[1], InstanceID: "ib", Generation: gen})
	h.c.mu.Unlock()
	if old.Err != kerr.FencedInstanceID {
		t.Fatalf("old incarnation's sync: %+v", old)
	}
	if j := mustAnswer(t, h.join(staticReq(ids[1], "ib"))); j.Err != kerr.FencedInstanceID {
		t.Fatalf("old incarnation's join: %+v", j)
	}
	if errs := h.c.Leave("g", []Leaving{{MemberID: ids[1], InstanceID: "ib"}}); errs[0] != kerr.FencedInstanceID {
		t.Fatalf("old incarnation's leave: %v", errs[0])
	}
	// Without the instance id the old member id is simply gone.
	if err := h.c.Heartbeat("g", ids[1], "", gen); err != kerr.UnknownMemberID {
		t.Fatalf("old member id without instance: %v", err)
	}
	// An instance the group does not know rejoins rather than being fenced.
	if err := h.c.Heartbeat("g", ids[0], "nobody", gen); err != kerr.UnknownMemberID {
		t.Fatalf("unknown instance: %v", err)
	}
	if err := h.c.Heartbeat("g", ids[0], "ia", gen); err != nil {
		t.Fatalf("group still stable: %v", err)
	}
}

// TestStaticLeaderRestart: a restarted static leader is told the old
// leader id below JoinGroup v9 (it must not assign: a stable group would
// not pass the assignments on), and from v9 that it leads, with the
// members, but must skip assignment (KIP-814). Either way no rebalance.
func TestStaticLeaderRestart(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.staticGroup([]string{"ia", "ib"})
	r := mustAnswer(t, h.join(staticReq("", "ia")))
	if r.Err != nil || r.Generation != gen || r.LeaderID != ids[0] || r.MemberID == ids[0] || len(r.Members) != 0 {
		t.Fatalf("leader rejoin below v9: %+v", r)
	}
	req := staticReq("", "ia")
	req.SkipAssignment = true
	r2 := mustAnswer(t, h.join(req))
	if r2.Err != nil || r2.Generation != gen || r2.LeaderID != r2.MemberID || !r2.SkipAssignment || len(r2.Members) != 2 {
		t.Fatalf("leader rejoin at v9: %+v", r2)
	}
	if err := h.c.Heartbeat("g", ids[1], "ib", gen); err != nil {
		t.Fatalf("follower heartbeat: %v, want no rebalance", err)
	}
	if s := mustAnswer(t, h.sync(r2.MemberID, gen, nil)); s.Err != nil || string(s.Assignment) != ids[0] {
		t.Fatalf("leader sync: %+v", s)
	}
	// The first replacement is an old incarnation now.
	if err := h.c.Heartbeat("g", r.MemberID, "ia", gen); err != kerr.FencedInstanceID {
		t.Fatalf("replaced replacement: %v", err)
	}
}

// TestStaticRejoinThatChangesTheProtocolRebalances: when the restarted
// member's protocols would change the group's protocol, the group
// rebalances as for any change.
func TestStaticRejoinThatChangesTheProtocolRebalances(t *testing.T) {
	h := newHarness(t)
	both := []Protocol{{Name: "range", Metadata: meta("t")}, {Name: "roundrobin", Metadata: meta("t")}}
	ids, gen := h.staticGroup([]string{"ia", "ib"}, both...)
	swapped := []Protocol{both[1], both[0]}
	// A follower preferring roundrobin ties the vote; the leader's order
	// keeps range: no rebalance.
	if r := mustAnswer(t, h.join(staticReq("", "ib", swapped...))); r.Err != nil || r.Generation != gen {
		t.Fatalf("follower rejoin: %+v", r)
	}
	// The leader preferring roundrobin changes the choice.
	p := h.join(staticReq("", "ia", swapped...))
	mustWait(t, p)
	if err := h.c.Heartbeat("g", ids[0], "ia", gen); err != kerr.FencedInstanceID {
		t.Fatalf("old leader incarnation: %v", err)
	}
	d, _ := h.c.Describe("g")
	if d.State != PreparingRebalance {
		t.Fatalf("state %v, want PreparingRebalance", d.State)
	}
	follower := d.Members[1].MemberID
	f := h.join(staticReq(follower, "ib", swapped...))
	r, fr := mustAnswer(t, p), mustAnswer(t, f)
	if r.Err != nil || fr.Err != nil || r.Generation != gen+1 || r.Protocol != "roundrobin" || r.LeaderID != r.MemberID {
		t.Fatalf("rebalance: %+v / %+v", r, fr)
	}
}

// TestStaticRejoinDuringRebalanceFencesTheParkedJoin: the old
// incarnation's parked join answers FENCED_INSTANCE_ID and the new one
// takes its place in the rebalance.
func TestStaticRejoinDuringRebalanceFencesTheParkedJoin(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.staticGroup([]string{"ia", "ib", "ic"})
	a := h.join(staticReq(ids[0], "ia", Protocol{Name: "range", Metadata: meta("t", "u")})) // leader's change: rebalance
	mustWait(t, a)
	old := h.join(staticReq(ids[1], "ib"))
	mustWait(t, old)
	fresh := h.join(staticReq("", "ib"))
	if r := mustAnswer(t, old); r.Err != kerr.FencedInstanceID {
		t.Fatalf("old incarnation's parked join: %+v", r)
	}
	mustWait(t, fresh)
	c := h.join(staticReq(ids[2], "ic"))
	ra, rf := mustAnswer(t, a), mustAnswer(t, fresh)
	if ra.Err != nil || rf.Err != nil || mustAnswer(t, c).Err != nil || ra.Generation != gen+1 || rf.Generation != gen+1 ||
		len(ra.Members) != 3 || ra.Members[1].MemberID != rf.MemberID || ra.Members[1].InstanceID != "ib" {
		t.Fatalf("rebalance: %+v / %+v", ra, rf)
	}
}

// TestLeaveByInstanceID: LeaveGroup v3+ removes static members by
// instance id alone (admin tools), in a batch with others; the rest
// rebalance.
func TestLeaveByInstanceID(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.staticGroup([]string{"ia", "ib", "ic"})
	errs := h.c.Leave("g", []Leaving{{InstanceID: "ib"}, {MemberID: ids[2], InstanceID: "ic"}, {InstanceID: "nobody"}})
	if errs[0] != nil || errs[1] != nil || errs[2] != kerr.UnknownMemberID {
		t.Fatalf("leave: %v", errs)
	}
	if err := h.c.Heartbeat("g", ids[0], "ia", gen); err != kerr.RebalanceInProgress {
		t.Fatalf("remaining member: %v, want REBALANCE_IN_PROGRESS", err)
	}
	r := mustAnswer(t, h.join(staticReq(ids[0], "ia")))
	if r.Err != nil || len(r.Members) != 1 {
		t.Fatalf("rebalance after leave: %+v", r)
	}
	// The instance ids are free again: a new ib is a new member.
	p := h.join(staticReq("", "ib"))
	mustWait(t, p)
}

// TestStaticMembershipSurvivesACoordinatorChange: instance ids are
// recorded with the members, so at a new coordinator a restarted static
// member still replaces its old incarnation without a rebalance.
func TestStaticMembershipSurvivesACoordinatorChange(t *testing.T) {
	h := newHarness(t)
	recorded := map[string]Recorded{}
	h.c.cfg.Persist = func(group string, gen int32, state []byte) { recorded[group] = Recorded{gen, state} }
	ids, gen := h.staticGroup([]string{"ia", "ib"})
	h.c.Close()

	c := New(Config{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Minute,
		InitialRebalanceDelay: delay, Clock: &fakeClock{}, Restore: recorded})
	t.Cleanup(c.Close)
	c.mu.Lock()
	r, wait := c.join(staticReq("", "ib"))
	c.mu.Unlock()
	if wait != nil || r.Err != nil || r.Generation != gen || r.LeaderID != ids[0] {
		t.Fatalf("static rejoin at the new coordinator: %+v", r)
	}
	if err := c.Heartbeat("g", ids[0], "ia", gen); err != nil {
		t.Fatalf("other member: %v", err)
	}
	if err := c.Heartbeat("g", ids[1], "ib", gen); err != kerr.FencedInstanceID {
		t.Fatalf("old incarnation: %v", err)
	}
}

// TestMembershipRecordedBeforeStaticMembersIsRead: a version 1 record
// (no instance ids) is still restored, its members dynamic.
func TestMembershipRecordedBeforeStaticMembersIsRead(t *testing.T) {
	w := wire.Writer{}
	w.U8(stateVersionV1)
	w.String("consumer")
	w.String("range")
	w.String("m1") // the leader
	w.Uvarint(1)   // joinSeq
	w.Uvarint(1)   // one member
	w.String("m1")
	w.String("client")
	w.String("/127.0.0.1")
	w.Uvarint(1)
	w.Varint(session.Milliseconds())
	w.Varint(rebalance.Milliseconds())
	w.Uvarint(1)
	w.String("range")
	w.Bytes(meta("t"))
	w.Bytes([]byte("assigned"))
	g, err := decodeGroup("g", 4, w.B)
	if err != nil || len(g.members) != 1 || g.members["m1"] == nil || g.members["m1"].instanceID != "" ||
		len(g.static) != 0 || string(g.members["m1"].assignment) != "assigned" {
		t.Fatalf("decoded v1: %+v %v", g, err)
	}
}
