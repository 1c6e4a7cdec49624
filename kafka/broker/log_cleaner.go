package broker

import (
	"context"
	"math"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// The log cleaner applies the topic configs that drop records by reading
// them: retention.bytes (the log's size) and cleanup.policy=compact (the
// last record per key). The leader of each partition's raft group decides
// from its committed records and proposes a LogCleanCmd naming what goes,
// so every replica drops the same records; no replica decides alone.
// retention.ms needs no cleaner: it is the queue's retention, which the
// raft groups' sweepers apply.

const (
	// cleanerKeyBytes bounds the keys one compaction pass remembers (Kafka's
	// log.cleaner.dedupe.buffer.size): past it, the pass compacts the log
	// up to where its map filled, and the next pass goes on from there.
	cleanerKeyBytes = 64 << 20
	// cleanCmdBytes bounds the chunk bytes one LogCleanCmd rewrites, so
	// applying it stays short.
	cleanCmdBytes = 16 << 20
	// cleanCmdRanges bounds the offset ranges of one LogCleanCmd.
	cleanCmdRanges = 4096
)

// cleanState is what this node remembers of a partition it cleaned: the
// offset its last compaction covered and when a tombstone it kept becomes
// removable (0: none). Lost with leadership, it only costs a pass.
type cleanState struct {
	compactedTo    uint64
	tombstoneDueMs int64
}

// cleanLogs runs the cleaner every LogCleanerInterval until Close.
func (b *Broker) cleanLogs() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.LogCleanerInterval)
	defer t.Stop()
	cleaned := map[uint64]cleanState{}
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
			b.cleanOnce(b.ctx, cleaned)
		}
	}
}

// cleanOnce cleans every partition this node leads of the topics whose
// configs ask for it, and forgets the partitions it no longer cleans.
func (b *Broker) cleanOnce(ctx context.Context, cleaned map[uint64]cleanState) {
	seen := map[uint64]bool{}
	for _, tp := range b.engine.CleanedTopics() {
		for i := range tp.Partitions {
			part, ok := b.partition(tp.Tenant, tp.Name, int32(i))
			if !ok || !b.engine.Leads(part.group) {
				continue
			}
			seen[part.ID] = true
			st := cleaned[part.ID]
			if err := b.cleanPartition(ctx, tp.Tenant, part, tp.Settings, &st); err != nil {
				if ctx.Err() == nil {
					b.log.Warn("kafka log cleaner", "topic", tp.Name, "partition", i, "err", err)
				}
				continue
			}
			cleaned[part.ID] = st
		}
	}
	for id := range cleaned {
		if !seen[id] {
			delete(cleaned, id)
		}
	}
}

// cleanPartition proposes one partition's cleaning: the log start that
// retention.bytes asks for, then the compaction due, in commands of
// bounded size.
func (b *Broker) cleanPartition(ctx context.Context, tenant wire.ID, part cachedPartition, set wire.TopicSettings, st *cleanState) error {
	store := part.Store()
	if set.Delete && set.RetentionBytes >= 0 {
		at, err := sizeCut(store, part.Partition, set.RetentionBytes)
		if err == nil && at > part.LogStart() {
			err = b.proposeClean(ctx, part.group, &wire.LogCleanCmd{Tenant: tenant, PartitionID: part.ID, StartAt: at}, b.metrics.cleanedByRetention)
		}
		if err != nil {
			return err
		}
	}
	if !set.Compact {
		return nil
	}
	// The leader's clock: the command names what goes, so replicas never
	// read it (the replicated clock only moves when entries are applied).
	now := b.engine.NowMs()
	if due, err := compactionDue(store, part.Partition, set, *st, now); !due || err != nil {
		return err
	}
	plan, err := planCompaction(store, part.Partition, set, now, st.compactedTo, b.engine.OpenRecord)
	if err != nil {
		return err
	}
	for _, drop := range plan.cmds {
		if err := b.proposeClean(ctx, part.group, &wire.LogCleanCmd{Tenant: tenant, PartitionID: part.ID, Drop: drop}, b.metrics.cleanedByCompaction); err != nil {
			return err
		}
	}
	*st = cleanState{compactedTo: plan.end, tombstoneDueMs: plan.tombstoneDueMs}
	return nil
}

