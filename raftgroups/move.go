package raftgroups

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/queen-mq/queen/wire"
)

// Moving a partition to another raft group, the engine half
// (docs/placement.md, "Moving a partition"; storage/move.go is the state
// machine half). A move is recorded at the queue's home; the home's
// leader runs the mover, which drives every recorded move a step at a
// time: copy the source's log into the target while it takes writes,
// seal the source, copy the tail and the state, finish in the target,
// switch the home's directory, drop the source's copy. Each step is
// idempotent and the record says which one was reached, so a new leader
// (after a crash or a transfer) repeats at most the step it found
// unfinished.

// Errors of a move request.
var (
	// ErrMoveFormat: a group taking part is below FormatV9 (a member runs
	// a build without moves).
	ErrMoveFormat = errors.New("raftgroups: a raft group taking part is below format 9 (a member runs an older build); moves wait for the upgrade")
	// ErrMoveTarget: the target group is not one of the tenant's, or is
	// where the partition is.
	ErrMoveTarget = errors.New("raftgroups: the target raft group is not one of the tenant's other groups")
	// ErrMoveInProgress: another move of the partition is in progress.
	ErrMoveInProgress = errors.New("raftgroups: the partition is already being moved")
	// ErrMoveTooLate: a cancel after the source was sealed (the move
	// finishes).
	ErrMoveTooLate = errors.New("raftgroups: the move is past its copy and can no longer be cancelled")
)

const (
	// moveEvery is how often a home's leader looks for moves to drive.
	moveEvery = 500 * time.Millisecond
	// moveSealGap is how far behind the source the incoming partition may
	// be for the source to be sealed: the tail copied while writes wait.
	moveSealGap = 1 << 20
	// moveSealWait bounds how long the mover waits for the Kafka
	// transactions open in the partition to end before failing the move.
	moveSealWait = 30 * time.Second
	// moveCopyPasses bounds the copy passes before the mover seals anyway:
	// a partition written faster than it copies still moves, with a
	// longer pause.
	moveCopyPasses = 64
	// moveKeepEnded is how long an ended move stays listed (GET
	// /api/v1/system/partitions/moves) before the mover forgets it.
	moveKeepEnded = 24 * time.Hour
)

// StartMove records a move of a queue's partition to group to at the
// queue's home; the home's leader carries it out. A repeat of the same
// move answers its record.
func (e *Engine) StartMove(ctx context.Context, tenant wire.ID, queue string, index uint32, to int) (wire.MoveInfo, error) {
	home := e.Home(tenant, queue)
	if err := e.Barrier(ctx, home); err != nil {
		return wire.MoveInfo{}, err
	}
	cat, ok := e.Catalog(tenant, queue)
	if !ok {
		return wire.MoveInfo{}, wire.ErrQueueNotFound
	}
	d, ok := e.DirByIndex(tenant, queue, index)
	if !ok {
		return wire.MoveInfo{}, wire.ErrPartitionNotFound
	}
	if !e.tenantHas(tenant, to) || int(d.Group) == to {
		return wire.MoveInfo{}, fmt.Errorf("%w: group %d (the partition is in %d, the tenant's groups are %v)", ErrMoveTarget, to, d.Group, e.TenantGroups(tenant))
	}
	for _, g := range []int{home, int(d.Group), to} {
		if e.ActiveFormat(g) < wire.FormatV9 {
			return wire.MoveInfo{}, fmt.Errorf("%w: group %d is at format %d", ErrMoveFormat, g, e.ActiveFormat(g))
		}
	}
	cmd := wire.MoveRecordCmd{Op: wire.MoveOpStart, Inc: cat.Inc, Move: wire.MoveInfo{Tenant: tenant, Queue: queue, Index: index, To: uint16(to)}}
	res, err := proposeOne(ctx, e, home, wire.KindMoveRecord, cmd.Encode(nil), wire.DecodeMoveRecordResult)
	if err != nil {
		return wire.MoveInfo{}, err
	}
	switch res.Code {
	case wire.CodeOK:
		return res.Move, nil
	case wire.CodeExists:
		return res.Move, fmt.Errorf("%w: to group %d, %s", ErrMoveInProgress, res.Move.To, wire.MoveStateName(res.Move.State))
	}
	return res.Move, fmt.Errorf("raftgroups: start a move: %w", res.Code.Err())
}

