package storage

import (
	"slices"
	"testing"

	"github.com/queen-mq/queen/wire"
)

func (h *harness) commit(queue, group string, index int32, offset uint64, meta string) wire.Code {
	h.t.Helper()
	c := wire.CommitPositionCmd{Tenant: wire.DefaultTenant, Queue: queue, Group: group, PartitionIndex: index, Offset: offset, Metadata: meta}
	r, err := wire.DecodeCodeResult(h.apply(wire.KindCommitPosition, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r.Code
}

func (h *harness) deleteOffsets(group string, items ...wire.PartitionRef) []wire.Code {
	h.t.Helper()
	c := wire.DeleteOffsetsCmd{Tenant: wire.DefaultTenant, Group: group, Items: items}
	r, err := wire.DecodeCodesResult(h.apply(wire.KindDeleteOffsets, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r.Codes
}

func TestGroupPositionsAndDeleteOffsets(t *testing.T) {
	h := newHarness(t)
	h.push("t", "p0", "1", "2", "3", "4", "5")
	h.push("t", "p1", "1", "2")
	h.push("u", "p0", "1")
	if c := h.commit("t", "kg", 0, 3, "meta"); c != wire.CodeOK {
		t.Fatalf("commit: %v", c)
	}
	h.commit("t", "kg", 1, 1, "")
	h.commit("u", "other", 0, 1, "")
	want := []GroupPosition{
		{Queue: "t", Partition: "p0", Index: 0, Offset: 3, Metadata: "meta", UpdatedMs: h.now},
		{Queue: "t", Partition: "p1", Index: 1, Offset: 1, UpdatedMs: h.now},
	}
	if got := h.s.GroupPositions(wire.DefaultTenant, "kg", ""); !slices.Equal(got, want) {
		t.Fatalf("positions:\n got %+v\nwant %+v", got, want)
	}
	if got := h.s.GroupPositions(wire.DefaultTenant, "kg", "u"); len(got) != 0 {
		t.Fatalf("positions in a queue the group never touched: %+v", got)
	}
	if got := h.s.GroupNames(wire.DefaultTenant); !slices.Equal(got, []string{"kg", "other"}) {
		t.Fatalf("group names: %v", got)
	}
	if !h.s.HasGroup(wire.DefaultTenant, "kg") || h.s.HasGroup(wire.DefaultTenant, "nope") || h.s.HasGroup(wire.ID{1}, "kg") {
		t.Fatal("HasGroup")
	}

	// A committed position is where the group's pops continue.
	pop := h.pop("t", "kg", 10, 60000)
	if len(pop.Claims) != 1 || pop.Claims[0].From != 3 && pop.Claims[0].From != 1 {
		t.Fatalf("pop after commits: %+v", pop.Claims)
	}
	if len(h.s.leases) != 1 {
		t.Fatalf("%d leases, want 1", len(h.s.leases))
	}
	codes := h.deleteOffsets("kg", wire.PartitionRef{Queue: "t", Partition: 0}, wire.PartitionRef{Queue: "t", Partition: 1},
		wire.PartitionRef{Queue: "x", Partition: 0}, wire.PartitionRef{Queue: "t", Partition: 9})
	if !slices.Equal(codes, []wire.Code{wire.CodeOK, wire.CodeOK, wire.CodeQueueNotFound, wire.CodePartitionNotFound}) {
		t.Fatalf("delete codes: %v", codes)
	}
	if len(h.s.leases) != 0 {
		t.Fatalf("the deleted position's lease survived: %d leases", len(h.s.leases))
	}
	// Again: nothing left to delete, still OK.
	if codes := h.deleteOffsets("kg", wire.PartitionRef{Queue: "t", Partition: 0}); codes[0] != wire.CodeOK {
		t.Fatalf("repeated delete: %v", codes)
	}
	h.commit("t", "kg", 1, 2, "again")
	h.s.Close()
	h.open()
	want = []GroupPosition{{Queue: "t", Partition: "p1", Index: 1, Offset: 2, Metadata: "again", UpdatedMs: h.now}}
	if got := h.s.GroupPositions(wire.DefaultTenant, "kg", "t"); !slices.Equal(got, want) {
		t.Fatalf("positions after reopen:\n got %+v\nwant %+v", got, want)
	}
	// The group is still subscribed: an untouched partition starts over
	// from the start, as its subscription (all) says.
	if !h.s.MayPop(wire.DefaultTenant, "t", "kg", "p0", h.now) {
		t.Fatal("partition with a deleted position is not deliverable again")
	}
}