// proposeClean proposes c and counts the offsets it emptied in cleaned.
func (b *Broker) proposeClean(ctx context.Context, group int, c *wire.LogCleanCmd, cleaned *metrics.Counter) error {
	cctx, cancel := context.WithTimeout(ctx, adminWait)
	defer cancel()
	res, err := b.engine.LogClean(cctx, group, c)
	if err == nil {
		err = res.Code.Err()
	}
	if err == nil {
		cleaned.Add(int(res.N))
	}
	return err
}

// sizeCut is where retention.bytes puts p's log start: Kafka deletes the
// oldest segments while what remains still holds at least retention.bytes,
// and never the active one; here a chunk is the segment, and the last
// chunk stays. 0 when nothing goes.
func sizeCut(store *storage.Store, p storage.Partition, limit int64) (uint64, error) {
	start := p.LogStart()
	var live []storage.ChunkSpan
	var total int64
	if err := store.ChunkSpans(p, func(c storage.ChunkSpan) bool {
		if c.End > start {
			live = append(live, c)
			total += int64(c.Size)
		}
		return true
	}); err != nil {
		return 0, err
	}
	var cut uint64
	for i, c := range live[:max(len(live)-1, 0)] {
		if total-int64(c.Size) < limit {
			break
		}
		total -= int64(c.Size)
		cut = live[i].End
	}
	return cut, nil
}

// compactionDue reports whether p has enough written since its last
// compaction (min.cleanable.dirty.ratio of its stored bytes, as Kafka
// measures it), or a tombstone that became removable.
func compactionDue(store *storage.Store, p storage.Partition, set wire.TopicSettings, st cleanState, now int64) (bool, error) {
	if st.tombstoneDueMs > 0 && now >= st.tombstoneDueMs {
		return true, nil
	}
	if p.HighWatermark() <= max(st.compactedTo, p.LogStart()) {
		return false, nil
	}
	if st.compactedTo == 0 {
		return true, nil // never compacted by this node
	}
	var clean, dirty int64
	err := store.ChunkSpans(p, func(c storage.ChunkSpan) bool {
		if c.Base < st.compactedTo {
			clean += int64(c.Size)
		} else {
			dirty += int64(c.Size)
		}
		return true
	})
	return float64(dirty) >= set.MinCleanableDirtyRatio*float64(clean+dirty), err
}

// compactionPlan is one compaction pass: the ranges to drop, cut into
// commands of bounded size, the offset the pass covered, and when the
// first tombstone it kept becomes removable (0: none).
type compactionPlan struct {
	cmds           [][]wire.OffsetRange
	end            uint64
	tombstoneDueMs int64
}