// CancelMove asks the mover to cancel a move still copying.
func (e *Engine) CancelMove(ctx context.Context, tenant wire.ID, queue string, index uint32) (wire.MoveInfo, error) {
	cat, ok := e.Catalog(tenant, queue)
	if !ok {
		return wire.MoveInfo{}, wire.ErrQueueNotFound
	}
	cmd := wire.MoveRecordCmd{Op: wire.MoveOpCancel, Inc: cat.Inc, Move: wire.MoveInfo{Tenant: tenant, Queue: queue, Index: index}}
	res, err := proposeOne(ctx, e, e.Home(tenant, queue), wire.KindMoveRecord, cmd.Encode(nil), wire.DecodeMoveRecordResult)
	if err != nil {
		return wire.MoveInfo{}, err
	}
	switch res.Code {
	case wire.CodeOK:
		return res.Move, nil
	case wire.CodeConflict:
		return res.Move, ErrMoveTooLate
	}
	return res.Move, fmt.Errorf("raftgroups: cancel a move: %w", res.Code.Err())
}

// Moves lists the tenant's moves (every tenant's when zero) as this node's
// replicas of the homes record them, finished ones included.
func (e *Engine) Moves(tenant wire.ID) []wire.MoveInfo {
	var out []wire.MoveInfo
	for _, g := range e.host.groups {
		out = append(out, g.store.Moves(tenant)...)
	}
	return out
}

// MoveOf is the move record of a queue's partition, if any.
func (e *Engine) MoveOf(tenant wire.ID, queue string, index uint32) (wire.MoveInfo, bool) {
	return e.HomeStore(tenant, queue).MoveOf(tenant, queue, index)
}

// tenantHas reports whether group g is one of the tenant's.
func (e *Engine) tenantHas(tenant wire.ID, g int) bool {
	for _, t := range e.TenantGroups(tenant) {
		if t == g {
			return g < len(e.host.groups)
		}
	}
	return false
}

// moveActive reports whether a recorded move still has steps to run.
func moveActive(m *wire.MoveInfo) bool {
	return m.State != wire.MoveDone && m.State != wire.MoveFailed
}

// runMoves drives the moves recorded in the groups this node leads.
func (e *Engine) runMoves() {
	h := e.host
	for _, g := range h.groups {
		if !h.leads(g) || g.store.ActiveFormat() < wire.FormatV9 {
			continue
		}
		for _, m := range g.store.Moves(wire.ID{}) {
			if !moveActive(&m) {
				if h.clock.NowMs()-m.UpdatedMs > moveKeepEnded.Milliseconds() {
					e.forgetMove(g.n, m)
				}
				continue
			}
			select {
			case <-h.stop:
				return
			default:
			}
			if err := e.driveMove(g.n, m); err != nil {
				h.log.Warn("raft: partition move paused; the home's leader resumes it", "queue", m.Queue, "partition", m.Index,
					"from", m.From, "to", m.To, "state", wire.MoveStateName(m.State), "err", err)
			}
		}
	}
}

// forgetMove drops an ended move's record.
func (e *Engine) forgetMove(home int, m wire.MoveInfo) {
	cat, ok := e.Catalog(m.Tenant, m.Queue)
	if !ok {
		return // the queue's delete took its records
	}
	ctx, cancel := context.WithTimeout(e.host.stopped, e.host.cfg.RequestTimeout)
	defer cancel()
	cmd := wire.MoveRecordCmd{Op: wire.MoveOpForget, Inc: cat.Inc, Move: wire.MoveInfo{Tenant: m.Tenant, Queue: m.Queue, Index: m.Index}}
	_, _ = e.Propose(ctx, home, wire.Command{Kind: wire.KindMoveRecord, Body: cmd.Encode(nil)}) // the next round tries again
}

