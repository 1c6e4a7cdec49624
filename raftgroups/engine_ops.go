package raftgroups

import (
	"context"
	"errors"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Writes addressed by something that names their group: a partition id or
// a lease id (tagged by the group that made them), a queue (its home), or
// the whole tenant (every group it may use).

// Ack acknowledges leased messages. Items of partitions in different groups
// are applied by each group; the outcomes come back in item order.
func (e *Engine) Ack(ctx context.Context, c *wire.AckCmd) (wire.AckResult, error) {
	res, err := e.AckGroups(ctx, c.Tenant, []wire.AckCmd{*c})
	if err != nil {
		return wire.AckResult{}, err
	}
	return res[0], nil
}

// AckGroups applies ack commands (of several consumer groups) in one raft
// entry per raft group holding their items' partitions.
func (e *Engine) AckGroups(ctx context.Context, tenant wire.ID, cmds []wire.AckCmd) ([]wire.AckResult, error) {
	type slot struct{ cmd, item int }
	type part struct {
		cmds  []wire.AckCmd
		slots [][]slot
	}
	byGroup := map[int]*part{}
	out := make([]wire.AckResult, len(cmds))
	for ci := range cmds {
		c := &cmds[ci]
		items, _, err := e.sealAckErrors(tenant, c.Items)
		if err != nil {
			return nil, err
		}
		out[ci] = wire.AckResult{Code: wire.CodeOK, Items: make([]wire.AckOutcome, len(c.Items))}
		local := map[int]int{} // group → index of this command's part there
		for ii, it := range items {
			g := wire.GroupOfID(it.PartitionID)
			if g >= len(e.host.groups) {
				out[ci].Items[ii].Code = wire.CodePartitionNotFound
				continue
			}
			p := byGroup[g]
			if p == nil {
				p = &part{}
				byGroup[g] = p
			}
			k, ok := local[g]
			if !ok {
				k = len(p.cmds)
				local[g] = k
				p.cmds = append(p.cmds, wire.AckCmd{Tenant: c.Tenant, Group: c.Group})
				p.slots = append(p.slots, nil)
			}
			p.cmds[k].Items = append(p.cmds[k].Items, it)
			p.slots[k] = append(p.slots[k], slot{ci, ii})
		}
	}
	groups := make([]int, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	errs := make([]error, len(groups))
	fanOut(len(groups), func(i int) {
		p := byGroup[groups[i]]
		for k := range p.cmds {
			e.GroupStore(groups[i]).ResolveAckOffsets(&p.cmds[k])
		}
		res, err := proposeAll(ctx, e, groups[i], wire.KindAck, p.cmds, wire.DecodeAckResult)
		if err != nil {
			errs[i] = err
			return
		}
		for k, r := range res {
			for j, s := range p.slots[k] {
				if j < len(r.Items) {
					out[s.cmd].Items[s.item] = r.Items[j]
				}
			}
			if r.Code != wire.CodeOK {
				for _, s := range p.slots[k] {
					out[s.cmd].Code = r.Code
				}
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// ExtendLease moves a lease's expiry, in the group the lease id names, or
// for a shared lease in each group it names (extendShared).
func (e *Engine) ExtendLease(ctx context.Context, c *wire.ExtendLeaseCmd) (wire.ExtendLeaseResult, error) {
	if wire.IsSharedLease(c.LeaseID) {
		return e.extendShared(ctx, c)
	}
	g := wire.GroupOfTag(c.LeaseID)
	if g >= len(e.host.groups) {
		return wire.ExtendLeaseResult{Code: wire.CodeLeaseNotFound}, nil
	}
	return proposeOne(ctx, e, g, wire.KindExtendLease, c.Encode(nil), wire.DecodeExtendLeaseResult)
}

// perGroup routes items 0..n-1 to the groups route names (ok false: the
// item is answered by the caller, not routed) and runs each group's share
// at once: propose gets a group and its items' indexes, in item order.
func perGroup(n int, route func(i int) (group int, ok bool), propose func(group int, idx []int) error) error {
	byGroup := map[int][]int{}
	var groups []int
	for i := 0; i < n; i++ {
		g, ok := route(i)
		if !ok {
			continue
		}
		if _, seen := byGroup[g]; !seen {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], i)
	}
	errs := make([]error, len(groups))
	fanOut(len(groups), func(k int) { errs[k] = propose(groups[k], byGroup[groups[k]]) })
	return errors.Join(errs...)
}

// partitionGroup is the group holding a partition named by index (>= 0) or
// name. A partition this node's replica of the home does not list yet
// (created through another node a moment ago) is looked for again once
// that replica has caught up.
func (e *Engine) partitionGroup(ctx context.Context, tenant wire.ID, queue, name string, index int32) (int, bool) {
	find := func() (wire.DirEntry, bool) {
		if index >= 0 {
			return e.DirByIndex(tenant, queue, uint32(index))
		}
		return e.DirByName(tenant, queue, name)
	}
	d, ok := find()
	if !ok && e.CatchUpQueues(ctx, tenant, queue) == nil {
		d, ok = find()
	}
	return int(d.Group), ok
}

// CommitPosition sets a consumer group's position in a partition.
func (e *Engine) CommitPosition(ctx context.Context, c *wire.CommitPositionCmd) (wire.CodeResult, error) {
	res, err := e.CommitPositions(ctx, c.Tenant, []wire.CommitPositionCmd{*c})
	if err != nil {
		return wire.CodeResult{}, err
	}
	return res[0], nil
}

// CommitPositions sets several group positions, in one raft entry per group
// holding their partitions; each answers its own code (a missing queue fails
// only its own position).
func (e *Engine) CommitPositions(ctx context.Context, tenant wire.ID, cmds []wire.CommitPositionCmd) ([]wire.CodeResult, error) {
	out := make([]wire.CodeResult, len(cmds))
	route := func(i int) (int, bool) {
		c := &cmds[i]
		g, ok := e.partitionGroup(ctx, tenant, c.Queue, c.Partition, c.PartitionIndex)
		if !ok {
			out[i].Code = wire.CodePartitionNotFound
			if _, exists := e.Catalog(tenant, c.Queue); !exists {
				out[i].Code = wire.CodeQueueNotFound
			}
		}
		return g, ok
	}
	err := perGroup(len(cmds), route, func(g int, idx []int) error {
		enc := make([]wire.Command, len(idx))
		for j, i := range idx {
			enc[j] = wire.Command{Kind: wire.KindCommitPosition, Body: cmds[i].Encode(nil)}
		}
		res, err := e.Propose(ctx, g, enc...)
		if err != nil {
			return err
		}
		for j, i := range idx {
			code, _ := wire.ResultCode(res[j])
			out[i] = wire.CodeResult{Code: code}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Configure creates a queue or changes its options at its home, then
// carries the new options to every group holding its partitions. A failure
// to reach one of them is an error (the client retries; the reconciler
// catches up meanwhile), the home's change stands.
func (e *Engine) Configure(ctx context.Context, c *wire.ConfigureCmd) (wire.ConfigureResult, error) {
	c.Place = e.place.Queue(c.Tenant, c.Queue)
	res, err := proposeOne(ctx, e, e.Home(c.Tenant, c.Queue), wire.KindConfigure, c.Encode(nil), wire.DecodeConfigureResult)
	if err != nil || res.Code != wire.CodeOK {
		return res, err
	}
	return res, e.propagateCatalog(ctx, c.Tenant, c.Queue, res.Catalog)
}

// DeleteQueue removes a queue and everything in it: the catalog at its
// home, then the shards in its other groups.
func (e *Engine) DeleteQueue(ctx context.Context, c *wire.DeleteQueueCmd) (wire.CodeResult, error) {
	res, err := proposeOne(ctx, e, e.Home(c.Tenant, c.Queue), wire.KindDeleteQueue, c.Encode(nil), wire.DecodeDeleteQueueResult)
	if err != nil || res.Code != wire.CodeOK {
		return wire.CodeResult{Code: res.Code}, err
	}
	return wire.CodeResult{Code: wire.CodeOK}, e.dropShards(ctx, c.Tenant, c.Queue, res.Inc, res.Groups)
}

// fanOutCount proposes the same command to several groups and sums what
// they report.
func (e *Engine) fanOutCount(ctx context.Context, groups []int, kind wire.Kind, body []byte) (wire.CountResult, error) {
	return e.fanOutCounts(ctx, groups, func(g int) (wire.CountResult, error) {
		return proposeOne(ctx, e, g, kind, body, wire.DecodeCountResult)
	})
}

// fanOutCounts runs one per group at once and sums what they report.
func (e *Engine) fanOutCounts(ctx context.Context, groups []int, one func(group int) (wire.CountResult, error)) (wire.CountResult, error) {
	res := make([]wire.CountResult, len(groups))
	errs := make([]error, len(groups))
	fanOut(len(groups), func(i int) {
		res[i], errs[i] = one(groups[i])
	})
	if err := errors.Join(errs...); err != nil {
		return wire.CountResult{}, err
	}
	out := wire.CountResult{Code: wire.CodeQueueNotFound}
	for _, r := range res {
		switch {
		case r.Code == wire.CodeOK:
			if out.Code != wire.CodeOK {
				out.Code = wire.CodeOK
			}
			out.N += r.N
			out.More = out.More || r.More
		case r.Code != wire.CodeQueueNotFound && r.Code != wire.CodeNotFound:
			return r, nil
		}
	}
	return out, nil
}

// scope returns what lists the groups a walk about one queue (or, queue
// empty, every queue of the tenant) must reach. One queue's are read from
// this node's replica of its home once it has caught up, within
// CatchUpWait: a group that a push through another node has just added
// must not be missed. It runs in the walk (steps.go).
func (e *Engine) scope(tenant wire.ID, queue string) func(context.Context) ([]int, error) {
	return func(ctx context.Context) ([]int, error) {
		if queue == "" {
			return e.TenantGroups(tenant), nil
		}
		ctx, cancel := context.WithTimeout(ctx, CatchUpWait)
		defer cancel()
		if err := e.CatchUpQueues(ctx, tenant, queue); err != nil {
			return nil, err
		}
		return e.QueueGroups(tenant, queue), nil
	}
}

// Seek moves a group's cursors to the end or to a time: in one partition
// with one entry, in a whole queue with a walk (steps.go).
func (e *Engine) Seek(ctx context.Context, c *wire.SeekCmd) (wire.CountResult, error) {
	if c.Partition != "" {
		g, ok := e.partitionGroup(ctx, c.Tenant, c.Queue, c.Partition, -1)
		if !ok {
			return wire.CountResult{Code: wire.CodePartitionNotFound}, nil
		}
		return e.fanOutCount(ctx, []int{g}, wire.KindSeek, c.Encode(nil))
	}
	return e.fanOutSteps(ctx, e.scope(c.Tenant, c.Queue), wire.KindSeek, c.EncodeStep)
}

// DeleteGroup drops a group's cursors (and with DeleteMetadata its
// subscriptions) on one queue or all of the tenant's queues.
func (e *Engine) DeleteGroup(ctx context.Context, c *wire.DeleteGroupCmd) (wire.CountResult, error) {
	return e.fanOutSteps(ctx, e.scope(c.Tenant, c.Queue), wire.KindDeleteGroup, c.EncodeStep)
}

// UpdateSubscription changes where a group starts untouched partitions.
func (e *Engine) UpdateSubscription(ctx context.Context, c *wire.SubscriptionCmd) (wire.CountResult, error) {
	return e.fanOutCount(ctx, e.TenantGroups(c.Tenant), wire.KindSubscription, c.Encode(nil))
}

// PurgeDLQ deletes matching dead-letter rows in every group, one bounded
// command at a time until none is left, and returns how many it deleted.
func (e *Engine) PurgeDLQ(ctx context.Context, c *wire.DLQPurgeCmd) (uint64, error) {
	var n uint64
	for _, g := range e.TenantGroups(c.Tenant) {
		for {
			r, err := proposeOne(ctx, e, g, wire.KindDLQPurge, c.Encode(nil), wire.DecodeCountResult)
			if err != nil {
				return n, err
			}
			n += r.N
			if r.Code != wire.CodeOK {
				return n, r.Code.Err()
			}
			if !r.More {
				break
			}
		}
	}
	return n, nil
}

// ReplayDLQ pushes a dead-lettered message again, as message msgID with
// transaction id "dlq:<id>", into its original queue and partition or the
// ones named, then marks the row replayed in the group holding it. The
// push is deduplicated by that transaction id, so a replay retried after
// either step fails is neither lost nor doubled.
func (e *Engine) ReplayDLQ(ctx context.Context, tenant wire.ID, id uint64, msgID wire.ID, queue, partition string) (wire.DLQReplayResult, error) {
	g := wire.GroupOfID(id)
	if g >= len(e.host.groups) {
		return wire.DLQReplayResult{Code: wire.CodeNotFound}, nil
	}
	if err := e.Barrier(ctx, g); err != nil {
		return wire.DLQReplayResult{}, err
	}
	row, ok, err := e.GroupStore(g).DLQRowByID(tenant, id)
	switch {
	case err != nil:
		return wire.DLQReplayResult{}, err
	case !ok:
		return wire.DLQReplayResult{Code: wire.CodeNotFound}, nil
	}
	mark := wire.DLQReplayCmd{Tenant: tenant, ID: id, MsgID: msgID}
	if !row.Replayed {
		rec, err := wire.ParseRecord(row.Record)
		if err != nil {
			return wire.DLQReplayResult{Code: wire.CodeBadRequest}, nil
		}
		rec.MsgID = msgID
		rec.Flags |= wire.FlagTxnID
		rec.TxnID = []byte(storage.DLQTxnID(id))
		mark.Queue, mark.Partition = row.Queue, row.Partition
		if queue != "" {
			mark.Queue = queue
		}
		if partition != "" {
			mark.Partition = partition
		}
		push := wire.PushCmd{Tenant: tenant, Queue: mark.Queue, Partition: mark.Partition, PartitionIndex: -1,
			Flags: wire.PushIndexTxn, Count: 1, Records: wire.AppendRecord(nil, &rec)}
		outs, err := e.Push(ctx, tenant, []wire.PushCmd{push})
		if err != nil {
			return wire.DLQReplayResult{}, err
		}
		pr := outs[0]
		if pr.Code != wire.CodeOK {
			return wire.DLQReplayResult{Code: pr.Code}, nil
		}
		off, dup := pr.Offset(0)
		mark.PartitionID, mark.Offset = pr.PartitionID, off
		if dup != nil {
			mark.Duplicate, mark.MsgID = true, dup.MsgID
		}
	}
	return proposeOne(ctx, e, g, wire.KindDLQReplay, mark.Encode(nil), wire.DecodeDLQReplayResult)
}

// DeleteMessage erases one message's payload, in the group its partition
// id names.
func (e *Engine) DeleteMessage(ctx context.Context, c *wire.DeleteMessageCmd) (wire.CodeResult, error) {
	g := wire.GroupOfID(c.PartitionID)
	if g >= len(e.host.groups) {
		return wire.CodeResult{Code: wire.CodePartitionNotFound}, nil
	}
	return proposeOne(ctx, e, g, wire.KindDeleteMessage, c.Encode(nil), wire.DecodeCodeResult)
}

// DeleteOffsets forgets a group's positions in the named partitions, in
// each partition's group.
func (e *Engine) DeleteOffsets(ctx context.Context, c *wire.DeleteOffsetsCmd) (wire.CodesResult, error) {
	out := wire.CodesResult{Code: wire.CodeOK, Codes: make([]wire.Code, len(c.Items))}
	route := func(i int) (int, bool) {
		g, ok := e.partitionGroup(ctx, c.Tenant, c.Items[i].Queue, "", int32(c.Items[i].Partition))
		if !ok {
			out.Codes[i] = wire.CodePartitionNotFound
		}
		return g, ok
	}
	err := perGroup(len(c.Items), route, func(g int, idx []int) error {
		sub := wire.DeleteOffsetsCmd{Tenant: c.Tenant, Group: c.Group}
		for _, i := range idx {
			sub.Items = append(sub.Items, c.Items[i])
		}
		r, err := proposeOne(ctx, e, g, wire.KindDeleteOffsets, sub.Encode(nil), wire.DecodeCodesResult)
		if err != nil {
			return err
		}
		for j, i := range idx {
			if j < len(r.Codes) {
				out.Codes[i] = r.Codes[j]
			}
		}
		return nil
	})
	return out, err
}

// KVGroup is the group holding a tenant's KV and locks.
func (e *Engine) KVGroup(tenant wire.ID) int { return e.place.TenantHome(tenant) }

// KV applies KV operations as one unit.
func (e *Engine) KV(ctx context.Context, c *wire.KVCmd) (wire.KVResult, error) {
	return proposeOne(ctx, e, e.KVGroup(c.Tenant), wire.KindKV, c.Encode(nil), wire.DecodeKVResult)
}

// Locks applies lock operations.
func (e *Engine) Locks(ctx context.Context, c *wire.LocksCmd) (wire.LocksResult, error) {
	return proposeOne(ctx, e, e.KVGroup(c.Tenant), wire.KindLocks, c.Encode(nil), wire.DecodeLocksResult)
}

// Timers applies timer operations, each in its queue's home; operations on
// queues with different homes commit independently, in their order per
// home.
func (e *Engine) Timers(ctx context.Context, c *wire.TimersCmd) (wire.TimersResult, error) {
	out := wire.TimersResult{Code: wire.CodeOK, Ops: make([]wire.TimerOpResult, len(c.Ops))}
	route := func(i int) (int, bool) { return e.Home(c.Tenant, c.Ops[i].Queue), true }
	err := perGroup(len(c.Ops), route, func(g int, idx []int) error {
		sub := wire.TimersCmd{Tenant: c.Tenant}
		for _, i := range idx {
			sub.Ops = append(sub.Ops, c.Ops[i])
		}
		r, err := proposeOne(ctx, e, g, wire.KindTimers, sub.Encode(nil), wire.DecodeTimersResult)
		if err != nil {
			return err
		}
		if r.Code != wire.CodeOK {
			out.Code = r.Code
		}
		for j, i := range idx {
			if j < len(r.Ops) {
				out.Ops[i] = r.Ops[j]
			}
		}
		return nil
	})
	return out, err
}

// Trace records a trace event in the group of the partition it is about.
func (e *Engine) Trace(ctx context.Context, c *wire.TraceCmd) (wire.TraceResult, error) {
	g := wire.GroupOfID(c.PartitionID)
	if g >= len(e.host.groups) {
		g = e.KVGroup(c.Tenant)
	}
	if e.partitionEncrypted(c.Tenant, c.PartitionID) {
		sealed, err := e.SealText(c.Data)
		if err != nil {
			return wire.TraceResult{}, err
		}
		cc := *c
		cc.Data = sealed
		c = &cc
	}
	return proposeOne(ctx, e, g, wire.KindTrace, c.Encode(nil), wire.DecodeTraceResult)
}
