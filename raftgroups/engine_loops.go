package raftgroups

import (
	"context"
	"fmt"
	"time"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Background work that keeps a node's groups consistent with each other,
// each run by the leader of the group it acts for (so one node does it,
// and a new leader picks it up): resolving cross-group transactions left
// in doubt, firing timers, and reconciling shards with their queue's
// catalog. Every loop is owned by the host's WaitGroup and stops with it.

// Intervals of the engine's loops.
const (
	resolveEvery   = time.Second
	reconcileEvery = 5 * time.Second
	forgetLinger   = 50 * time.Millisecond
	// finishAfter is how old a commit decision must be before the
	// coordinator's leader makes sure every participant resolved it (the
	// request that decided it normally does so first).
	finishAfter = 10 * time.Second
	// dropRoundsPerReconcile bounds the directory drops one reconcile of a
	// shard carries to its home (wire.MaxDropDir each): a million, so a
	// pass of the cleanup over millions of partitions settles in seconds.
	dropRoundsPerReconcile = 256
)

// startEngineLoops starts the loops that need the engine.
func (h *Host) startEngineLoops(e *Engine) {
	h.forgets = make(chan forgetReq, 4096)
	h.wg.Add(6)
	// A standby takes none of these writes while it follows: what they
	// would do arrives in its source's entries (standby.go).
	go h.every(resolveEvery, h.unlessFollowing(func() { e.resolveInDoubt() }))
	go h.every(resolveEvery, h.unlessFollowing(func() { e.finishDecisions(); e.settleKafkaTxns() }))
	go h.every(reconcileEvery, h.unlessFollowing(func() { e.reconcile() }))
	go h.every(tickEvery, h.unlessFollowing(e.fireTimers))
	go h.every(moveEvery, h.unlessFollowing(e.runMoves))
	go e.forgetLoop()
}

type forgetReq struct {
	group int
	xid   wire.ID
}

// forget queues a decision every participant resolved, to be dropped.
func (h *Host) forget(group int, xid wire.ID) {
	if h.forgets == nil {
		return
	}
	select {
	case h.forgets <- forgetReq{group, xid}:
	default: // the coordinator's finisher drops it later
	}
}

// forgetLoop drops resolved decisions, a batch per group at a time.
func (e *Engine) forgetLoop() {
	h := e.host
	defer h.wg.Done()
	for {
		var first forgetReq
		select {
		case <-h.stop:
			return
		case first = <-h.forgets:
		}
		batch := map[int][]wire.ID{first.group: {first.xid}}
		linger := time.NewTimer(forgetLinger)
	gather:
		for {
			select {
			case r := <-h.forgets:
				batch[r.group] = append(batch[r.group], r.xid)
			case <-linger.C:
				break gather
			case <-h.stop:
				linger.Stop()
				return
			}
		}
		for g, ids := range batch {
			cmd := wire.XForgetCmd{IDs: ids}
			ctx, cancel := context.WithTimeout(h.stopped, h.cfg.RequestTimeout)
			if _, err := e.Propose(ctx, g, wire.Command{Kind: wire.KindXForget, Body: cmd.Encode(nil)}); err != nil {
				h.log.Debug("raft: forgetting resolved transactions", "group", g, "err", err)
			}
			cancel()
		}
	}
}

// resolveInDoubt ends the prepared parts past their deadline in the groups
// this node leads: with the coordinator's decision, or, when there is none,
// with an abort recorded at the coordinator first (which a late commit
// then finds, so it cannot commit).
func (e *Engine) resolveInDoubt() {
	h := e.host
	now := h.clock.NowMs()
	for _, g := range h.groups {
		if !h.leads(g) {
			continue
		}
		for _, p := range g.store.PreparedParts() {
			if p.DeadlineMs > now || p.Coord >= len(h.groups) {
				continue
			}
			ctx, cancel := context.WithTimeout(h.stopped, h.cfg.RequestTimeout)
			commit, err := e.decisionOf(ctx, p.Coord, p.ID)
			if err == nil {
				cmd := wire.XResolveCmd{ID: p.ID, Commit: commit}
				_, err = e.Propose(ctx, g.n, wire.Command{Kind: wire.KindXResolve, Body: cmd.Encode(nil)})
			}
			cancel()
			if err != nil {
				h.log.Debug("raft: resolving a prepared transaction", "group", g.n, "transaction", p.ID.String(), "err", err)
				continue
			}
			h.log.Info("raft: resolved a transaction left in doubt", "group", g.n, "transaction", p.ID.String(), "commit", commit)
		}
	}
}

// decisionOf is the coordinator's decision on a transaction, recording an
// abort there when it has none.
func (e *Engine) decisionOf(ctx context.Context, coord int, xid wire.ID) (bool, error) {
	if err := e.Barrier(ctx, coord); err != nil {
		return false, err
	}
	if d, ok := e.GroupStore(coord).XDecision(xid); ok {
		return d.Commit, nil
	}
	cmd := wire.XDecideCmd{ID: xid, Commit: false}
	res, err := proposeOne(ctx, e, coord, wire.KindXDecide, cmd.Encode(nil), wire.DecodeXDecideResult)
	if err != nil {
		return false, err
	}
	return res.Commit, nil
}

// finishDecisions makes sure every participant of an old commit decision
// resolved it, then drops it: the request that decided may have died
// before it told them all.
func (e *Engine) finishDecisions() {
	h := e.host
	before := h.clock.NowMs() - finishAfter.Milliseconds()
	for _, g := range h.groups {
		if !h.leads(g) {
			continue
		}
		var done []wire.ID
		for _, d := range g.store.CommitDecisions(before, 256) {
			ctx, cancel := context.WithTimeout(h.stopped, h.cfg.RequestTimeout)
			ok := true
			cmd := wire.XResolveCmd{ID: d.ID, Commit: true}
			for _, p := range d.Participants {
				if p >= len(h.groups) {
					continue
				}
				if _, err := e.Propose(ctx, p, wire.Command{Kind: wire.KindXResolve, Body: cmd.Encode(nil)}); err != nil {
					ok = false
					break
				}
			}
			cancel()
			if ok {
				done = append(done, d.ID)
			}
		}
		if len(done) > 0 {
			cmd := wire.XForgetCmd{IDs: done}
			ctx, cancel := context.WithTimeout(h.stopped, h.cfg.RequestTimeout)
			_, _ = e.Propose(ctx, g.n, wire.Command{Kind: wire.KindXForget, Body: cmd.Encode(nil)})
			cancel()
		}
	}
}

// settleKafkaTxns settles the Kafka transactions that ended a while ago
// and are not known resolved everywhere (the request that ended one may
// have died, or a group had no leader then), commits and aborts alike:
// their transactional ids begin nothing new until it is done.
func (e *Engine) settleKafkaTxns() {
	h := e.host
	before := h.clock.NowMs() - finishAfter.Milliseconds()
	for _, g := range h.groups {
		if !h.leads(g) {
			continue
		}
		for _, info := range g.store.KafkaUnsettledTxns(before) {
			ctx, cancel := context.WithTimeout(h.stopped, h.cfg.RequestTimeout)
			err := e.settleTxn(ctx, g.n, info)
			cancel()
			if err != nil {
				h.log.Debug("raft: settling a Kafka transaction", "group", g.n, "transactional_id", info.TxnID, "err", err)
				continue
			}
			h.log.Info("raft: settled a Kafka transaction left unresolved", "group", g.n, "transactional_id", info.TxnID)
		}
	}
}

// fireTimers fires the due timers of the groups this node leads: each
// payload is pushed into its queue through the engine (the partition may
// live in any group) with a transaction id derived from the timer and its
// due time, so a fire repeated after a leader change is found a duplicate,
// then the outcome is recorded in the timer's group.
func (e *Engine) fireTimers() {
	h := e.host
	now := h.clock.NowMs()
	for _, g := range h.groups {
		if next := g.store.NextTimerMs(); next == 0 || next > now || !h.leads(g) {
			continue
		}
		due, err := g.store.DueTimers(now)
		if err != nil {
			continue
		}
		e.fire(g.n, due)
	}
}

func (e *Engine) fire(group int, due []storage.DueTimer) {
	h := e.host
	ctx, cancel := context.WithTimeout(h.stopped, h.cfg.RequestTimeout)
	defer cancel()
	pushes := make([]wire.PushCmd, len(due))
	for i := range due {
		t := &due[i]
		partition := t.Partition
		if partition == "" {
			partition = "Default"
		}
		pushes[i] = wire.PushCmd{Tenant: t.Tenant, Queue: t.Queue, Partition: partition, PartitionIndex: -1,
			Flags: wire.PushIndexTxn, Count: 1, Records: wire.AppendRecord(nil, &t.Record)}
	}
	outs := make([]PushOutcome, len(due))
	// Each timer belongs to one tenant; push per tenant.
	byTenant := map[wire.ID][]int{}
	for i := range due {
		byTenant[due[i].Tenant] = append(byTenant[due[i].Tenant], i)
	}
	for tenant, idx := range byTenant {
		cmds := make([]wire.PushCmd, len(idx))
		for j, i := range idx {
			cmds[j] = pushes[i]
		}
		res, err := e.Push(ctx, tenant, cmds)
		for j, i := range idx {
			if res != nil {
				outs[i] = res[j]
			} else {
				outs[i].Err = err
			}
		}
	}
	var cmds []wire.Command
	for i := range due {
		t := &due[i]
		if outs[i].Err != nil {
			continue // not known to have failed: fire it again later
		}
		code := outs[i].Code
		if code == wire.CodeDuplicate {
			code = wire.CodeOK
		}
		fired := wire.TimerFiredCmd{Tenant: t.Tenant, Queue: t.Queue, Key: t.Key, DueMs: t.DueMs, Code: code}
		cmds = append(cmds, wire.Command{Kind: wire.KindTimerFired, Body: fired.Encode(nil)})
	}
	if len(cmds) == 0 {
		return
	}
	if _, err := e.Propose(ctx, group, cmds...); err != nil {
		h.log.Debug("raft: recording timer fires", "group", group, "err", err)
	}
}

// reconcile makes the shards of the groups this node leads agree with
// their queues' catalogs: options carried where a change did not reach,
// partitions created where their first write did not, and shards of
// deleted queues dropped. Each decision reads the home after a barrier, so
// a lagging replica here never drops a live shard.
func (e *Engine) reconcile() {
	h := e.host
	for _, g := range h.groups {
		if !h.leads(g) {
			continue
		}
		for _, st := range g.store.Shards() {
			e.reconcileShard(g.n, st)
		}
	}
}

func (e *Engine) reconcileShard(g int, st storage.ShardState) {
	h := e.host
	home := e.Home(st.Tenant, st.Queue)
	if st.Home || home >= len(h.groups) {
		return
	}
	ctx, cancel := context.WithTimeout(h.stopped, h.cfg.RequestTimeout)
	defer cancel()
	if st.Drops > 0 && !e.dropRemovedAtHome(ctx, g, home, st) {
		// Drops still owed: until the home has them the directory counts
		// more partitions here than the shard holds, which is not a
		// missing partition to create (that would walk the whole
		// directory); the next reconcile goes on.
		return
	}
	cat, ok := e.Catalog(st.Tenant, st.Queue)
	if ok && cat.Inc == st.Inc && cat.CfgVer <= st.CfgVer && e.shardComplete(g, st, &cat) {
		return // the common case: nothing to do, no barrier
	}
	if err := e.Barrier(ctx, home); err != nil {
		return
	}
	cat, ok = e.Catalog(st.Tenant, st.Queue)
	switch {
	case !ok || cat.Inc > st.Inc:
		cmd := wire.DropShardCmd{Tenant: st.Tenant, Queue: st.Queue, Inc: st.Inc}
		if _, err := e.Propose(ctx, g, wire.Command{Kind: wire.KindDropShard, Body: cmd.Encode(nil)}); err == nil {
			h.log.Info("raft: dropped the shard of a deleted queue", "group", g, "queue", st.Queue, "incarnation", st.Inc)
		}
	case cat.Inc == st.Inc:
		cmd := wire.EnsureShardCmd{Tenant: st.Tenant, Queue: st.Queue, Catalog: cat,
			Subs: e.GroupStore(home).Subscriptions(st.Tenant, st.Queue)}
		if !e.shardHoldsItsPartitions(g, st) {
			// Only then is a partition missing: a shard behind on
			// subscriptions alone (the first pop of a new consumer group
			// reaches shards one by one) needs no walk of the directory,
			// which at ten million partitions took seconds.
			cmd.Parts = e.missingFromShard(g, st, &cat)
		}
		if _, err := e.Propose(ctx, g, wire.Command{Kind: wire.KindEnsureShard, Body: cmd.Encode(nil)}); err != nil {
			h.log.Debug("raft: reconciling a shard", "group", g, "queue", st.Queue, "err", err)
		}
	}
}

// missingFromShard lists the directory entries placed in group g that g's
// shard does not hold, reading the directory a page at a time (each page
// under the home's read lock alone) and sending only what is missing: at
// millions of partitions the whole group's share made one enormous entry.
func (e *Engine) missingFromShard(g int, st storage.ShardState, cat *wire.Catalog) []wire.DirEntry {
	const page = 4096
	var out []wire.DirEntry
	for from := uint32(0); from < cat.Partitions; {
		dir := e.Dir(st.Tenant, st.Queue, from, page)
		if len(dir) == 0 {
			break
		}
		from = dir[len(dir)-1].Index + 1
		var ours []wire.DirEntry
		for _, d := range dir {
			if int(d.Group) == g {
				ours = append(ours, d)
			}
		}
		for i, held := range e.GroupStore(g).HasPartitionsAt(st.Tenant, st.Queue, cat.Inc, ours) {
			if !held {
				out = append(out, ours[i])
			}
		}
	}
	return out
}

// dropRemovedAtHome tells a queue's home which partitions group g removed
// as idle, so it drops their directory entries, then records in g that it
// has, wire.MaxDropDir at a time, up to dropRoundsPerReconcile times, and
// reports whether none is owed any more. Both commands are idempotent: a
// lost answer only repeats them.
func (e *Engine) dropRemovedAtHome(ctx context.Context, g, home int, st storage.ShardState) bool {
	for range dropRoundsPerReconcile {
		idx := e.GroupStore(g).PendingDrops(st.Tenant, st.Queue)
		if len(idx) == 0 {
			return true
		}
		cmd := wire.DropDirCmd{Tenant: st.Tenant, Queue: st.Queue, Inc: st.Inc, Group: uint16(g), Indexes: idx}
		body := cmd.Encode(nil)
		res, err := e.Propose(ctx, home, wire.Command{Kind: wire.KindDropDir, Body: body})
		if err == nil {
			if code, _ := wire.ResultCode(res[0]); code != wire.CodeOK {
				err = code.Err() // another incarnation at the home: this shard goes with its queue
			}
		}
		if err == nil {
			_, err = e.Propose(ctx, g, wire.Command{Kind: wire.KindForgetDrops, Body: body})
		}
		if err != nil {
			e.host.log.Debug("raft: telling a queue's home of removed partitions", "group", g, "queue", st.Queue, "err", err)
			return false
		}
	}
	return len(e.GroupStore(g).PendingDrops(st.Tenant, st.Queue)) == 0
}

// shardComplete reports whether a shard holds every partition the
// directory places in its group and every subscription the home has.
func (e *Engine) shardComplete(g int, st storage.ShardState, cat *wire.Catalog) bool {
	if cat.Groups&(1<<uint(g)) == 0 {
		return true
	}
	if st.Subs < len(e.HomeStore(st.Tenant, st.Queue).Subscriptions(st.Tenant, st.Queue)) {
		return false
	}
	return e.shardHoldsItsPartitions(g, st)
}

// shardHoldsItsPartitions reports whether group g's shard holds as many
// partitions as the home's directory places in g.
func (e *Engine) shardHoldsItsPartitions(g int, st storage.ShardState) bool {
	return e.HomeStore(st.Tenant, st.Queue).DirInGroup(st.Tenant, st.Queue, g) == st.Partitions
}

// proposeAll proposes commands of one kind in one raft entry of group g and
// decodes their results; a command the state machine could not decode is
// an error.
func proposeAll[C any, PC interface {
	*C
	Encode([]byte) []byte
}, R any](ctx context.Context, e *Engine, g int, kind wire.Kind, cmds []C, decode func([]byte) (R, error)) ([]R, error) {
	enc := make([]wire.Command, len(cmds))
	for i := range cmds {
		enc[i] = wire.Command{Kind: kind, Body: PC(&cmds[i]).Encode(nil)}
	}
	res, err := e.Propose(ctx, g, enc...)
	if err != nil {
		return nil, err
	}
	out := make([]R, len(res))
	for i, b := range res {
		if code, bare := wire.ResultCode(b); bare && code != wire.CodeOK {
			return nil, fmt.Errorf("raftgroups: %w", code.Err())
		}
		if out[i], err = decode(b); err != nil {
			return nil, fmt.Errorf("raftgroups: result of a kind %d command: %w", kind, err)
		}
	}
	return out, nil
}
