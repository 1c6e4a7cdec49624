package storage

import (
	"cmp"
	"slices"

	"github.com/queen-mq/queen/wire"
)

// Consumer-group administration in the apply loop: seek, delete, and
// subscription changes. Each keeps a group's ready set exact enough for pop
// (a superset of the partitions with messages for it): moving a cursor sets
// or clears the partition's bit, dropping cursors rebuilds the set from the
// subscription, and dropping a subscription drops its set with it.

// tenantQueues lists a tenant's queues in id order: never map order, so
// every replica walks them alike.
func (s *Store) tenantQueues(tenant wire.ID) []*queueState {
	var out []*queueState
	for _, q := range s.queuesByID {
		if q.tenant == tenant {
			out = append(out, q)
		}
	}
	slices.SortFunc(out, func(a, b *queueState) int { return cmp.Compare(a.id, b.id) })
	return out
}

// setPosition moves a group's cursor in p to pos (clamped to the stored
// log), dropping the lease the group held there and its retry state.
func (s *Store) setPosition(ctx *applyCtx, p *partState, sub *subscription, cur *cursor, pos uint64) {
	if cur.lease != nil {
		s.unindexLease(cur.lease.id, p)
		cur.lease = nil
	}
	cur.pos = min(max(pos, p.start), p.next)
	cur.headFailures, cur.lastError, cur.attempt, cur.redeliverTo = 0, "", 0, 0
	if cur.pos < p.next {
		sub.ready.set(p.index)
	} else {
		sub.ready.clear(p.index)
	}
	ctx.saveCursor(p, cur)
}

// applySeek moves a group's cursors on a queue (or one partition) to the end
// or to the first message appended at or after a time. A group that never
// read the queue is subscribed first, from the start.
func (s *Store) applySeek(ctx *applyCtx, c *wire.SeekCmd) wire.CountResult {
	q := s.queue(c.Tenant, c.Queue)
	if q == nil {
		return wire.CountResult{Code: wire.CodeQueueNotFound}
	}
	if c.Group == "" {
		return wire.CountResult{Code: wire.CodeBadRequest}
	}
	var one *partState
	if c.Partition != "" {
		if one = s.partNamed(ctx, q, c.Partition); one == nil {
			return wire.CountResult{Code: wire.CodePartitionNotFound}
		}
		if s.at(wire.FormatV2) && s.anyPin(one.id, c.Group) {
			return wire.CountResult{Code: wire.CodeConflict} // a prepared transaction acknowledges through the cursor
		}
	}
	sub := s.subscribe(ctx, q, c.Group, wire.SubAll, 0, 0)
	res := wire.CountResult{Code: wire.CodeOK}
	seek := func(p *partState) {
		pos := p.next
		if !c.ToEnd {
			pos = s.offsetForTime(ctx, p, c.TimestampMs)
		}
		s.setPosition(ctx, p, sub, s.cursorFor(ctx, p, sub), pos)
		res.N++
	}
	if one != nil {
		seek(one)
	} else {
		// Every partition, read back into memory when it is not there, up
		// to the step's limit.
		budget := stepBudget{steps: c.Steps, waits: s.pinnedWaits(c.Group)}
		budget.each(q, &res, func(i uint32, _ uint64) {
			if p := s.partAt(ctx, q, i); p != nil {
				seek(p)
			}
		})
	}
	ctx.touch(q)
	return res
}

// pinnedWaits is what a walk of group's cursors waits for: a cursor a
// prepared transaction pins (from FormatV2; none before).
func (s *Store) pinnedWaits(group string) func(pid uint64) bool {
	if !s.at(wire.FormatV2) {
		return nil
	}
	return func(pid uint64) bool { return s.anyPin(pid, group) }
}

// stepBudget bounds a walk over queues' partitions to one entry's steps
// (wire.Steps): it starts where the previous entry stopped and stops after
// Limit partitions, saying in the result where the next entry starts.
// Queues are walked in id order; holes (removed partitions) are skipped
// and not counted. A step also stops before a partition waits names (a
// prepared transaction pins the group's cursor there): the next step
// starts at it, so the walk waits for the transaction's resolve. Walks
// without steps (entries from before steps) go on as they did.
type stepBudget struct {
	steps   wire.Steps
	waits   func(pid uint64) bool
	visited uint32
}

// passed reports whether an earlier entry walked q whole: it comes before
// the queue the last step stopped in.
func (b *stepBudget) passed(q *queueState) bool {
	return b.steps.Limit > 0 && q.id < b.steps.Queue
}

