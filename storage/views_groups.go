package storage

import (
	"cmp"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble"

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

// StagedPosition is a partition where a consumer group has an offset
// staged by a Kafka transaction that is not resolved here yet.
type StagedPosition struct {
	Queue string
	Index uint32
}

// TxnStagedPositions lists the partitions of this raft group where group
// has an offset staged by a Kafka transaction (TxnOffsetCommit) that this
// group has not resolved yet: positions about to move, or to stay, as the
// transaction's coordinator decided or will decide. A require_stable
// OffsetFetch must not answer them (KIP-447): a consumer starting from
// the old position would read again what a committed transaction consumed.
func (s *Store) TxnStagedPositions(tenant wire.ID, group string) []StagedPosition {
	var xids []wire.ID
	s.mu.RLock()
	for id, p := range s.xprep {
		if p.sub.Kind != wire.KindKafkaStage {
			continue
		}
		if part, err := decodeKafkaPart(p.sub.Body); err == nil && part.tenant == tenant && part.pieces > 0 {
			xids = append(xids, id)
		}
	}
	s.mu.RUnlock()
	if len(xids) == 0 {
		return nil
	}
	// The pieces are read after the lock: a part resolved meanwhile has
	// its pieces deleted in the same write, so it lists nothing.
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return nil
	}
	var out []StagedPosition
	for _, id := range xids {
		prefix := xStagePrefix(id)
		it := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
		for it.First(); it.Valid(); it.Next() {
			c, err := wire.DecodeKafkaStageCmd(it.Value())
			if err != nil {
				continue
			}
			for _, o := range c.Offsets {
				if o.Group == group {
					out = append(out, StagedPosition{Queue: o.Queue, Index: o.PartitionIndex})
				}
			}
		}
		_ = it.Close()
	}
	return out
}
