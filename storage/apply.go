package storage

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// applyCtx carries one Update call: the batch every change goes into, the
// replicated clock, and what must be published once the batch commits.
type applyCtx struct {
	s       *Store
	b       *pebble.Batch // indexed: reads inside apply see earlier writes
	nowMs   int64
	entryMs int64  // the entry's own clock stamp (a retry keeps its first attempt's)
	retry   bool   // the entry being applied repeats an earlier proposal
	entryID uint64 // the proposal's id, the same in all its attempts (0: none)
	// keepReply is set by a command whose repeat would not leave the state
	// alone: its reply is kept for the proposal's retries (retries.go).
	keepReply bool
	dirty     []*partState
	changes   []Change
	touched   map[*queueState]bool
	results   [][]byte
	// leaseIdx caches the transaction ids of leases acks looked into
	// during this batch (apply_ack.go).
	leaseIdx map[leaseKeyT]txnOffsets
	// cursors are the cursors changed in this batch, encoded once in
	// finish: a cursor's encoding carries its lease's state per message,
	// so writing it at every change made acking a lease of n messages
	// cost n² bytes.
	cursors     []dirtyCursor
	cursorDirty map[*cursor]bool
	// recounts are partitions whose counts changed otherwise (totals.go).
	recounts []*partState
	// xid is the cross-group transaction whose part is being applied: its
	// own pins do not stop it (xtxn.go).
	xid wire.ID
	// tick is the settings of the tick being applied (wire.TickCmd).
	tick wire.TickCmd
	// sweepChunks is the chunk iterator a partition sweep shares across
	// the partitions it visits (chunksOf); sweepPartitions closes it.
	sweepChunks *chunkIter
	// back reads partitions out of memory back (partcache.go); Update
	// closes it.
	back partSource
	// linking is set while a LinkApply applies its source entries
	// (link_apply.go).
	linking bool
	// err is a storage failure (a segment write) met while applying: the
	// batch is not committed and Update fails, which stops the node, as a
	// failed pebble commit does.
	err error
}

// fail records the first storage failure of the batch. Reads count as
// much as writes: a replica that cannot read what the apply loop must read
// (records to dead-letter, retain or relocate, an index entry) would
// otherwise apply a different result than its peers and diverge silently.
func (ctx *applyCtx) fail(err error) {
	if ctx.err == nil && err != nil {
		ctx.err = err
	}
}

// chunksOf is a chunk iterator over partition pid for a sweep's visit:
// one iterator for the whole sweep, moved from partition to partition,
// rather than one opened per partition (at millions of partitions opening
// them, and loading again the blocks the previous one had, was most of a
// retention tick). It sees the batch as of the sweep's first use: a sweep
// visits each partition once and a visit writes no chunk or blob key of
// another partition, so no later visit needs a newer view.
func (ctx *applyCtx) chunksOf(pid uint64) *chunkIter {
	if ctx.sweepChunks == nil {
		ctx.sweepChunks = newChunkIter(ctx.b, ctx.s.segs, pid)
	} else {
		ctx.sweepChunks.retarget(pid)
	}
	return ctx.sweepChunks
}

// closeSweepChunks closes the sweep's shared chunk iterator, if opened.
func (ctx *applyCtx) closeSweepChunks() {
	if ctx.sweepChunks != nil {
		ctx.closeIter(ctx.sweepChunks)
		ctx.sweepChunks = nil
	}
}

// closeIter closes an iterator the apply loop read through; an error it
// met fails the batch.
func (ctx *applyCtx) closeIter(it interface{ Close() error }) {
	ctx.fail(it.Close())
}

func (s *Store) newApplyCtx() *applyCtx {
	return &applyCtx{s: s, b: s.db.NewIndexedBatch(), nowMs: s.clockMs, touched: map[*queueState]bool{}}
}