// each calls f with the index and id of every partition of q the step
// visits, from where the last step stopped when it stopped in q, and
// reports whether the step's limit stopped it (then res says where the
// next step starts).
func (b *stepBudget) each(q *queueState, res *wire.CountResult, f func(index uint32, pid uint64)) (stopped bool) {
	from := 0
	if b.steps.Limit > 0 && q.id == b.steps.Queue {
		from = int(b.steps.Index)
	}
	for i := from; i < len(q.pids); i++ {
		if q.pids[i] == 0 {
			continue
		}
		if b.steps.Limit > 0 {
			if b.visited == b.steps.Limit || (b.waits != nil && b.waits(q.pids[i])) {
				res.More = true
				res.Next = wire.Steps{Limit: b.steps.Limit, Queue: q.id, Index: uint32(i), Since: b.steps.Since}
				return true
			}
			b.visited++
		}
		f(uint32(i), q.pids[i])
	}
	return false
}

// applyDeleteGroup drops a group's cursors and leases on one queue or on
// all of the tenant's queues, and with DeleteMetadata its subscriptions.
// Without it the subscription stays, so the group's next pop starts each
// partition where the subscription says (a "new" group: from when it first
// subscribed).
func (s *Store) applyDeleteGroup(ctx *applyCtx, c *wire.DeleteGroupCmd) wire.CountResult {
	if c.Group == "" {
		return wire.CountResult{Code: wire.CodeBadRequest}
	}
	queues := s.tenantQueues(c.Tenant)
	if c.Queue != "" {
		q := s.queue(c.Tenant, c.Queue)
		if q == nil {
			return wire.CountResult{Code: wire.CodeQueueNotFound}
		}
		queues = []*queueState{q}
	}
	res := wire.CountResult{Code: wire.CodeOK}
	budget := stepBudget{steps: c.Steps, waits: s.pinnedWaits(c.Group)}
	if budget.steps.Limit > 0 && budget.steps.Since == 0 && s.at(wire.FormatV2) {
		// The walk's first step (or a step of a build before Since: each
		// of those deletes every position, as they did).
		budget.steps.Since = ctx.nowMs
	}
	for _, q := range queues {
		if budget.passed(q) {
			continue
		}
		touched := false
		stopped := budget.each(q, &res, func(i uint32, pid uint64) {
			if q.inMemory(i) == nil && !s.hasStoredCursor(ctx, pid, c.Group) {
				return
			}
			p := s.partAt(ctx, q, i)
			if p == nil || p.cursors.get(c.Group) == nil {
				return
			}
			if since := budget.steps.Since; since > 0 && p.cursors.get(c.Group).updatedMs > since {
				return // written since the walk began: the group re-formed
			}
			if l := p.cursors.get(c.Group).lease; l != nil {
				s.unindexLease(l.id, p)
			}
			q.dropLag(p.cursors.get(c.Group))
			p.cursors.remove(c.Group)
			ctx.del(cursorKey(p.id, c.Group))
			ctx.recountLater(p)
			touched = true
			res.N++
		})
		// The subscription goes (or its ready set is rebuilt) with the
		// step that drops the queue's last cursor.
		if sub := q.subs[c.Group]; sub != nil && !stopped {
			if c.DeleteMetadata {
				delete(q.subs, c.Group)
				ctx.del(subKey(q.id, c.Group))
			} else {
				s.rebuildReady(q, sub)
			}
			touched = true
		}
		if touched {
			ctx.touch(q)
		}
		if stopped {
			break
		}
	}
	return res
}

// applySubscription makes every subscription of the group start untouched
// partitions at FromMs; partitions the group already reads keep their
// cursors. It answers how many subscriptions changed.
func (s *Store) applySubscription(ctx *applyCtx, c *wire.SubscriptionCmd) wire.CountResult {
	if c.Group == "" {
		return wire.CountResult{Code: wire.CodeBadRequest}
	}
	var n uint64
	for _, q := range s.tenantQueues(c.Tenant) {
		sub := q.subs[c.Group]
		if sub == nil {
			continue
		}
		sub.mode, sub.fromMs = wire.SubFrom, c.FromMs
		ctx.set(subKey(q.id, c.Group), sub.encode())
		s.rebuildReady(q, sub)
		ctx.touch(q)
		n++
	}
	return wire.CountResult{Code: wire.CodeOK, N: n}
}
