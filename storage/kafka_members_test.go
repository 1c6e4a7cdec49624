package storage

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

func (h *harness) members(group string, gen int32, state string) {
	h.t.Helper()
	c := wire.GroupMembersCmd{Tenant: wire.DefaultTenant, Group: group, Generation: gen, State: []byte(state)}
	if code := h.code(wire.KindGroupMembers, c.Encode(nil)); code != wire.CodeOK {
		h.t.Fatalf("group members: %v", code)
	}
}

// TestGroupMembersKeepTheNewestGeneration: a recorded membership is
// replaced by a later generation only, forgotten by an empty one, and
// survives a reopen.
func TestGroupMembersKeepTheNewestGeneration(t *testing.T) {
	h := newHarness(t)
	get := func(group string) (GroupMembers, bool) {
		m, ok := h.s.GroupMembersOf(wire.DefaultTenant)[group]
		return m, ok
	}
	h.members("g", 3, "three")
	h.members("g", 2, "two") // overtaken: ignored
	if m, _ := get("g"); m.Generation != 3 || string(m.State) != "three" {
		t.Fatalf("after a stale write: %+v", m)
	}
	h.members("g", 4, "four")
	h.members("h", 1, "one")
	h.s.Close()
	h.open() // from disk
	if m, _ := get("g"); m.Generation != 4 || string(m.State) != "four" {
		t.Fatalf("after reopen: %+v", m)
	}
	if len(h.s.GroupMembersOf(wire.ID{9})) != 0 {
		t.Fatal("another tenant sees the memberships")
	}
	h.members("g", 5, "")
	if m, ok := get("g"); ok {
		t.Fatalf("an emptied group still recorded: %+v", m)
	}
	if _, ok := get("h"); !ok {
		t.Fatal("the other group was forgotten")
	}
}
