package storage

import (
	"slices"

	"github.com/queen-mq/queen/wire"
)

// The lease index (Store.leases) finds the cursors holding a lease by its
// id, for an extend, a transaction's required lease and a retried pop. A
// per-partition lease is one cursor's; a shared lease (wire/lease.go, from
// FormatV4) is held by every partition one pop claimed, so in one group an
// id may name several (partition, consumer group) cursors: the first is
// the map's value, the rest its more, in the order the pop claimed them.
// It is not stored: load and image rebuild it from the cursors' leases.

// indexLease records that group's cursor in p holds lease id.
func (s *Store) indexLease(id wire.ID, p *partState, group string) {
	ref, ok := s.leases[id]
	if !ok {
		s.leases[id] = leaseRef{part: p, group: group}
		return
	}
	if ref.part == p || slices.ContainsFunc(ref.more, func(r leaseRef) bool { return r.part == p }) {
		return
	}
	if ref.more == nil {
		ref.more = make([]leaseRef, 0, 4) // a pop over a few partitions grows it once
	}
	ref.more = append(ref.more, leaseRef{part: p, group: group})
	s.leases[id] = ref
}

// unindexLease forgets that a cursor in p holds lease id (one pop's lease
// is held by one consumer group, so the partition names the cursor).
func (s *Store) unindexLease(id wire.ID, p *partState) {
	ref, ok := s.leases[id]
	if !ok {
		return
	}
	if ref.part == p {
		if len(ref.more) == 0 {
			delete(s.leases, id)
			return
		}
		next := ref.more[0]
		next.more = slices.Delete(ref.more, 0, 1)
		s.leases[id] = next
		return
	}
	if i := slices.IndexFunc(ref.more, func(r leaseRef) bool { return r.part == p }); i >= 0 {
		ref.more = slices.Delete(ref.more, i, i+1)
		s.leases[id] = ref
	}
}

// leaseHolders calls f for each cursor indexed as holding lease id, in
// claim order, until f answers false. f must not change the index: it
// sees a copy of the holders taken before the first call.
func (s *Store) leaseHolders(id wire.ID, f func(ref leaseRef) bool) {
	ref, ok := s.leases[id]
	if !ok {
		return
	}
	more := ref.more
	if len(more) > 0 {
		more = slices.Clone(more) // f may close a lease, which unindexes it
	}
	if !f(leaseRef{part: ref.part, group: ref.group}) {
		return
	}
	for _, r := range more {
		if !f(r) {
			return
		}
	}
}
