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
	res := wire.CountResult{Code: wire.CodeOK}
	if one != nil {
		seek(one)
	} else {
		// Every partition, read back into memory when it is not there, up
		// to the step's limit.
		w := stepWalk{steps: c.Steps}
		for i := w.from(q); i < len(q.pids); i++ {
			if q.pids[i] == 0 {
				continue
			}
			if w.full(q, uint32(i), &res) {
				break
			}
			if p := s.partAt(ctx, q, uint32(i)); p != nil {
				seek(p)
			}
		}
	}
	ctx.touch(q)
	res.N = n
	return res
}

// stepWalk bounds a walk over queues' partitions to one entry's steps
// (wire.Steps): it starts where the previous entry stopped and stops after
// Limit partitions, saying in the result where the next entry starts.
type stepWalk struct {
	steps   wire.Steps
	visited uint32
}

// from is the index q's walk starts at: the step's own when the step
// stopped in q, else 0 (a queue after the one it stopped in, or no steps).
func (w *stepWalk) from(q *queueState) int {
	if w.steps.Limit > 0 && q.id == w.steps.Queue {
		return int(w.steps.Index)
	}
	return 0
}

// skips reports whether q comes before the queue the step stopped in, so
// the walk passed it whole in an earlier entry (queues walk in id order).
func (w *stepWalk) skips(q *queueState) bool {
	return w.steps.Limit > 0 && q.id < w.steps.Queue
}

// full counts the partition at index i of q and reports whether the step
// has visited its limit already: then res says to continue from i.
func (w *stepWalk) full(q *queueState, i uint32, res *wire.CountResult) bool {
	if w.steps.Limit == 0 {
		return false
	}
	if w.visited == w.steps.Limit {
		res.More = true
		res.Next = wire.Steps{Limit: w.steps.Limit, Queue: q.id, Index: i}
		return true
	}
	w.visited++
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
	var n uint64
	res := wire.CountResult{Code: wire.CodeOK}
	w := stepWalk{steps: c.Steps}
	for _, q := range queues {
		if w.skips(q) {
			continue
		}
		touched := false
		for i := w.from(q); i < len(q.pids); i++ {
			pid := q.pids[i]
			if pid == 0 {
				continue
			}
			if w.full(q, uint32(i), &res) {
				break
			}
			if q.inMemory(uint32(i)) == nil && !s.hasStoredCursor(ctx, pid, c.Group) {
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
		if res.More {
			// The subscription goes (or its ready set is rebuilt) once the
			// last step has dropped the queue's last cursor.
			if touched {
				ctx.touch(q)
			}
			break
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
	res.N = n
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
