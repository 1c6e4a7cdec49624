package raftgroups

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/queen-mq/queen/wire"
)

// popRotor spreads pops over a queue's groups: each pop starts at the next
// group, so no group's partitions are always served first.
type popRotor struct{ n atomic.Uint32 }

// Pop leases messages of a queue for a consumer group. A queue's partitions
// live in several groups; a pop tries the groups whose replica here says a
// pop could find messages, from a rotating start, and gathers claims until
// its batch or its partitions (its lease ids; MaxPartitions for an
// auto-ack pop) are used up: one entry per group it takes from, each
// claiming as many partitions there as it still may. An auto-ack entry's
// retry is answered the batch that entry consumed (storage/retries.go);
// should a later group's outcome stay unknown, the pop answers what the
// earlier groups delivered. One lease per (partition,
// consumer group) holds as before: each partition's lease lives in its
// group. The group's subscription comes from the queue's home, created
// there on first use, so every group starts untouched partitions alike.
//
// LeaseIDs are the proposer's: each is tagged with the group it is used in
// (wire.TagID), so an ack or extend finds the lease's group by its id. A
// pop asking for a shared lease (the same id in every slot,
// wire.PopCmd.SharedLease) leases every partition it claims, in whichever
// groups, under one id naming the groups it proposes to (wire/lease.go),
// chosen here before the first proposal so every replica of every group
// stores the same id; while any of those groups is below FormatV4 it gets
// a lease per partition instead.
func (e *Engine) Pop(ctx context.Context, c *wire.PopCmd) (wire.PopResult, error) {
	if c.Group == "" || c.Batch == 0 {
		return wire.PopResult{Code: wire.CodeBadRequest}, nil
	}
	if e.maint.pop.Load() {
		return wire.PopResult{}, nil // pop maintenance: nothing is delivered
	}
	cat, ok := e.Catalog(c.Tenant, c.Queue)
	if !ok {
		// Created through another node a moment ago, perhaps: this
		// node's replica of the home catches up before saying it is not.
		if err := e.CatchUpQueues(ctx, c.Tenant, c.Queue); err != nil {
			return wire.PopResult{}, err
		}
		if cat, ok = e.Catalog(c.Tenant, c.Queue); !ok {
			return wire.PopResult{Code: wire.CodeQueueNotFound}, nil
		}
	}
	// The group subscribes on its first pop, messages or not: what it
	// is owed from then on (mode new) and what retention must keep for it
	// count from that moment.
	sub, err := e.subscription(ctx, c.Tenant, c.Queue, c.Group, c.SubMode, c.SubFromMs)
	if err != nil {
		return wire.PopResult{}, err
	}
	c.SubMode, c.SubFromMs, c.SubCreatedMs = sub.Mode, sub.FromMs, sub.CreatedMs
	groups := e.popGroups(c, cat)
	candidates := e.poppable(c, groups)
	if len(candidates) == 0 {
		// This node's replicas may lag the groups' leaders, and its
		// replica of the home may not list a partition or a group that
		// a push through another node has just added: catch up once
		// before answering that there is nothing.
		home := e.Home(c.Tenant, c.Queue)
		if err := e.BarrierGroups(ctx, append([]int{home}, groupsOf(cat.Groups&^(1<<home))...)); err != nil {
			return wire.PopResult{}, err
		}
		if fresh, ok := e.Catalog(c.Tenant, c.Queue); ok && fresh.Groups != cat.Groups {
			if err := e.BarrierGroups(ctx, groupsOf(fresh.Groups&^cat.Groups)); err != nil {
				return wire.PopResult{}, err
			}
			cat = fresh
		}
		groups = e.popGroups(c, cat)
		if candidates = e.poppable(c, groups); len(candidates) == 0 {
			return wire.PopResult{Code: wire.CodeOK}, nil
		}
	}
	var out wire.PopResult
	ids := c.LeaseIDs
	share := false
	if !c.CommitOnDelivery && c.SharedLease() {
		if share = e.canShareLease(candidates); !share {
			ids = perPartitionLeaseIDs(len(ids))
		}
	}
	var shared wire.ID
	if share {
		var groups uint64
		for _, g := range candidates {
			groups |= 1 << g
		}
		shared = wire.SharedLeaseID(ids[0], groups, candidates[0])
	}
	remaining := c.Batch
	maxClaims := c.PartitionLimit()
	for _, g := range candidates {
		if len(out.Claims) >= maxClaims {
			break
		}
		cmd := *c
		cmd.Batch = remaining
		switch {
		case c.CommitOnDelivery:
			cmd.MaxPartitions = uint32(maxClaims - len(out.Claims))
		case share:
			// Tagged with the group of its first claim, where a
			// transaction's required lease is checked: until a group
			// claims, no partition holds the id, so it may still change.
			if len(out.Claims) == 0 {
				shared = wire.TagID(shared, g)
			}
			cmd.LeaseIDs = make([]wire.ID, len(ids))
			for i := range cmd.LeaseIDs {
				cmd.LeaseIDs[i] = shared
			}
		default:
			cmd.LeaseIDs = make([]wire.ID, len(ids))
			for i, id := range ids {
				cmd.LeaseIDs[i] = wire.TagID(id, g)
			}
		}
		res, err := proposeOne(ctx, e, g, wire.KindPop, cmd.Encode(nil), wire.DecodePopResult)
		if err != nil {
			if len(out.Claims) > 0 {
				break // answer with what was leased: those leases are real
			}
			return res, err
		}
		if res.Code != wire.CodeOK {
			if len(out.Claims) > 0 || res.Code == wire.CodeQueueNotFound {
				continue
			}
			return res, nil
		}
		for _, cl := range res.Claims {
			out.Claims = append(out.Claims, cl)
			remaining -= uint32(cl.To - cl.From)
			if !c.CommitOnDelivery {
				ids = ids[1:]
			}
		}
		if remaining == 0 {
			break
		}
	}
	return out, nil
}