// mover is one move being driven.
type mover struct {
	e    *Engine
	home int
	m    wire.MoveInfo
	inc  uint64
	cat  wire.Catalog
}

// driveMove runs a move's steps from where its record stands to its end
// (or to the first step that fails: the next round tries again).
func (e *Engine) driveMove(home int, m wire.MoveInfo) error {
	h := e.host
	ctx, cancel := context.WithCancel(h.stopped)
	defer cancel()
	step := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, h.cfg.RequestTimeout) }
	sctx, scancel := step()
	err := e.Barrier(sctx, home)
	scancel()
	if err != nil {
		return err
	}
	cur, ok := e.GroupStore(home).MoveOf(m.Tenant, m.Queue, m.Index)
	if !ok || !moveActive(&cur) {
		return nil
	}
	cat, ok := e.Catalog(m.Tenant, m.Queue)
	if !ok {
		return nil // the queue was deleted, and its moves with it
	}
	mv := &mover{e: e, home: home, m: cur, inc: cat.Inc, cat: cat}
	for moveActive(&mv.m) {
		select {
		case <-h.stop:
			return ErrClosed
		default:
		}
		if !h.leads(h.groups[home]) {
			return nil // the home's new leader drives it from its record
		}
		var err error
		switch mv.m.State {
		case wire.MoveCopying:
			err = mv.copying(ctx)
		case wire.MoveSealed:
			err = mv.sealed(ctx)
		case wire.MoveSwitched:
			err = mv.switched(ctx)
		}
		if err != nil {
			return err
		}
	}
	h.log.Info("raft: partition move ended", "queue", mv.m.Queue, "partition", mv.m.Index, "from", mv.m.From, "to", mv.m.To,
		"state", wire.MoveStateName(mv.m.State), "reason", mv.m.Reason, "offsets", mv.m.End)
	return nil
}

// record proposes a change of the move's record and keeps what it became.
func (mv *mover) record(ctx context.Context, op uint8, m wire.MoveInfo) error {
	m.Tenant, m.Queue, m.Index = mv.m.Tenant, mv.m.Queue, mv.m.Index
	cmd := wire.MoveRecordCmd{Op: op, Inc: mv.inc, Move: m}
	sctx, cancel := context.WithTimeout(ctx, mv.e.host.cfg.RequestTimeout)
	defer cancel()
	res, err := proposeOne(sctx, mv.e, mv.home, wire.KindMoveRecord, cmd.Encode(nil), wire.DecodeMoveRecordResult)
	if err != nil {
		return err
	}
	if res.Code != wire.CodeOK {
		return fmt.Errorf("raftgroups: move record %d: %w", op, res.Code.Err())
	}
	mv.m = res.Move
	return nil
}

