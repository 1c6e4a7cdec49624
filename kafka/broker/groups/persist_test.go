package groups

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

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
	if r := recorded["g"]; r.Generation != gen || len(r.State) == 0 {
		t.Fatalf("recorded %+v, want generation %d with members", r, gen)
	}
	h.c.Close()

	clock := &fakeClock{}
	c := New(Config{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Minute,
		InitialRebalanceDelay: delay, Clock: clock, Restore: recorded})
	t.Cleanup(c.Close)
	for _, id := range ids {
		if err := c.Heartbeat("g", id, gen); err != nil {
			t.Fatalf("heartbeat of %s at the new coordinator: %v", id, err)
		}
		if err := c.ValidateCommit("g", id, gen); err != nil {
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
		if err := c.Heartbeat("g", ids[0], gen); err != nil && err != kerr.RebalanceInProgress {
			t.Fatalf("heartbeat: %v", err)
		}
	}
	if err := c.Heartbeat("g", ids[0], gen); err != kerr.RebalanceInProgress {
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
	if errs := h.c.Leave("g", ids); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if r := recorded["g"]; r.Generation <= gen || r.State != nil {
		t.Fatalf("recorded %+v after the last member left, want a later generation without members", r)
	}
}