// applyEntry applies every command of one raft entry and returns their
// results framed for the proposer. A malformed entry or command is answered
// with CodeBadRequest on every replica alike: it is a proposer bug, never a
// reason to stop the group.
func (s *Store) applyEntry(ctx *applyCtx, data []byte) []byte {
	e, err := wire.ParseEntry(data)
	if err != nil {
		s.log.Error("storage: skipping malformed raft entry", "err", err, "bytes", len(data))
		return wire.AppendResults(nil, nil)
	}
	if e.NowMs > s.clockMs {
		s.clockMs = e.NowMs
	}
	ctx.nowMs = s.clockMs
	ctx.entryMs = e.NowMs
	ctx.retry = e.Retry
	ctx.entryID = e.ID
	ctx.results = ctx.results[:0]
	if s.skipsLateAttempt(&e) {
		// Its retry applied every command already; nobody waits for
		// this attempt's answer.
		for range e.Count {
			ctx.results = append(ctx.results, []byte{uint8(wire.CodeDuplicate)})
		}
		return wire.AppendResults(nil, ctx.results)
	}
	s.noteRetry(ctx, &e)
	for i := 0; ; i++ {
		cmd, ok := e.Next()
		if !ok {
			break
		}
		if r, ok := s.keptReply(ctx, i); ok {
			ctx.results = append(ctx.results, r)
			continue
		}
		ctx.keepReply = false
		r := s.applyCommand(ctx, cmd)
		if ctx.keepReply {
			s.keepReply(ctx, i, r)
		}
		ctx.results = append(ctx.results, r)
	}
	if err := e.Err(); err != nil {
		s.log.Error("storage: malformed command in raft entry", "err", err)
	}
	return wire.AppendResults(nil, ctx.results)
}

