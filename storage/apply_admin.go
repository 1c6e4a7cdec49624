package storage

import (
	"github.com/queen-mq/queen/wire"
)

// applyCommitPosition sets a group's position in a partition (a Kafka offset
// commit). A lease the group held there is dropped: the commit says where
// consumption stands now.
func (s *Store) applyCommitPosition(ctx *applyCtx, c *wire.CommitPositionCmd) wire.CodeResult {
	q := s.queue(c.Tenant, c.Queue)
	if q == nil {
		return wire.CodeResult{Code: wire.CodeQueueNotFound}
	}
	var p *partState
	if c.PartitionIndex >= 0 {
		if int(c.PartitionIndex) < len(q.parts) {
			p = q.parts[c.PartitionIndex]
		}
	} else {
		p = q.byName[c.Partition]
	}
	if p == nil {
		return wire.CodeResult{Code: wire.CodePartitionNotFound}
	}
	sub := s.subscribe(ctx, q, c.Group, wire.SubAll, 0)
	cur := s.cursorFor(ctx, p, sub)
	cur.metadata = c.Metadata
	s.setPosition(ctx, p, sub, cur, c.Offset)
	ctx.touch(q)
	return wire.CodeResult{Code: wire.CodeOK}
}

// applyConfigure creates a queue or merges options into it.
func (s *Store) applyConfigure(ctx *applyCtx, c *wire.ConfigureCmd) wire.ConfigureResult {
	q := s.queue(c.Tenant, c.Queue)
	res := wire.ConfigureResult{Code: wire.CodeOK}
	if q == nil {
		cfg := wire.DefaultQueueConfig()
		cfg.Merge(&c.Config, c.Set, c.Reset)
		q = s.createQueue(ctx, c.Tenant, c.Queue, c.Namespace, c.Task, cfg, false)
		res.Created = true
	} else {
		if c.Replace {
			q.cfg = wire.DefaultQueueConfig()
		}
		q.cfg.Merge(&c.Config, c.Set, c.Reset)
		if c.SetNamespace {
			q.namespace = c.Namespace
		}
		if c.SetTask {
			q.task = c.Task
		}
		s.noteQueueConfig(q)
		ctx.set(queueKey(q.id), q.encodeMeta())
	}
	ctx.touch(q)
	res.QueueID, res.Namespace, res.Task, res.Config = q.id, q.namespace, q.task, q.cfg
	return res
}

// applyDeleteQueue removes a queue with its partitions, messages, indexes,
// cursors, leases, subscriptions and dead-letter rows (Queen cascades a
// queue's deletion to its DLQ: a queue re-created under the same name must
// not inherit the old one's failures).
func (s *Store) applyDeleteQueue(ctx *applyCtx, c *wire.DeleteQueueCmd) wire.CodeResult {
	q := s.queue(c.Tenant, c.Queue)
	if q == nil {
		return wire.CodeResult{Code: wire.CodeQueueNotFound}
	}
	for _, p := range q.parts {
		if p == nil {
			continue
		}
		for _, cur := range p.cursors {
			if cur.lease != nil {
				delete(s.leases, cur.lease.id)
				ctx.del(leaseKey(cur.lease.id))
			}
		}
		deleteChunks(ctx, p.id)
		for _, prefix := range [][]byte{txnPrefix(p.id), cursorPrefix(p.id)} {
			_ = ctx.b.DeleteRange(prefix, prefixEnd(prefix), nil)
		}
		ctx.del(partitionKey(p.id))
		p.deleted.Store(true)
		delete(s.parts, p.id)
	}
	s.forgetKafkaQueue(ctx, q)
	deleteDLQRows(ctx, q.tenant, q.id)
	sp := subPrefix(q.id)
	_ = ctx.b.DeleteRange(sp, prefixEnd(sp), nil)
	ctx.del(queueKey(q.id))
	delete(s.queues, queueKeyT{q.tenant, q.name})
	delete(s.queuesByID, q.id)
	delete(s.timed, q.id)
	ctx.touch(q)
	return wire.CodeResult{Code: wire.CodeOK}
}