// propose proposes one command in group g and answers its result.
func (mv *mover) propose(ctx context.Context, g int, kind wire.Kind, body []byte) ([]byte, error) {
	sctx, cancel := context.WithTimeout(ctx, mv.e.host.cfg.RequestTimeout)
	defer cancel()
	res, err := mv.e.Propose(sctx, g, wire.Command{Kind: kind, Body: body})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

func (mv *mover) barrier(ctx context.Context, g int) error {
	sctx, cancel := context.WithTimeout(ctx, mv.e.host.cfg.RequestTimeout)
	defer cancel()
	return mv.e.Barrier(sctx, g)
}

// chunkBytes bounds the records of one copy command.
func (mv *mover) chunkBytes() int {
	return min(wire.MoveMaxChunkBytes, mv.e.host.cfg.MaxEntryBytes/2)
}

// ensureTarget makes sure the target group holds a shard of the queue,
// which the incoming partition belongs to.
func (mv *mover) ensureTarget(ctx context.Context) error {
	to := int(mv.m.To)
	if _, _, ok := mv.e.GroupStore(to).Catalog(mv.m.Tenant, mv.m.Queue); ok || to == mv.home {
		return nil
	}
	cmd := wire.EnsureShardCmd{Tenant: mv.m.Tenant, Queue: mv.m.Queue, Catalog: mv.cat,
		Subs: mv.e.GroupStore(mv.home).Subscriptions(mv.m.Tenant, mv.m.Queue)}
	res, err := mv.propose(ctx, to, wire.KindEnsureShard, cmd.Encode(nil))
	if err != nil {
		return err
	}
	if code, _ := wire.ResultCode(res); code != wire.CodeOK {
		return fmt.Errorf("raftgroups: the target's shard: %w", code.Err())
	}
	return nil
}

// copyChunks copies the source partition pid's records from the incoming
// partition's end up to end into the target, and answers where the
// incoming partition ends.
func (mv *mover) copyChunks(ctx context.Context, pid, start, end uint64) (uint64, error) {
	to, from := int(mv.m.To), int(mv.m.From)
	if err := mv.barrier(ctx, to); err != nil {
		return 0, err
	}
	_, next, ok := mv.e.GroupStore(to).Incoming(mv.m.Tenant, mv.m.Queue, mv.m.Index)
	if !ok {
		next = start
	}
	name, created := mv.partName()
	for next < end {
		chunks, err := mv.e.GroupStore(from).MoveChunks(pid, max(next, start), end, mv.chunkBytes())
		if err != nil {
			return 0, err
		}
		if len(chunks) == 0 {
			break
		}
		cmd := wire.MoveCopyCmd{Tenant: mv.m.Tenant, Queue: mv.m.Queue, Inc: mv.inc, Index: mv.m.Index,
			Name: name, CreatedMs: created, Start: start, Chunks: chunks}
		b, err := mv.propose(ctx, to, wire.KindMoveCopy, cmd.Encode(nil))
		if err != nil {
			return 0, err
		}
		res, err := wire.DecodeMoveCopyResult(b)
		if err != nil {
			return 0, err
		}
		if res.Code != wire.CodeOK {
			return 0, fmt.Errorf("raftgroups: copy into the target: %w", res.Code.Err())
		}
		if res.Next <= next {
			return 0, fmt.Errorf("raftgroups: copy into the target made no progress at offset %d", next)
		}
		next = res.Next
		if err := mv.record(ctx, wire.MoveOpProgress, wire.MoveInfo{State: mv.m.State, Copied: next, End: max(end, mv.m.End)}); err != nil {
			return 0, err
		}
	}
	return next, nil
}

// partName is the partition's name and creation time from the home's
// directory.
func (mv *mover) partName() (string, int64) {
	d, _ := mv.e.GroupStore(mv.home).DirByIndex(mv.m.Tenant, mv.m.Queue, mv.m.Index)
	return d.Name, d.CreatedMs
}

// copying copies while the source takes writes, then seals it.
func (mv *mover) copying(ctx context.Context) error {
	from := int(mv.m.From)
	if mv.m.Cancel {
		return mv.abandon(ctx, "cancelled")
	}
	if err := mv.ensureTarget(ctx); err != nil {
		return err
	}
	for pass := 0; ; pass++ {
		if err := mv.barrier(ctx, from); err != nil {
			return err
		}
		src, ok := mv.e.GroupStore(from).PartitionByIndex(mv.m.Tenant, mv.m.Queue, mv.m.Index)
		if !ok {
			if _, sealed, ok := mv.e.GroupStore(from).MovedOut(mv.m.Tenant, mv.m.Queue, mv.m.Index); ok && sealed {
				break // sealed by a mover before this one, which did not record it
			}
			return mv.abandon(ctx, "the partition is gone from its group")
		}
		end := src.HighWatermark()
		next, err := mv.copyChunks(ctx, src.ID, src.LogStart(), end)
		if err != nil {
			return err
		}
		if cur, ok := mv.e.GroupStore(mv.home).MoveOf(mv.m.Tenant, mv.m.Queue, mv.m.Index); ok && cur.Cancel {
			mv.m = cur
			return mv.abandon(ctx, "cancelled")
		}
		if pass >= moveCopyPasses || mv.nearEnd(src.ID, next) {
			break
		}
	}
	return mv.seal(ctx)
}

// nearEnd reports whether what the source holds past next is small
// enough to copy while it is sealed.
func (mv *mover) nearEnd(pid, next uint64) bool {
	chunks, err := mv.e.GroupStore(int(mv.m.From)).MoveChunks(pid, next, ^uint64(0), moveSealGap)
	if err != nil {
		return false
	}
	size := 0
	for _, c := range chunks {
		size += len(c.Data)
	}
	return size < moveSealGap
}

// seal seals the source once no Kafka transaction is open in it, waiting
// at most moveSealWait; then records the sealed state.
func (mv *mover) seal(ctx context.Context) error {
	deadline := time.Now().Add(moveSealWait)
	for {
		res, err := mv.sealCmd(ctx, false)
		if err != nil {
			return err
		}
		switch res.Code {
		case wire.CodeOK:
			return mv.record(ctx, wire.MoveOpProgress, wire.MoveInfo{State: wire.MoveSealed, End: res.Next})
		case wire.CodeConflict:
			if time.Now().After(deadline) {
				return mv.abandon(ctx, fmt.Sprintf("a transaction stayed open in the partition for %s (its last stable offset did not reach its end)", moveSealWait))
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond): // the transaction's end is another client's
			}
		default:
			return mv.abandon(ctx, fmt.Sprintf("the source refused the seal: %v", res.Code.Err()))
		}
	}
}

