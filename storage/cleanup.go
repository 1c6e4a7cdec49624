package storage

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// Removing idle empty partitions (PARTITION_CLEANUP_DAYS, spec §1.1;
// docs/placement.md, "Removing idle partitions"). A queue that has seen
// millions of customers would otherwise keep a partition state, its
// cursors and a directory entry for each of them for ever.
//
// A partition is removed when its log holds no message (retention dropped
// them all, or it never held one), nothing was pushed to it, none of its
// cursors moved and it was not created for the leader's cleanup age, no
// lease is held on it, no prepared transaction pins a cursor of it, and no
// Kafka producer or transaction has state in it. Queues created through
// Kafka keep every partition: a Kafka partition index is permanent.
//
// The group holding the partition removes it, in a tick, and keeps its
// index as gone for ever: a push or an EnsureShardCmd for it from a stale
// directory is refused (CodePartitionGone), so it is never made again at
// that index. Its queue's home then drops the directory entry: at once when
// the home holds it, otherwise when the shard's leader tells it
// (KindDropDir, then KindForgetDrops here) or when an engine whose push was
// refused allocates the name again (AllocCmd.Gone). The name then gets a
// new index, placed by the rule, with offsets from 0.

// goneKey marks partition index of queue qid removed from this group; its
// value is one byte, 1 while the home has not been told.
func goneKey(qid uint64, index uint32) []byte {
	return binary.BigEndian.AppendUint32(appendU64([]byte{tagGone}, qid), index)
}

func gonePrefix(qid uint64) []byte { return appendU64([]byte{tagGone}, qid) }

// cleanupSweepName names the cleanup sweeper's progress.
const cleanupSweepName = "partition-cleanup"

// cleanupBudget is how many partitions one tick visits.
var cleanupBudget = 8192

// cleanupInterval is how often a cleanup pass starts for an age of ms: a
// partition stays at most an eighth longer than the age, and a pass starts
// at most every hour and at least every second.
func cleanupInterval(ms int64) int64 { return min(max(ms/8, 1000), 3600*1000) }

type cleanupSweeper struct{}

func (cleanupSweeper) name() string { return cleanupSweepName }

func (cleanupSweeper) due(s *Store, nowMs int64) bool {
	ms := s.cfg.PartitionCleanupMs
	return ms > 0 && len(s.queuesByID) > 0 && s.sweepDue(cleanupSweepName, nowMs, cleanupInterval(ms))
}

func (cleanupSweeper) sweep(s *Store, ctx *applyCtx) {
	ms := ctx.tick.PartitionCleanupMs
	if ms <= 0 {
		return
	}
	idleSince := ctx.nowMs - ms
	var probe *pebble.Iterator
	s.sweepPartitions(ctx, cleanupSweepName, cleanupInterval(ms), cleanupBudget, s.queuesByID,
		func(q *queueState) bool { return !q.kafka }, false,
		func(ctx *applyCtx, q *queueState, p *partState, _ int) (int, bool) {
			if !s.idleAndEmpty(p, idleSince) {
				return 0, true
			}
			if probe == nil {
				probe = ctx.b.NewIter(nil)
			}
			if !keysUnder(probe, chunkPrefix(p.id)) && !keysUnder(probe, txnPrefix(p.id)) {
				s.removePartition(ctx, q, p)
			}
			return 0, true
		})
	if probe != nil {
		if err := probe.Close(); err != nil {
			ctx.fail(fmt.Errorf("storage: cleanup probe: %w", err))
		}
	}
}

// keysUnder reports whether the store, as the apply batch sees it, holds a
// key under prefix. An empty partition has no chunk or transaction-index
// key left (retention deletes them with the chunks); one that still has
// some (a Kafka log start moved inside a chunk) is not removed, so removing
// never needs a range delete: range deletes in the apply batch made every
// later iterator of the batch re-read them all, and a pass over many
// partitions quadratic. It reads through the batch, never the committed
// store alone: how many entries one batch holds differs between replicas,
// so what is committed at a given entry does too.
func keysUnder(it *pebble.Iterator, prefix []byte) bool {
	it.SetBounds(prefix, prefixEnd(prefix))
	return it.First()
}

// idleAndEmpty reports whether p may be removed: see the file comment.
func (s *Store) idleAndEmpty(p *partState, idleSince int64) bool {
	if p.start < p.next || p.createdMs > idleSince || p.lastWriteMs > idleSince || s.partReserved(p.id) {
		return false // a prepared transaction pushes to it or sets a position in it
	}
	for _, c := range p.cursors {
		// Retention takes a lease's messages with it, so an empty
		// partition holds none; the check costs nothing and keeps
		// removal safe should that change.
		if c.lease != nil || c.updatedMs > idleSince || s.anyPin(p.id, c.group) {
			return false
		}
	}
	if _, ok := s.kafka.producers[p.id]; ok {
		return false
	}
	_, ok := s.kafka.partTxns[p.id]
	return !ok
}