// canShareLease reports whether one lease id may span groups: each is at
// FormatV4 (what this node's replica has applied: a replica behind its
// leader reports less, never more) and low enough for the id to name it.
func (e *Engine) canShareLease(groups []int) bool {
	for _, g := range groups {
		if g >= wire.MaxSharedLeaseGroup || e.ActiveFormat(g) < wire.FormatV4 {
			return false
		}
	}
	return len(groups) > 0
}

// perPartitionLeaseIDs are n fresh lease ids, one per partition a pop may
// claim: what a pop that asked for a shared lease gets where one cannot be.
func perPartitionLeaseIDs(n int) []wire.ID {
	ids := make([]wire.ID, n)
	for i := range ids {
		ids[i] = wire.ID(uuid.New())
	}
	return ids
}

// popGroups lists the groups a pop may take from, from a rotating start:
// the group holding the partition it names, or every group holding
// partitions of the queue.
func (e *Engine) popGroups(c *wire.PopCmd, cat wire.Catalog) []int {
	if c.Partition != "" {
		d, ok := e.DirByName(c.Tenant, c.Queue, c.Partition)
		if !ok {
			return nil
		}
		return []int{int(d.Group)}
	}
	groups := groupsOf(cat.Groups)
	if len(groups) > 1 {
		r := int(e.pops.n.Add(1)) % len(groups)
		groups = append(groups[r:], groups[:r]...)
	}
	return groups
}

// poppable keeps the groups whose replica here says a pop could find
// messages now.
func (e *Engine) poppable(c *wire.PopCmd, groups []int) []int {
	now := e.host.clock.NowMs()
	var out []int
	for _, g := range groups {
		if e.GroupStore(g).MayPop(c.Tenant, c.Queue, c.Group, c.Partition, now) {
			out = append(out, g)
		}
	}
	return out
}

// PopReadiness answers, across the queue's groups, whether a pop could
// find messages now, and if not only because messages are held back by
// the queue's options, when the first becomes visible (see
// storage.Store.PopReadiness).
func (e *Engine) PopReadiness(tenant wire.ID, queue, group, partition string, nowMs int64) (ok bool, retryAtMs int64) {
	for _, g := range e.queuePartitionGroups(tenant, queue, partition) {
		r, at := e.GroupStore(g).PopReadiness(tenant, queue, group, partition, nowMs)
		if r {
			return true, 0
		}
		if at > 0 && (retryAtMs == 0 || at < retryAtMs) {
			retryAtMs = at
		}
	}
	return false, retryAtMs
}

// MayPop reports whether a pop could find messages now in any group.
func (e *Engine) MayPop(tenant wire.ID, queue, group, partition string, nowMs int64) bool {
	ok, _ := e.PopReadiness(tenant, queue, group, partition, nowMs)
	return ok
}

// NextLeaseExpiry is the earliest lease expiry after afterMs among the
// group's leases on the queue, in any group (0: none).
func (e *Engine) NextLeaseExpiry(tenant wire.ID, queue, group string, afterMs int64) int64 {
	var next int64
	for _, g := range e.queuePartitionGroups(tenant, queue, "") {
		if at := e.GroupStore(g).NextLeaseExpiry(tenant, queue, group, afterMs); at > 0 && (next == 0 || at < next) {
			next = at
		}
	}
	return next
}

