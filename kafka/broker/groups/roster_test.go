package groups

import "testing"

// A recorded membership reads back as the members that joined, in join
// order, with the leader, the protocol and each one's assignment.
func TestRosterReadsTheRecordedMembership(t *testing.T) {
	h := newHarness(t)
	recorded := map[string]Recorded{}
	h.c.cfg.Persist = func(group string, gen int32, state []byte) { recorded[group] = Recorded{gen, state} }
	ids, _ := h.stable(2)
	r, err := DecodeRoster(recorded["g"].State)
	if err != nil {
		t.Fatal(err)
	}
	if r.ProtocolType != "consumer" || r.Protocol != "range" || r.Leader != ids[0] || len(r.Members) != 2 {
		t.Fatalf("roster %+v", r)
	}
	for i, m := range r.Members {
		// syncAll assigns each member its own id as the assignment.
		if m.ID != ids[i] || m.ClientID != "c" || m.ClientHost != "/127.0.0.1" || string(m.Assignment) != ids[i] {
			t.Fatalf("member %d: %+v", i, m)
		}
	}
	if _, err := DecodeRoster([]byte{9}); err == nil {
		t.Fatal("an unknown encoding decoded")
	}
}
