package storage

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

// A stepped group delete removes the positions the group had when the
// delete began, not those a group of the same name committed while the
// walk went on (it re-formed between two steps): deleting those would make
// the new members consume again what they had just committed (review
// finding 5 of issue 32).
func TestAGroupDeleteKeepsPositionsCommittedDuringItsWalk(t *testing.T) {
	h := newHarness(t)
	h.allocTopic("t", 4)
	for i := range int32(4) {
		h.produce(h.produceCmd("t", i, wire.NoProducer, 0, 0, 3))
		if code := h.commit("t", "g", i, 1, ""); code != wire.CodeOK {
			t.Fatalf("commit %d: %v", i, code)
		}
	}
	h.now += 1000
	del := wire.DeleteGroupCmd{Tenant: wire.DefaultTenant, Group: "g", DeleteMetadata: true}
	steps := wire.Steps{Limit: 1}
	r := h.countCmd(wire.KindDeleteGroup, del.EncodeStep(steps))
	if r.N != 1 || !r.More || r.Next.Since != h.now {
		t.Fatalf("first step: %+v, want one partition and the walk's start carried on", r)
	}
	// The group re-forms and commits in a partition the walk has not
	// reached yet.
	h.now += 1000
	if code := h.commit("t", "g", 3, 2, "new"); code != wire.CodeOK {
		t.Fatalf("commit during the walk: %v", code)
	}
	for r.More {
		h.now += 10
		r = h.countCmd(wire.KindDeleteGroup, del.EncodeStep(r.Next))
	}
	for i := range uint32(3) {
		if p, _ := h.s.PartitionByIndex(wire.DefaultTenant, "t", i); h.hasPosition(p, "g") {
			t.Fatalf("partition %d: the position from before the delete is still there", i)
		}
	}
	p3, _ := h.s.PartitionByIndex(wire.DefaultTenant, "t", 3)
	if pos, ok := p3.Store().GroupPosition(p3, "g"); !ok || pos != 2 {
		t.Fatalf("partition 3: the position committed during the walk is %d (found %v), want 2", pos, ok)
	}
}

func (h *harness) hasPosition(p Partition, group string) bool {
	_, ok := p.Store().GroupPosition(p, group)
	return ok
}
