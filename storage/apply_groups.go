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
		delete(s.leases, cur.lease.id)
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
	}
	sub := s.subscribe(ctx, q, c.Group, wire.SubAll, 0, 0)
	var n uint64
	seek := func(p *partState) {
		pos := p.next
		if !c.ToEnd {
			pos = s.offsetForTime(ctx, p, c.TimestampMs)
		}
		s.setPosition(ctx, p, sub, s.cursorFor(ctx, p, sub), pos)
		n++
	}
	if one != nil {
		seek(one)
	} else {
		// Every partition, read back into memory when it is not there.
		for i := range q.pids {
			if p := s.partAt(ctx, q, uint32(i)); p != nil {
				seek(p)
			}
		}
	}
	ctx.touch(q)
	return wire.CountResult{Code: wire.CodeOK, N: n}
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
	var n uint64
	for _, q := range queues {
		touched := false
		for i, pid := range q.pids {
			if pid == 0 || (q.inMemory(uint32(i)) == nil && !s.hasStoredCursor(ctx, pid, c.Group)) {
				continue
			}
			p := s.partAt(ctx, q, uint32(i))
			if p == nil || p.cursors.get(c.Group) == nil {
				continue
			}
			if l := p.cursors.get(c.Group).lease; l != nil {
				delete(s.leases, l.id)
			}
			q.dropLag(p.cursors.get(c.Group))
			p.cursors.remove(c.Group)
			ctx.del(cursorKey(p.id, c.Group))
			ctx.recountLater(p)
			touched = true
			n++
		}
		if sub := q.subs[c.Group]; sub != nil {
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
	}
	return wire.CountResult{Code: wire.CodeOK, N: n}
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