func (s *Store) applyCommand(ctx *applyCtx, cmd wire.Command) []byte {
	if ctx.linking && sourceOnly(cmd.Kind) {
		return []byte{uint8(wire.CodeOK)} // link_apply.go
	}
	switch cmd.Kind {
	case wire.KindPush:
		return run(cmd.Body, wire.DecodePushCmd, func(c *wire.PushCmd) wire.PushResult { return s.applyPush(ctx, c) })
	case wire.KindPop:
		return run(cmd.Body, wire.DecodePopCmd, func(c *wire.PopCmd) wire.PopResult {
			r := s.applyPop(ctx, c)
			// An auto-ack pop has no lease ids to find its claims by
			// again: its retry is answered the batch it consumed.
			ctx.keepReply = c.CommitOnDelivery && len(r.Claims) > 0
			return r
		})
	case wire.KindAck:
		return run(cmd.Body, wire.DecodeAckCmd, func(c *wire.AckCmd) wire.AckResult { return s.applyAck(ctx, c) })
	case wire.KindExtendLease:
		return run(cmd.Body, wire.DecodeExtendLeaseCmd, func(c *wire.ExtendLeaseCmd) wire.ExtendLeaseResult { return s.applyExtendLease(ctx, c) })
	case wire.KindCommitPosition:
		// Applied again after a later commit, it would move the position
		// back.
		ctx.keepReply = true
		return run(cmd.Body, wire.DecodeCommitPositionCmd, func(c *wire.CommitPositionCmd) wire.CodeResult { return s.applyCommitPosition(ctx, c) })
	case wire.KindConfigure:
		return run(cmd.Body, wire.DecodeConfigureCmd, func(c *wire.ConfigureCmd) wire.ConfigureResult { return s.applyConfigure(ctx, c) })
	case wire.KindDeleteQueue:
		// Applied again after the queue was created anew, it would delete
		// the new queue.
		ctx.keepReply = true
		return run(cmd.Body, wire.DecodeDeleteQueueCmd, func(c *wire.DeleteQueueCmd) wire.DeleteQueueResult { return s.applyDeleteQueue(ctx, c) })
	case wire.KindKV:
		return run(cmd.Body, wire.DecodeKVCmd, func(c *wire.KVCmd) wire.KVResult { return s.applyKV(ctx, c) })
	case wire.KindLocks:
		return run(cmd.Body, wire.DecodeLocksCmd, func(c *wire.LocksCmd) wire.LocksResult { return s.applyLocks(ctx, c) })
	case wire.KindTimers:
		return run(cmd.Body, wire.DecodeTimersCmd, func(c *wire.TimersCmd) wire.TimersResult { return s.applyTimers(ctx, c) })
	case wire.KindTimerFired:
		return run(cmd.Body, wire.DecodeTimerFiredCmd, func(c *wire.TimerFiredCmd) wire.CodeResult { return s.applyTimerFired(ctx, c) })
	case wire.KindAlloc:
		return run(cmd.Body, wire.DecodeAllocCmd, func(c *wire.AllocCmd) wire.AllocResult { return s.applyAlloc(ctx, c) })
	case wire.KindEnsureShard:
		return run(cmd.Body, wire.DecodeEnsureShardCmd, func(c *wire.EnsureShardCmd) wire.CodeResult { return s.applyEnsureShard(ctx, c) })
	case wire.KindDropShard:
		return run(cmd.Body, wire.DecodeDropShardCmd, func(c *wire.DropShardCmd) wire.CodeResult { return s.applyDropShard(ctx, c) })
	case wire.KindSubscribe:
		return run(cmd.Body, wire.DecodeSubscribeCmd, func(c *wire.SubscribeCmd) wire.SubscribeResult { return s.applySubscribe(ctx, c) })
	case wire.KindKafkaStage:
		return run(cmd.Body, wire.DecodeKafkaStageCmd, func(c *wire.KafkaStageCmd) wire.KafkaProduceResult { return s.applyKafkaStage(ctx, c, cmd.Body) })
	case wire.KindXPrepare:
		return run(cmd.Body, wire.DecodeXPrepareCmd, func(c *wire.XPrepareCmd) wire.XResolveResult { return s.applyXPrepare(ctx, c) })
	case wire.KindXDecide:
		return run(cmd.Body, wire.DecodeXDecideCmd, func(c *wire.XDecideCmd) wire.XDecideResult { return s.applyXDecide(ctx, c) })
	case wire.KindXResolve:
		return run(cmd.Body, wire.DecodeXResolveCmd, func(c *wire.XResolveCmd) wire.XResolveResult { return s.applyXResolve(ctx, c) })
	case wire.KindXForget:
		return run(cmd.Body, wire.DecodeXForgetCmd, func(c *wire.XForgetCmd) wire.CodeResult { return s.applyXForget(ctx, c) })
	case wire.KindTrace:
		return run(cmd.Body, wire.DecodeTraceCmd, func(c *wire.TraceCmd) wire.TraceResult { return s.applyTrace(ctx, c) })
	case wire.KindSeek:
		ctx.keepReply = true // a position write, as KindCommitPosition
		return run(cmd.Body, wire.DecodeSeekCmd, func(c *wire.SeekCmd) wire.CountResult { return s.applySeek(ctx, c) })
	case wire.KindDeleteGroup:
		return run(cmd.Body, wire.DecodeDeleteGroupCmd, func(c *wire.DeleteGroupCmd) wire.CountResult { return s.applyDeleteGroup(ctx, c) })
	case wire.KindSubscription:
		return run(cmd.Body, wire.DecodeSubscriptionCmd, func(c *wire.SubscriptionCmd) wire.CountResult { return s.applySubscription(ctx, c) })
	case wire.KindRelocateChunks:
		return run(cmd.Body, wire.DecodeRelocateChunksCmd, func(c *wire.RelocateChunksCmd) wire.RelocateChunksResult { return s.applyRelocateChunks(ctx, c) })
	case wire.KindDLQPurge:
		return run(cmd.Body, wire.DecodeDLQPurgeCmd, func(c *wire.DLQPurgeCmd) wire.CountResult { return s.applyDLQPurge(ctx, c) })
	case wire.KindDLQReplay:
		return run(cmd.Body, wire.DecodeDLQReplayCmd, func(c *wire.DLQReplayCmd) wire.DLQReplayResult { return s.applyDLQReplay(ctx, c) })
	case wire.KindDeleteMessage:
		return run(cmd.Body, wire.DecodeDeleteMessageCmd, func(c *wire.DeleteMessageCmd) wire.CodeResult { return s.applyDeleteMessage(ctx, c) })
	case wire.KindTransaction:
		return run(cmd.Body, wire.DecodeTxnCmd, func(c *wire.TxnCmd) wire.TxnResult { return s.applyTransaction(ctx, c) })
	case wire.KindKafkaProduce:
		return run(cmd.Body, wire.DecodeKafkaProduceCmd, func(c *wire.KafkaProduceCmd) wire.KafkaProduceResult { return s.applyKafkaProduce(ctx, c) })
	case wire.KindKafkaInitProducer:
		return run(cmd.Body, wire.DecodeInitProducerCmd, func(c *wire.InitProducerCmd) wire.InitProducerResult { return s.applyInitProducer(ctx, c) })
	case wire.KindKafkaCreateTopic:
		return run(cmd.Body, wire.DecodeCreateTopicCmd, func(c *wire.CreateTopicCmd) wire.AllocResult { return s.applyCreateTopic(ctx, c) })
	case wire.KindKafkaCreatePartitions:
		return run(cmd.Body, wire.DecodeCreatePartitionsCmd, func(c *wire.CreatePartitionsCmd) wire.AllocResult { return s.applyCreatePartitions(ctx, c) })
	case wire.KindKafkaDeleteTopic:
		ctx.keepReply = true // as KindDeleteQueue
		return run(cmd.Body, wire.DecodeDeleteTopicCmd, func(c *wire.DeleteTopicCmd) wire.DeleteQueueResult { return s.applyDeleteTopic(ctx, c) })
	case wire.KindKafkaTopicConfig:
		return run(cmd.Body, wire.DecodeTopicConfigCmd, func(c *wire.TopicConfigCmd) wire.CodeResult { return s.applyTopicConfig(ctx, c) })
	case wire.KindKafkaTxnBegin:
		return run(cmd.Body, wire.DecodeTxnBeginCmd, func(c *wire.TxnBeginCmd) wire.KafkaTxnResult { return s.applyTxnBegin(ctx, c) })
	case wire.KindKafkaTxnEnd:
		return run(cmd.Body, wire.DecodeTxnEndCmd, func(c *wire.TxnEndCmd) wire.KafkaTxnResult { return s.applyTxnEnd(ctx, c) })
	case wire.KindSetFormat:
		return run(cmd.Body, wire.DecodeSetFormatCmd, func(c *wire.SetFormatCmd) wire.CodeResult { return s.applySetFormat(ctx, c) })
	case wire.KindKafkaTxnSettled:
		return run(cmd.Body, wire.DecodeTxnSettledCmd, func(c *wire.TxnSettledCmd) wire.CodeResult { return s.applyTxnSettled(ctx, c) })
	case wire.KindKafkaLogClean:
		return run(cmd.Body, wire.DecodeLogCleanCmd, func(c *wire.LogCleanCmd) wire.CountResult { return s.applyLogClean(ctx, c) })
	case wire.KindKafkaRegisterNode:
		return run(cmd.Body, wire.DecodeRegisterNodeCmd, func(c *wire.RegisterNodeCmd) wire.CodeResult { return s.applyRegisterNode(ctx, c) })
	case wire.KindRegisterMember:
		return run(cmd.Body, wire.DecodeRegisterMemberCmd, func(c *wire.RegisterMemberCmd) wire.CodeResult { return s.applyRegisterMember(ctx, c) })
	case wire.KindDeleteOffsets:
		return run(cmd.Body, wire.DecodeDeleteOffsetsCmd, func(c *wire.DeleteOffsetsCmd) wire.CodesResult { return s.applyDeleteOffsets(ctx, c) })
	case wire.KindGroupMembers:
		return run(cmd.Body, wire.DecodeGroupMembersCmd, func(c *wire.GroupMembersCmd) wire.CodeResult { return s.applyGroupMembers(ctx, c) })
	case wire.KindTick:
		return run(cmd.Body, wire.DecodeTickCmd, func(c *wire.TickCmd) wire.CodeResult {
			ctx.tick = *c
			s.applyTick(ctx)
			return wire.CodeResult{Code: wire.CodeOK}
		})
	case wire.KindDropDir:
		return run(cmd.Body, wire.DecodeDropDirCmd, func(c *wire.DropDirCmd) wire.CodeResult { return s.applyDropDir(ctx, c) })
	case wire.KindForgetDrops:
		return run(cmd.Body, wire.DecodeDropDirCmd, func(c *wire.DropDirCmd) wire.CodeResult { return s.applyForgetDrops(ctx, c) })
	case wire.KindMoveRecord:
		return run(cmd.Body, wire.DecodeMoveRecordCmd, func(c *wire.MoveRecordCmd) wire.MoveRecordResult { return s.applyMoveRecord(ctx, c) })
	case wire.KindMoveCopy:
		return run(cmd.Body, wire.DecodeMoveCopyCmd, func(c *wire.MoveCopyCmd) wire.MoveCopyResult { return s.applyMoveCopy(ctx, c) })
	case wire.KindMoveSeal:
		return run(cmd.Body, wire.DecodeMoveSealCmd, func(c *wire.MoveSealCmd) wire.MoveSealResult { return s.applyMoveSeal(ctx, c) })
	case wire.KindMoveFinish:
		return run(cmd.Body, wire.DecodeMoveFinishCmd, func(c *wire.MoveFinishCmd) wire.CodeResult { return s.applyMoveFinish(ctx, c) })
	case wire.KindMoveDrop:
		return run(cmd.Body, wire.DecodeMoveDropCmd, func(c *wire.MoveDropCmd) wire.CodeResult { return s.applyMoveDrop(ctx, c) })
	case wire.KindLinkApply:
		return run(cmd.Body, wire.DecodeLinkApplyCmd, func(c *wire.LinkApplyCmd) wire.CountResult { return s.applyLinkApply(ctx, c) })
	case wire.KindLinkPromote:
		return run(cmd.Body, wire.DecodeLinkPromoteCmd, func(c *wire.LinkPromoteCmd) wire.CountResult { return s.applyLinkPromote(ctx, c) })
	case wire.KindLinkSnapshotChunk:
		return run(cmd.Body, wire.DecodeLinkSnapshotChunkCmd, func(c *wire.LinkSnapshotChunkCmd) wire.CountResult { return s.applyLinkSnapshotChunk(ctx, c) })
	case wire.KindLinkSnapshotDone:
		return run(cmd.Body, wire.DecodeLinkSnapshotDoneCmd, func(c *wire.LinkSnapshotDoneCmd) wire.CountResult { return s.applyLinkSnapshotDone(ctx, c) })
	}
	return []byte{uint8(wire.CodeBadRequest)}
}