// removePartition deletes p and everything kept for it, takes it out of its
// queue's totals and marks its index gone; the home drops the directory
// entry now when it is this group.
func (s *Store) removePartition(ctx *applyCtx, q *queueState, p *partState) {
	for _, c := range p.cursors {
		ctx.del(cursorKey(p.id, c.group))
	}
	ctx.del(partitionKey(p.id))
	s.detachPart(q, p)
	q.gone.set(p.index)
	pending := !q.home || !s.dropDirEntry(ctx, q, p.index, uint16(s.cfg.Group))
	if pending {
		q.dropsPending = append(q.dropsPending, p.index)
		ctx.set(goneKey(q.id, p.index), []byte{1})
	} else {
		ctx.set(goneKey(q.id, p.index), []byte{0})
	}
	ctx.touch(q)
}

// dropDirEntry drops a home's directory entry at index when it is live and
// placed in group g, and reports whether the directory no longer has one
// there. The index is never given out again.
func (s *Store) dropDirEntry(ctx *applyCtx, q *queueState, index uint32, g uint16) bool {
	if int(index) >= len(q.dir) {
		return false
	}
	slot := q.dir[index]
	if slot.removed() {
		return true
	}
	if slot.group() != g {
		return false
	}
	d, _ := q.dirEntry(ctx.get, index)
	q.dirNames.del(d.name, index)
	if int(g) < len(q.dirInGroup) {
		q.dirInGroup[g]--
	}
	q.dir[index] = 0
	ctx.del(dirKey(q.id, index))
	if s.at(wire.FormatV2) && int(index) == len(q.dir)-1 {
		// The last entry goes: its key was what told a walk how long the
		// directory is, and an index once handed out is never handed out
		// again (a walked restart would allocate it anew, where a replica
		// that kept running allocates the next).
		ctx.set(dirPrefix(q.id), binary.AppendUvarint(nil, uint64(len(q.dir))))
	}
	ctx.touch(q)
	return true
}

// applyDropDir, at a queue's home, drops the directory entries of
// partitions their group removed.
func (s *Store) applyDropDir(ctx *applyCtx, c *wire.DropDirCmd) wire.CodeResult {
	q := s.queue(c.Tenant, c.Queue)
	if q == nil || !q.home || q.inc != c.Inc {
		return wire.CodeResult{Code: wire.CodeQueueNotFound}
	}
	for _, i := range c.Indexes {
		s.dropDirEntry(ctx, q, i, c.Group)
	}
	return wire.CodeResult{Code: wire.CodeOK}
}

// applyForgetDrops, in the group that removed the partitions, records that
// their home has dropped the directory entries.
func (s *Store) applyForgetDrops(ctx *applyCtx, c *wire.DropDirCmd) wire.CodeResult {
	q := s.queue(c.Tenant, c.Queue)
	if q == nil || q.inc != c.Inc {
		return wire.CodeResult{Code: wire.CodeQueueNotFound}
	}
	// The reconciler names the oldest owed drops, in order (PendingDrops):
	// taking them off the front costs what they are, where filtering the
	// whole list made each command cost every drop owed, millions during a
	// large cleanup, and stalled the group.
	if n := len(c.Indexes); n <= len(q.dropsPending) && slices.Equal(q.dropsPending[:n], c.Indexes) {
		for _, i := range c.Indexes {
			ctx.set(goneKey(q.id, i), []byte{0})
		}
		q.dropsPending = q.dropsPending[n:]
		if len(q.dropsPending) == 0 {
			q.dropsPending = nil
		}
		return wire.CodeResult{Code: wire.CodeOK}
	}
	told := make(map[uint32]bool, len(c.Indexes))
	for _, i := range c.Indexes {
		told[i] = true
	}
	kept := q.dropsPending[:0]
	for _, i := range q.dropsPending {
		if told[i] {
			ctx.set(goneKey(q.id, i), []byte{0})
		} else {
			kept = append(kept, i)
		}
	}
	q.dropsPending = kept
	return wire.CodeResult{Code: wire.CodeOK}
}

// dropGone, at a queue's home, drops the directory entries of indexes an
// engine found refused as gone by the group the directory places them in.
func (s *Store) dropGone(ctx *applyCtx, q *queueState, gone []uint32) {
	for _, i := range gone {
		if int(i) < len(q.dir) {
			s.dropDirEntry(ctx, q, i, q.dir[i].group()) // whichever group it is in: that group refused it
		}
	}
}

// loadGone reads the indexes removed from this group.
func (s *Store) loadGone() error {
	return s.scan([]byte{tagGone}, func(k, v []byte) error {
		if len(k) != 13 || len(v) != 1 {
			return nil
		}
		q := s.queuesByID[binary.BigEndian.Uint64(k[1:9])]
		if q == nil {
			return nil
		}
		index := binary.BigEndian.Uint32(k[9:13])
		q.gone.set(index)
		q.spanTo(index)
		if v[0] == 1 {
			q.dropsPending = append(q.dropsPending, index)
		}
		return nil
	})
}

// PendingDrops lists up to wire.MaxDropDir indexes of a queue's partitions
// this group removed whose home has not dropped them yet.
func (s *Store) PendingDrops(tenant wire.ID, queue string) []uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q := s.queue(tenant, queue)
	if q == nil {
		return nil
	}
	return append([]uint32(nil), q.dropsPending[:min(len(q.dropsPending), wire.MaxDropDir)]...)
}