// queuePartitionGroups lists the groups holding the named partition, or
// every partition of the queue.
func (e *Engine) queuePartitionGroups(tenant wire.ID, queue, partition string) []int {
	if partition != "" {
		if d, ok := e.DirByName(tenant, queue, partition); ok {
			return []int{int(d.Group)}
		}
		return nil
	}
	cat, ok := e.Catalog(tenant, queue)
	if !ok {
		return nil
	}
	return groupsOf(cat.Groups)
}

// subscription is a consumer group's subscription to a queue as its home
// holds it, created there on first use.
func (e *Engine) subscription(ctx context.Context, tenant wire.ID, queue, group string, mode uint8, fromMs int64) (wire.Subscription, error) {
	home := e.Home(tenant, queue)
	if sub, ok := e.GroupStore(home).Subscription(tenant, queue, group); ok {
		return sub, nil
	}
	cmd := wire.SubscribeCmd{Tenant: tenant, Queue: queue, Group: group, Mode: mode, FromMs: fromMs}
	res, err := proposeOne(ctx, e, home, wire.KindSubscribe, cmd.Encode(nil), wire.DecodeSubscribeResult)
	if err != nil {
		return wire.Subscription{}, err
	}
	if res.Code != wire.CodeOK {
		return wire.Subscription{}, fmt.Errorf("raftgroups: subscribe %q to %q: %w", group, queue, res.Code.Err())
	}
	// Every group holding partitions learns of it now: their retention and
	// expiry must count this group's progress (the reconciler catches a
	// group this misses).
	if cat, ok := e.Catalog(tenant, queue); ok {
		if err := e.propagateCatalog(ctx, tenant, queue, cat); err != nil {
			return wire.Subscription{}, err
		}
	}
	return res.Sub, nil
}

// sortedGroups returns groups ascending, without duplicates.
func sortedGroups(gs []int) []int {
	slices.Sort(gs)
	return slices.Compact(gs)
}

// extendShared extends a shared lease in every group its id names, at
// once: Renewed counts the partitions renewed in all of them, and the
// answer's expiry is the earliest a group set (each group stamps its own
// entry's time). A group whose outcome is unknown fails the extend, which
// the client repeats; renewing again from a later now is harmless.
func (e *Engine) extendShared(ctx context.Context, c *wire.ExtendLeaseCmd) (wire.ExtendLeaseResult, error) {
	var groups []int
	for g, set := 0, wire.SharedLeaseGroups(c.LeaseID); set != 0 && g < len(e.host.groups); g, set = g+1, set>>1 {
		if set&1 != 0 {
			groups = append(groups, g)
		}
	}
	body := c.Encode(nil)
	res := make([]wire.ExtendLeaseResult, len(groups))
	errs := make([]error, len(groups))
	fanOut(len(groups), func(i int) {
		res[i], errs[i] = proposeOne(ctx, e, groups[i], wire.KindExtendLease, body, wire.DecodeExtendLeaseResult)
	})
	if err := errors.Join(errs...); err != nil {
		return wire.ExtendLeaseResult{}, err
	}
	out := wire.ExtendLeaseResult{Code: wire.CodeLeaseNotFound}
	for _, r := range res {
		switch r.Code {
		case wire.CodeOK:
			if out.Code != wire.CodeOK || r.ExpiresMs < out.ExpiresMs {
				out.ExpiresMs = r.ExpiresMs
			}
			out.Code = wire.CodeOK
			out.Renewed += r.Renewed
		case wire.CodeLeaseNotFound:
		default:
			return r, nil
		}
	}
	return out, nil
}

// requiredLeaseGroups are the groups a transaction's required lease id is
// checked in: the group its id is tagged with, or for a shared lease (held
// by partitions in several groups) the groups of the transaction's acks
// under it, or without a lease id, so that a transaction acknowledging
// messages of the pop's third partition needs the lease live there, not in
// the first partition (already released, perhaps). A shared lease the
// transaction acknowledges nothing under is checked where its first claim
// was (the tag).
func (e *Engine) requiredLeaseGroups(c *wire.TxnCmd, id wire.ID) []int {
	tag := []int{wire.GroupOfTag(id)}
	if !wire.IsSharedLease(id) {
		return tag
	}
	var groups []int
	for _, op := range c.Ops {
		if op.Kind != wire.TxnOpAck {
			continue
		}
		ack, err := wire.DecodeAckCmd(op.Body)
		if err != nil {
			continue // planTxn answers it
		}
		for _, it := range ack.Items {
			if it.LeaseID == id || it.LeaseID.IsZero() {
				groups = append(groups, wire.GroupOfID(it.PartitionID))
			}
		}
	}
	if len(groups) == 0 {
		return tag
	}
	return sortedGroups(groups)
}