func (mv *mover) sealCmd(ctx context.Context, unseal bool) (wire.MoveSealResult, error) {
	cmd := wire.MoveSealCmd{Tenant: mv.m.Tenant, Queue: mv.m.Queue, Inc: mv.inc, Index: mv.m.Index, Unseal: unseal}
	b, err := mv.propose(ctx, int(mv.m.From), wire.KindMoveSeal, cmd.Encode(nil))
	if err != nil {
		return wire.MoveSealResult{}, err
	}
	if code, bare := wire.ResultCode(b); bare {
		return wire.MoveSealResult{Code: code}, nil
	}
	return wire.DecodeMoveSealResult(b)
}

// sealed copies the tail and the state, finishes in the target and
// switches the directory.
func (mv *mover) sealed(ctx context.Context) error {
	res, err := mv.sealCmd(ctx, false)
	if err != nil {
		return err
	}
	if res.Code != wire.CodeOK {
		return fmt.Errorf("raftgroups: the sealed source: %w", res.Code.Err())
	}
	if err := mv.ensureTarget(ctx); err != nil {
		return err
	}
	from, to := int(mv.m.From), int(mv.m.To)
	if err := mv.barrier(ctx, from); err != nil {
		return err
	}
	// The seal's own reply may be a repeat's: its applied state is what
	// this node's replica of the source shows after the barrier.
	if _, err := mv.copyChunks(ctx, res.PID, res.Start, res.Next); err != nil {
		return err
	}
	name, created := mv.partName()
	kind, after := wire.MoveKeyCursor, []byte(nil)
	// The first command makes the incoming partition when nothing was
	// copied yet (an empty partition).
	for first := true; ; first = false {
		keys, more, err := mv.e.GroupStore(from).MoveStateKeys(res.PID, kind, after, mv.chunkBytes())
		if err != nil {
			return err
		}
		if len(keys) > 0 || first {
			cmd := wire.MoveCopyCmd{Tenant: mv.m.Tenant, Queue: mv.m.Queue, Inc: mv.inc, Index: mv.m.Index,
				Name: name, CreatedMs: created, Start: res.Start, Keys: keys}
			b, err := mv.propose(ctx, to, wire.KindMoveCopy, cmd.Encode(nil))
			if err != nil {
				return err
			}
			if r, err := wire.DecodeMoveCopyResult(b); err != nil || (r.Code != wire.CodeOK && r.Code != wire.CodeExists) {
				return fmt.Errorf("raftgroups: carry the partition's state: %v %w", r.Code, err)
			}
			if len(keys) > 0 {
				last := keys[len(keys)-1]
				kind, after = last.Kind, last.Suffix
			}
		}
		if !more {
			break
		}
	}
	fin := wire.MoveFinishCmd{Tenant: mv.m.Tenant, Queue: mv.m.Queue, Inc: mv.inc, Index: mv.m.Index,
		Start: res.Start, Next: res.Next, LastWriteMs: res.LastWriteMs}
	b, err := mv.propose(ctx, to, wire.KindMoveFinish, fin.Encode(nil))
	if err != nil {
		return err
	}
	if code, _ := wire.ResultCode(b); code != wire.CodeOK {
		return fmt.Errorf("raftgroups: finish in the target: %w", code.Err())
	}
	if err := mv.record(ctx, wire.MoveOpSwitch, wire.MoveInfo{EpochBase: mv.epochBase()}); err != nil {
		return err
	}
	// Shards learn the queue's new group set as a configure tells them.
	if cat, ok := mv.e.Catalog(mv.m.Tenant, mv.m.Queue); ok {
		pctx, cancel := context.WithTimeout(ctx, mv.e.host.cfg.RequestTimeout)
		_ = mv.e.propagateCatalog(pctx, mv.m.Tenant, mv.m.Queue, cat) // the reconciler catches up what fails
		cancel()
	}
	return nil
}

