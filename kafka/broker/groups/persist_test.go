package groups

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// moveCoordinator checks group g was recorded at gen with members, closes
// h's coordinator and returns one built from the record, as after a
// leadership change, with its clock.
func (h *harness) moveCoordinator(recorded map[string]Recorded, gen int32) (*Coordinator, *fakeClock) {
	h.t.Helper()
	if r := recorded["g"]; r.Generation != gen || len(r.State) == 0 {
		h.t.Fatalf("recorded %+v, want generation %d with members", r, gen)
	}
	h.c.Close()
	clock := &fakeClock{}
	c := New(Config{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Minute,
		InitialRebalanceDelay: delay, Clock: clock, Restore: recorded})
	h.t.Cleanup(c.Close)
	return c, clock
}

// TestRestoredGroupContinuesAtItsGeneration records a stable group of two
// as a coordinator persists it, builds a second coordinator from the
// record (a leadership change) and checks the members heartbeat, sync and
// commit there at their generation without rejoining; a member that never
// comes back expires after its session and the other rebalances.
func TestRestoredGroupContinuesAtItsGeneration(t *testing.T) {
	h := newHarness(t)
	recorded := map[string]Recorded{}
	h.c.cfg.Persist = func(group string, gen int32, state []byte) { recorded[group] = Recorded{gen, state} }
	ids, gen := h.stable(2)
	c, clock := h.moveCoordinator(recorded, gen)
	for _, id := range ids {
		if err := c.Heartbeat("g", id, "", gen); err != nil {
			t.Fatalf("heartbeat of %s at the new coordinator: %v", id, err)
		}
		if err := c.ValidateCommit("g", id, "", gen); err != nil {
			t.Fatalf("commit check of %s: %v", id, err)
		}
	}
	s, wait := c.sync(SyncRequest{Group: "g", MemberID: ids[1], Generation: gen})
	if wait != nil || s.Err != nil || string(s.Assignment) != ids[1] {
		t.Fatalf("sync of %s at the new coordinator: %+v", ids[1], s)
	}
	// Only ids[0] keeps heartbeating: ids[1]'s first session here (the
	// rebalance timeout, the longer) runs out.
	for range 2*rebalance/session + 1 {
		clock.Advance(session / 2)
		if err := c.Heartbeat("g", ids[0], "", gen); err != nil && err != kerr.RebalanceInProgress {
			t.Fatalf("heartbeat: %v", err)
		}
	}
	if err := c.Heartbeat("g", ids[0], "", gen); err != kerr.RebalanceInProgress {
		t.Fatalf("heartbeat after the other member expired: %v, want REBALANCE_IN_PROGRESS", err)
	}
}

// TestEmptiedGroupRecordsNoMembers: a group whose last member leaves
// records no membership, so nothing is restored for it.
func TestEmptiedGroupRecordsNoMembers(t *testing.T) {
	h := newHarness(t)
	recorded := map[string]Recorded{}
	h.c.cfg.Persist = func(group string, gen int32, state []byte) { recorded[group] = Recorded{gen, state} }
	ids, gen := h.stable(1)
	if errs := h.c.Leave("g", byID(ids...)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if r := recorded["g"]; r.Generation <= gen || r.State != nil {
		t.Fatalf("recorded %+v after the last member left, want a later generation without members", r)
	}
}

// TestRebalanceBetweenJoinAndSyncContinuesAtTheNewCoordinator: the
// coordinator moves after it answered a rebalance's joins and before the
// leader's SyncGroup (a node handing off leadership as it stops). The new
// coordinator must know that generation and its members, as Kafka's rule
// for a coordinator change says: the leader syncs there with the
// assignments, the other member gets its own, and both heartbeat at the
// generation. Before the join was recorded, the new coordinator answered
// the syncs UNKNOWN_MEMBER_ID, which franz-go surfaces to its user.
func TestRebalanceBetweenJoinAndSyncContinuesAtTheNewCoordinator(t *testing.T) {
	h := newHarness(t)
	recorded := map[string]Recorded{}
	h.c.cfg.Persist = func(group string, gen int32, state []byte) { recorded[group] = Recorded{gen, state} }
	a, pa := h.newMember()
	b, pb := h.newMember()
	h.clock.Advance(delay)
	h.clock.Advance(delay)
	ra, rb := mustAnswer(t, pa), mustAnswer(t, pb)
	if ra.Err != nil || rb.Err != nil || ra.Generation != rb.Generation || ra.LeaderID != a {
		t.Fatalf("joins: %+v %+v", ra, rb)
	}
	gen := ra.Generation
	c, _ := h.moveCoordinator(recorded, gen)
	if d, ok := c.Describe("g"); !ok || d.State != CompletingRebalance || len(d.Members) != 2 {
		t.Fatalf("restored %+v, want CompletingRebalance with both members", d)
	}
	if err := c.Heartbeat("g", b, "", gen); err != nil {
		t.Fatalf("heartbeat of %s at the new coordinator: %v", b, err)
	}
	// A member that asks to join again at this generation (its join's
	// connection went with the old coordinator) is answered again.
	if r, wait := c.join(joinReq(a)); wait != nil || r.Err != nil || r.Generation != gen || len(r.Members) != 2 {
		t.Fatalf("the leader's join again: %+v (parked %v)", r, wait != nil)
	}
	c.mu.Lock()
	sb, waitB := c.sync(SyncRequest{Group: "g", MemberID: b, Generation: gen})
	c.mu.Unlock()
	if waitB == nil {
		t.Fatalf("the follower's sync before the leader's: %+v, want it parked", sb)
	}
	c.mu.Lock()
	sa, waitA := c.sync(SyncRequest{Group: "g", MemberID: a, Generation: gen,
		Assignments: map[string][]byte{a: []byte(a), b: []byte(b)}})
	c.mu.Unlock()
	if waitA != nil {
		sa = <-waitA
	}
	if sa.Err != nil || string(sa.Assignment) != a {
		t.Fatalf("the leader's sync at the new coordinator: %+v", sa)
	}
	if sb := <-waitB; sb.Err != nil || string(sb.Assignment) != b {
		t.Fatalf("the follower's sync: %+v", sb)
	}
	for _, id := range []string{a, b} {
		if err := c.Heartbeat("g", id, "", gen); err != nil {
			t.Fatalf("heartbeat of %s after the sync: %v", id, err)
		}
	}
}
