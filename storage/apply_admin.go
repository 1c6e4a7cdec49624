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
		p = s.partAt(ctx, q, uint32(c.PartitionIndex))
	} else {
		p = s.partNamed(ctx, q, c.Partition)
	}
	if p == nil {
		return wire.CodeResult{Code: s.movedCode(q, int64(c.PartitionIndex), c.Partition)}
	}
	sub := s.subscribe(ctx, q, c.Group, wire.SubAll, 0, 0)
	cur := s.cursorFor(ctx, p, sub)
	cur.metadata = c.Metadata
	s.setPosition(ctx, p, sub, cur, c.Offset)
	ctx.touch(q)
	return wire.CodeResult{Code: wire.CodeOK}
}

// applyConfigure creates a queue (its catalog, here at its home) or merges
// options into it; every change takes a new option version, which the
// engine then carries to the queue's other groups.
func (s *Store) applyConfigure(ctx *applyCtx, c *wire.ConfigureCmd) wire.ConfigureResult {
	q := s.queue(c.Tenant, c.Queue)
	res := wire.ConfigureResult{Code: wire.CodeOK}
	switch {
	case q != nil && !q.home:
		return wire.ConfigureResult{Code: wire.CodeBadRequest}
	case q == nil && !s.homeFor(&c.Place):
		return wire.ConfigureResult{Code: wire.CodeBadRequest}
	case q == nil:
		cfg := wire.DefaultQueueConfig()
		cfg.Merge(&c.Config, c.Set, c.Reset)
		q = s.createCatalog(ctx, c.Tenant, c.Queue, c.Namespace, c.Task, cfg, false, c.Place)
		res.Created = true
	default:
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
		q.cfgVer++
		s.noteQueueConfig(q)
		ctx.set(queueKey(q.id), q.encodeMeta())
	}
	ctx.touch(q)
	res.QueueID, res.Namespace, res.Task, res.Config = q.id, q.namespace, q.task, q.cfg
	res.Catalog = q.catalog()
	return res
}

// applyDeleteQueue removes a queue at its home: the catalog and directory,
// and the home's own partitions, messages, indexes, cursors, leases,
// subscriptions and dead-letter rows (Queen cascades a queue's deletion to
// its DLQ: a queue re-created under the same name must not inherit the old
// one's failures). It answers the groups whose shards the engine drops next.
func (s *Store) applyDeleteQueue(ctx *applyCtx, c *wire.DeleteQueueCmd) wire.DeleteQueueResult {
	q := s.queue(c.Tenant, c.Queue)
	switch {
	case q == nil:
		return wire.DeleteQueueResult{Code: wire.CodeQueueNotFound}
	case !q.home:
		return wire.DeleteQueueResult{Code: wire.CodeBadRequest}
	}
	res := wire.DeleteQueueResult{Code: wire.CodeOK, Inc: q.inc, Groups: q.groups}
	s.deleteQueueData(ctx, q)
	return res
}