// epochBase is the partition's Kafka leader epoch base in the target: a
// partition's epoch is its group's raft term plus its base, and the
// target's term may be below the source's, which clients would take for a
// stale answer (franz-go ignores a rewound epoch for several metadata
// refreshes). The new base puts the epoch above the source's now; the
// target's term only grows from there.
func (mv *mover) epochBase() uint32 {
	d, _ := mv.e.GroupStore(mv.home).DirByIndex(mv.m.Tenant, mv.m.Queue, mv.m.Index)
	_, termS, _ := mv.e.Leader(int(mv.m.From))
	_, termT, _ := mv.e.Leader(int(mv.m.To))
	epochS := termS + uint64(d.EpochBase)
	if termT > epochS {
		return 0
	}
	return uint32(min(epochS+1-termT, 1<<30))
}

// switched drops the source's sealed copy and ends the move.
func (mv *mover) switched(ctx context.Context) error {
	cmd := wire.MoveDropCmd{Tenant: mv.m.Tenant, Queue: mv.m.Queue, Index: mv.m.Index}
	b, err := mv.propose(ctx, int(mv.m.From), wire.KindMoveDrop, cmd.Encode(nil))
	if err != nil {
		return err
	}
	if code, _ := wire.ResultCode(b); code != wire.CodeOK {
		return fmt.Errorf("raftgroups: drop the source's copy: %w", code.Err())
	}
	return mv.record(ctx, wire.MoveOpDone, wire.MoveInfo{})
}

// abandon ends a move before its switch: the source takes writes again
// (when sealed), the target drops what it received, the record says why.
func (mv *mover) abandon(ctx context.Context, reason string) error {
	if err := mv.barrier(ctx, int(mv.m.From)); err != nil {
		return err
	}
	if _, sealed, ok := mv.e.GroupStore(int(mv.m.From)).MovedOut(mv.m.Tenant, mv.m.Queue, mv.m.Index); ok && sealed {
		res, err := mv.sealCmd(ctx, true)
		if err != nil {
			return err
		}
		if res.Code != wire.CodeOK {
			return fmt.Errorf("raftgroups: unseal the source: %w", res.Code.Err())
		}
	}
	cmd := wire.MoveDropCmd{Tenant: mv.m.Tenant, Queue: mv.m.Queue, Index: mv.m.Index, Incoming: true}
	if _, err := mv.propose(ctx, int(mv.m.To), wire.KindMoveDrop, cmd.Encode(nil)); err != nil {
		return err
	}
	return mv.record(ctx, wire.MoveOpFail, wire.MoveInfo{Reason: reason})
}
