package storage

import "github.com/queen-mq/queen/wire"

// applyDeleteOffsets forgets a group's cursors in the named partitions
// (Kafka OffsetDelete). The group's subscription stays: an untouched
// partition starts where the subscription says, and the ready set is
// brought back in line with that. A lease the group held there goes with
// the cursor. A partition without a cursor is left alone and answered OK,
// so a retried proposal is harmless.
func (s *Store) applyDeleteOffsets(ctx *applyCtx, c *wire.DeleteOffsetsCmd) wire.CodesResult {
	res := wire.CodesResult{Codes: make([]wire.Code, len(c.Items))}
	for i, it := range c.Items {
		q := s.queue(c.Tenant, it.Queue)
		if q == nil {
			res.Codes[i] = wire.CodeQueueNotFound
			continue
		}
		p := s.partAt(ctx, q, uint32(it.Partition))
		if p == nil {
			res.Codes[i] = wire.CodePartitionNotFound
			continue
		}
		cur := p.cursors.get(c.Group)
		if cur == nil {
			continue
		}
		if cur.lease != nil {
			s.unindexLease(cur.lease.id, p)
		}
		q.dropLag(cur)
		p.cursors.remove(c.Group)
		ctx.del(cursorKey(p.id, c.Group))
		ctx.recountLater(p)
		if sub := q.subs[c.Group]; sub != nil {
			if mayHaveNewFor(p, sub) {
				sub.ready.set(p.index)
			} else {
				sub.ready.clear(p.index)
			}
		}
		ctx.touch(q)
	}
	return res
}
