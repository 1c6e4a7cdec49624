package storage

import (
	"cmp"
	"slices"
	"strings"

	"github.com/queen-mq/queen/wire"
)

// Views of consumer groups for readers: the Kafka coordinator (OffsetFetch,
// ListGroups, DescribeGroups) and the HTTP consumer-group routes. They read
// the committed in-memory model under the read lock and return copies.

// GroupPosition is a consumer group's position in one partition: the next
// offset it will consume (a Kafka committed offset), with the metadata
// string the last commit stored.
type GroupPosition struct {
	Queue     string
	Partition string
	Index     uint32
	Offset    uint64
	Metadata  string
	UpdatedMs int64
}

// GroupPositions returns a group's positions in one queue of the tenant,
// or in all of them when queue is "", sorted by queue then partition index.
// Partitions the group never touched have no position.
func (s *Store) GroupPositions(tenant wire.ID, group, queue string) []GroupPosition {
	defer s.readLock()()
	var out []GroupPosition
	add := func(q *queueState) {
		if q.subs[group] == nil {
			return
		}
		src := s.peekSource()
		defer src.close()
		for i := range q.pids {
			p := s.peekVia(src, q, uint32(i))
			if p == nil {
				continue
			}
			if c := p.cursors.get(group); c != nil {
				out = append(out, GroupPosition{Queue: q.name, Partition: p.name, Index: p.index,
					Offset: c.pos, Metadata: c.metadata, UpdatedMs: c.updatedMs})
			}
		}
	}
	if queue != "" {
		if q := s.queue(tenant, queue); q != nil {
			add(q)
		}
		return out
	}
	for _, q := range s.tenantQueues(tenant) {
		add(q)
	}
	slices.SortFunc(out, func(a, b GroupPosition) int {
		if c := strings.Compare(a.Queue, b.Queue); c != 0 {
			return c
		}
		return cmp.Compare(a.Index, b.Index)
	})
	return out
}

// GroupNames lists the tenant's consumer groups: every group subscribed to
// at least one queue (the queue-mode group included), sorted.
func (s *Store) GroupNames(tenant wire.ID) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := map[string]bool{}
	for _, q := range s.tenantQueues(tenant) {
		for g := range q.subs {
			seen[g] = true
		}
	}
	out := make([]string, 0, len(seen))
	for g := range seen {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// HasGroup reports whether the group is subscribed to any of the tenant's
// queues.
func (s *Store) HasGroup(tenant wire.ID, group string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, q := range s.tenantQueues(tenant) {
		if q.subs[group] != nil {
			return true
		}
	}
	return false
}