type encoder interface{ Encode([]byte) []byte }

// run decodes a command body, applies it and encodes its result; a body that
// does not decode is answered with a bare CodeBadRequest.
func run[C any, R encoder](body []byte, decode func([]byte) (C, error), apply func(*C) R) []byte {
	c, err := decode(body)
	if err != nil {
		return []byte{uint8(wire.CodeBadRequest)}
	}
	return apply(&c).Encode(nil)
}

// finish writes what every batch persists: dirty partition metas, the
// counters, the clock and the applied index, all in the same batch as the
// data so the store is always a prefix of the raft log.
func (ctx *applyCtx) finish(applied uint64) {
	s := ctx.s
	ctx.recountBatch()
	for _, d := range ctx.cursors {
		// A cursor dropped later in the batch (its group or partition
		// deleted, or replaced by a new one) had its key deleted then.
		if !d.p.deleted.Load() && d.p.cursors.get(d.c.group) == d.c {
			ctx.set(cursorKey(d.p.id, d.c.group), d.c.encode())
		}
	}
	for _, p := range ctx.dirty {
		if !p.deleted.Load() {
			ctx.set(partitionKey(p.id), p.encodeMeta())
			p.q.noteStored(p)
		}
	}
	w := wire.Writer{}
	w.Uvarint(s.counters.nextQueueID)
	w.Uvarint(s.counters.nextPartID)
	w.Uvarint(s.counters.nextDLQID)
	w.Uvarint(s.counters.nextChunkSeq)
	ctx.set(keyCounters, w.B)
	ctx.set(keyClock, binary.BigEndian.AppendUint64(nil, uint64(s.clockMs)))
	ctx.set(keyApplied, binary.BigEndian.AppendUint64(nil, applied))
}