// planCompaction reads p up to what may be compacted (records younger than
// min.compaction.lag.ms may not) twice: first the last offset of every key
// from compactedTo (the log start when 0), then from the log start which
// records to drop: those a later record of their key supersedes, and
// tombstones (null values) kept delete.retention.ms past their append.
// Records without a key (pushed over HTTP) stay. As Kafka's cleaner the
// first read leaves out what an earlier pass compacted: there each key is
// at most once, so only a later record can supersede one. open turns a
// record of an encrypted topic into its plaintext: its key and whether it
// is a tombstone are sealed with it.
func planCompaction(store *storage.Store, p storage.Partition, set wire.TopicSettings, now int64, compactedTo uint64,
	open func(*wire.Record)) (compactionPlan, error) {
	plan := compactionPlan{end: p.HighWatermark()}
	if set.MinCompactionLagMs > 0 {
		lagCut := now - set.MinCompactionLagMs
		if err := store.ChunkSpans(p, func(c storage.ChunkSpan) bool {
			if c.AppendMs > lagCut {
				plan.end = min(plan.end, c.Base)
				return false
			}
			return true
		}); err != nil {
			return plan, err
		}
	}
	start := p.LogStart()
	// Transactions: nothing from the last stable offset on is compacted
	// (it may yet be aborted), and the records of aborted transactions and
	// the markers neither supersede a record nor are dropped (a marker the
	// aborted list still names must stay for read_committed clients).
	txns := store.Txns(p, start, plan.end)
	plan.end = min(plan.end, txns.LastStable)
	last := map[string]uint64{}
	keyBytes := 0
	err := eachStored(store, p, max(start, compactedTo), plan.end, open, func(_ storedChunk, off uint64, rec *wire.Record) bool {
		if rec.Flags&wire.FlagKey == 0 || txns.Skipped(off) {
			return true
		}
		if _, known := last[string(rec.Key)]; !known {
			if keyBytes += len(rec.Key) + 48; keyBytes > cleanerKeyBytes {
				plan.end = off // the map is full: compact up to here
				return false
			}
		}
		last[string(rec.Key)] = off
		return true
	})
	if err != nil {
		return plan, err
	}
	var (
		cur      []wire.OffsetRange
		curBytes int
		chunk    = uint64(math.MaxUint64) // base of the chunk being read
		charged  bool                     // its bytes count in curBytes
	)
	flush := func() {
		if len(cur) > 0 {
			plan.cmds = append(plan.cmds, cur)
		}
		cur, curBytes = nil, 0
	}
	tombstoneHorizon := now - set.DeleteRetentionMs
	err = eachStored(store, p, start, plan.end, open, func(c storedChunk, off uint64, rec *wire.Record) bool {
		if c.base != chunk {
			chunk, charged = c.base, false
		}
		if rec.Flags&wire.FlagKey == 0 || txns.Skipped(off) {
			return true
		}
		lastOff, known := last[string(rec.Key)]
		drop := known && lastOff != off
		if !drop && rec.Flags&wire.FlagNullValue != 0 {
			if c.appendMs <= tombstoneHorizon {
				drop = true
			} else if due := c.appendMs + set.DeleteRetentionMs; plan.tombstoneDueMs == 0 || due < plan.tombstoneDueMs {
				plan.tombstoneDueMs = due
			}
		}
		if !drop {
			return true
		}
		// A command rewrites every chunk it drops records of: it is cut
		// at a chunk boundary once those weigh cleanCmdBytes.
		if !charged {
			if curBytes+c.size > cleanCmdBytes || len(cur) >= cleanCmdRanges {
				flush()
			}
			curBytes += c.size
			charged = true
		}
		if n := len(cur); n > 0 && cur[n-1].To == off {
			cur[n-1].To++
			return true
		}
		if len(cur) >= wire.MaxCleanRanges {
			flush()
			curBytes, charged = c.size, true
		}
		cur = append(cur, wire.OffsetRange{From: off, To: off + 1})
		return true
	})
	flush()
	return plan, err
}

// storedChunk is the chunk a record is read from: its base, append time
// and size.
type storedChunk struct {
	base     uint64
	appendMs int64
	size     int
}

// eachStored calls f for the records of p in [from, to), opened, until it
// returns false. The record's slices are only valid during the call.
func eachStored(store *storage.Store, p storage.Partition, from, to uint64, open func(*wire.Record), f func(storedChunk, uint64, *wire.Record) bool) error {
	var ferr error
	_, err := store.ReadChunks(p, from, func(sc *storage.StoredChunk) bool {
		c := storedChunk{base: sc.Base, appendMs: sc.AppendMs, size: sc.Size()}
		recs, err := sc.Records()
		if err != nil {
			ferr = err
			return false
		}
		it := wire.NewRecordIter(recs)
		for off := c.base; off < to; off++ {
			body, _, ok := it.Next()
			if !ok {
				ferr = it.Err()
				return ferr == nil
			}
			if off < from {
				continue
			}
			rec, err := wire.ParseRecord(body)
			if err != nil {
				ferr = err
				return false
			}
			open(&rec)
			if !f(c, off, &rec) {
				return false
			}
		}
		return false // reached to
	})
	if err == nil {
		err = ferr
	}
	return err
}
