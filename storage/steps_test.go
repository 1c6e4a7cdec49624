package storage

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

// runSteps applies a stepped command entry after entry, as the engine
// proposes it, until its walk is done, and returns each entry's answer.
func (h *harness) runSteps(kind wire.Kind, limit uint32, encode func(wire.Steps) []byte) []wire.CountResult {
	h.t.Helper()
	var out []wire.CountResult
	steps := wire.Steps{Limit: limit}
	for {
		r := h.countCmd(kind, encode(steps))
		out = append(out, r)
		if r.Code != wire.CodeOK || !r.More {
			return out
		}
		if len(out) > 100 {
			h.t.Fatalf("a stepped walk did not end: %+v", out)
		}
		steps = r.Next
	}
}

// countTagged counts the stored keys starting with tag.
func (h *harness) countTagged(tag byte) int {
	h.t.Helper()
	n := 0
	if err := h.s.scan([]byte{tag}, func(_, _ []byte) error { n++; return nil }); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// stateDump is dump without the replies kept for retried proposals, which
// differ when one command is answered in several entries.
func (h *harness) stateDump() map[string]string {
	d := h.dump()
	for k := range d {
		if k[0] == tagReply || k[0] == tagRetried {
			delete(d, k)
		}
	}
	return d
}

func sumCounts(rs []wire.CountResult) uint64 {
	var n uint64
	for _, r := range rs {
		n += r.N
	}
	return n
}

// A seek of a whole queue goes in entries of at most Limit partitions, each
// writing at most that many cursors, and ends where one whole walk ends:
// the same stored state, key for key.
func TestASeekOfAWholeQueueGoesInSteps(t *testing.T) {
	const parts, limit = 2500, 1000
	whole, stepped := newCachedHarness(t, 100), newCachedHarness(t, 100)
	for _, h := range []*harness{whole, stepped} {
		fillPartitions(h, "q", parts)
		// A group holding leases in some partitions: the seek drops them.
		if r := h.popWith(wire.PopCmd{Queue: "q", Group: "g", Batch: 64, MaxPartitions: 64, LeaseMs: 60_000, SubMode: wire.SubAll,
			LeaseIDs: leaseIDs(h, 64)}); len(r.Claims) != 64 {
			t.Fatalf("pop: %d claims, want 64", len(r.Claims))
		}
	}
	seek := wire.SeekCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g", ToEnd: true}
	if r := whole.countCmd(wire.KindSeek, seek.Encode(nil)); r.Code != wire.CodeOK || r.N != parts || r.More {
		t.Fatalf("whole seek: %+v", r)
	}

	before := stepped.countTagged(tagCursor)
	entries := 0
	rs := stepped.runSteps(wire.KindSeek, limit, func(s wire.Steps) []byte {
		if entries++; entries == 2 {
			// The first entry made at most its limit of cursors.
			if made := stepped.countTagged(tagCursor) - before; made <= 0 || made > limit {
				t.Fatalf("the first step made %d cursors, want 1 to %d", made, limit)
			}
		}
		return seek.EncodeStep(s)
	})
	if len(rs) != 3 || sumCounts(rs) != parts || !rs[0].More || !rs[1].More || rs[2].More {
		t.Fatalf("stepped seek answered %+v, want 3 entries of %d partitions in all", rs, parts)
	}
	sameDump(t, whole.stateDump(), stepped.stateDump())
	for _, h := range []*harness{whole, stepped} {
		if r := h.popWith(wire.PopCmd{Queue: "q", Group: "g", Batch: 64, MaxPartitions: 64, LeaseMs: 60_000,
			LeaseIDs: leaseIDs(h, 64)}); len(r.Claims) != 0 {
			t.Fatalf("after a seek to the end a pop found %d claims", len(r.Claims))
		}
	}
}

// A group delete over every queue of a tenant goes in entries of at most
// Limit partitions, from queue to queue, and ends where one whole walk
// ends, with its subscriptions kept or dropped.
func TestAGroupDeleteGoesInSteps(t *testing.T) {
	const limit = 1000
	for _, meta := range []bool{false, true} {
		whole, stepped := newCachedHarness(t, 100), newCachedHarness(t, 100)
		for _, h := range []*harness{whole, stepped} {
			fillPartitions(h, "q1", 1500)
			fillPartitions(h, "q2", 1200)
			for _, q := range []string{"q1", "q2"} {
				seek := wire.SeekCmd{Tenant: wire.DefaultTenant, Queue: q, Group: "g", ToEnd: true}
				if r := h.countCmd(wire.KindSeek, seek.Encode(nil)); r.Code != wire.CodeOK {
					t.Fatalf("seek %s: %+v", q, r)
				}
			}
		}
		del := wire.DeleteGroupCmd{Tenant: wire.DefaultTenant, Group: "g", DeleteMetadata: meta}
		if r := whole.countCmd(wire.KindDeleteGroup, del.Encode(nil)); r.N != 2700 || r.More {
			t.Fatalf("whole delete: %+v", r)
		}
		rs := stepped.runSteps(wire.KindDeleteGroup, limit, del.EncodeStep)
		if len(rs) != 3 || sumCounts(rs) != 2700 {
			t.Fatalf("stepped delete (metadata %v) answered %+v, want 3 entries of 2700 cursors in all", meta, rs)
		}
		if q1, q2 := stepped.s.queue(wire.DefaultTenant, "q1"), stepped.s.queue(wire.DefaultTenant, "q2"); rs[0].Next.Queue != q1.id ||
			rs[1].Next.Queue != q2.id {
			t.Fatalf("steps stopped in queues %d and %d, want %d then %d", rs[0].Next.Queue, rs[1].Next.Queue, q1.id, q2.id)
		}
		if stepped.countTagged(tagCursor) != 0 {
			t.Fatalf("cursors left after the stepped delete")
		}
		sameDump(t, whole.stateDump(), stepped.stateDump())
		// Both answer the group's next pop alike: from the start without
		// metadata (the subscription stays, its ready set rebuilt), and as
		// a new group with it.
		for _, q := range []string{"q1", "q2"} {
			a := whole.popWith(wire.PopCmd{Queue: q, Group: "g", Batch: 64, MaxPartitions: 64, LeaseMs: 60_000, SubMode: wire.SubAll,
				LeaseIDs: leaseIDs(whole, 64)})
			b := stepped.popWith(wire.PopCmd{Queue: q, Group: "g", Batch: 64, MaxPartitions: 64, LeaseMs: 60_000, SubMode: wire.SubAll,
				LeaseIDs: leaseIDs(stepped, 64)})
			if len(a.Claims) != 64 || len(b.Claims) != 64 {
				t.Fatalf("metadata %v, %s: pops after the delete found %d and %d claims, want 64", meta, q, len(a.Claims), len(b.Claims))
			}
			for i := range a.Claims {
				if a.Claims[i].PartitionID != b.Claims[i].PartitionID || a.Claims[i].From != b.Claims[i].From {
					t.Fatalf("metadata %v, %s: claim %d differs: %+v and %+v", meta, q, i, a.Claims[i], b.Claims[i])
				}
			}
		}
	}
}

// leaseIDs draws n lease ids from h's sequence (two harnesses doing the same
// things draw the same ids).
func leaseIDs(h *harness, n int) []wire.ID {
	ids := make([]wire.ID, n)
	for i := range ids {
		ids[i] = h.nextID()
	}
	return ids
}