// publish exposes the committed state to readers.
func (ctx *applyCtx) publish() {
	for _, p := range ctx.dirty {
		p.hwm.Store(p.next)
		p.logStart.Store(p.start)
		p.lastWrite.Store(p.lastWriteMs)
		p.dirty = false
	}
}

func (ctx *applyCtx) set(k, v []byte) {
	_ = ctx.b.Set(k, v, nil) // an in-memory batch append cannot fail
}

func (ctx *applyCtx) del(k []byte) { _ = ctx.b.Delete(k, nil) }

// get reads a key through the batch; a read error (not a missing key)
// fails the batch.
func (ctx *applyCtx) get(k []byte) ([]byte, bool) {
	v, closer, err := ctx.b.Get(k)
	if err != nil {
		if !errors.Is(err, pebble.ErrNotFound) {
			ctx.fail(fmt.Errorf("storage: read key %q: %w", k, err))
		}
		return nil, false
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out, true
}

// markDirty schedules p's meta to be persisted and published.
func (ctx *applyCtx) markDirty(p *partState) {
	if !p.dirty {
		p.dirty = true
		ctx.dirty = append(ctx.dirty, p)
	}
}

// touch records that q changed, for long-poll wake-ups.
func (ctx *applyCtx) touch(q *queueState) {
	if !ctx.touched[q] {
		ctx.touched[q] = true
		ctx.changes = append(ctx.changes, Change{Tenant: q.tenant, Queue: q.name})
	}
}

func (s *Store) queue(tenant wire.ID, name string) *queueState {
	return s.queues[queueKeyT{tenant, name}]
}

// createQueue creates a queue's state in this group from its catalog and
// persists it: the catalog itself when home is true (a new incarnation is
// taken from this group's queue ids), else a shard of the queue whose home
// is elsewhere.
func (s *Store) createQueue(ctx *applyCtx, tenant wire.ID, name string, cat *wire.Catalog, home bool) *queueState {
	q := &queueState{
		id:        s.counters.nextQueueID,
		tenant:    tenant,
		name:      name,
		namespace: cat.Namespace,
		task:      cat.Task,
		createdMs: cat.CreatedMs,
		kafka:     cat.Kafka,
		cfg:       cat.Cfg,
		inc:       cat.Inc,
		cfgVer:    cat.CfgVer,
		place:     cat.Place,
		home:      home,
		subs:      map[string]*subscription{},
	}
	s.counters.nextQueueID++
	if home {
		q.inc = wire.GroupID(q.id, s.cfg.Group)
		q.cfgVer = 1
		q.createdMs = ctx.nowMs
	}
	s.queues[queueKeyT{tenant, name}] = q
	s.queuesByID[q.id] = q
	s.noteQueueConfig(q)
	ctx.set(queueKey(q.id), q.encodeMeta())
	return q
}

// createPartition creates this group's partition at a permanent index the
// queue's directory gave it.
func (s *Store) createPartition(ctx *applyCtx, q *queueState, index uint32, name string, createdMs int64) *partState {
	p := &partState{
		id:        wire.GroupID(s.counters.nextPartID, s.cfg.Group),
		q:         q,
		index:     index,
		name:      name,
		createdMs: createdMs,
		heapAt:    -1,
	}
	s.counters.nextPartID++
	q.addPart(p)
	s.parts[p.id] = p
	s.cache.add(p)
	ctx.recountLater(p)
	for _, sub := range q.subs {
		if mayHaveNewFor(p, sub) {
			sub.ready.set(index)
		}
	}
	ctx.markDirty(p)
	return p
}

// subscribe returns the group's subscription to q, creating it on first use.
// The queue-mode group always reads from the start.
//
// createdMs is when the group subscribed as the queue's home decided it (0:
// now), so every group holding partitions of the queue starts them alike.
func (s *Store) subscribe(ctx *applyCtx, q *queueState, group string, mode uint8, fromMs, createdMs int64) *subscription {
	if sub := q.subs[group]; sub != nil {
		return sub
	}
	if group == wire.QueueModeGroup {
		mode = wire.SubAll
	}
	if createdMs == 0 {
		createdMs = ctx.nowMs
	}
	sub := &subscription{group: group, mode: mode, fromMs: fromMs, createdMs: createdMs}
	q.subs[group] = sub
	ctx.set(subKey(q.id, group), sub.encode())
	s.rebuildReady(q, sub)
	return sub
}

// cursorFor returns the group's cursor in p, creating it at the position the
// subscription says an untouched partition starts from. A new cursor is
// persisted even when nothing moves it: where it starts depends on when it
// is made, so one kept only in memory would be made again elsewhere after a
// restart, and the restarted replica would answer pops unlike its peers.
func (s *Store) cursorFor(ctx *applyCtx, p *partState, sub *subscription) *cursor {
	if c := p.cursors.get(sub.group); c != nil {
		return c
	}
	return newCursor(ctx, p, sub, s.initialPosition(ctx, p, sub))
}

// newCursor makes the group's cursor in p at pos and persists it.
func newCursor(ctx *applyCtx, p *partState, sub *subscription, pos uint64) *cursor {
	c := &cursor{group: sub.group, pos: pos}
	p.cursors.put(c)
	ctx.saveCursor(p, c)
	return c
}

func (s *Store) initialPosition(ctx *applyCtx, p *partState, sub *subscription) uint64 {
	switch sub.mode {
	case wire.SubAll:
		return p.start
	case wire.SubFrom:
		return s.offsetForTime(ctx, p, sub.fromMs)
	default:
		if p.createdMs >= sub.createdMs {
			return p.start
		}
		return s.offsetForTime(ctx, p, sub.createdMs)
	}
}

// offsetForTime is the first offset of p appended at or after ms (the
// high-water mark when there is none). It walks chunks back from the head,
// which is short for the common "subscribe now" case.
func (s *Store) offsetForTime(ctx *applyCtx, p *partState, ms int64) uint64 {
	if p.lastWriteMs < ms || p.next <= p.start {
		return p.next
	}
	ci := newChunkIter(ctx.b, ctx.s.segs, p.id)
	defer ctx.closeIter(ci)
	pos := p.next
	for ok := ci.Last(); ok && ci.Meta().appendMs >= ms; ok = ci.Prev() {
		pos = ci.Base()
	}
	if pos < p.start {
		pos = p.start
	}
	return pos
}

// dirtyCursor is a cursor to persist when the batch finishes.
type dirtyCursor struct {
	p *partState
	c *cursor
}

// saveCursor schedules c to be persisted with the batch (finish).
func (ctx *applyCtx) saveCursor(p *partState, c *cursor) {
	c.updatedMs = ctx.nowMs
	if ctx.cursorDirty[c] {
		return
	}
	if ctx.cursorDirty == nil {
		ctx.cursorDirty = map[*cursor]bool{}
	}
	ctx.cursorDirty[c] = true
	ctx.cursors = append(ctx.cursors, dirtyCursor{p, c})
}
