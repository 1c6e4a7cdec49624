package storage

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// Dead-letter commands in the apply loop. A replay pushes the row's record
// again as a new message with transaction id "dlq:<id>" and leaves the row
// behind as a replayed marker without its record: a repeated replay (a
// retried proposal, or a client asking twice) finds the marker and answers
// a duplicate with where the message went, and a purge removes markers with
// the rows.

// dlqPrefix bounds a tenant's dead-letter rows.
func dlqPrefix(tenant wire.ID) []byte { return append([]byte{tagDLQ}, tenant[:]...) }

// DLQTxnID is the transaction id a replayed row is pushed with.
func DLQTxnID(id uint64) string { return "dlq:" + strconv.FormatUint(id, 10) }

// countDLQRows rebuilds every queue's count of rows not yet replayed.
func (s *Store) countDLQRows() error {
	return s.scan([]byte{tagDLQ}, func(k, v []byte) error {
		row, err := decodeDLQRow(binary.BigEndian.Uint64(k[17:]), v)
		if err != nil {
			return fmt.Errorf("storage: dlq row %x: %w", k, err)
		}
		if q := s.queuesByID[row.queueID]; q != nil && row.replayedMs == 0 {
			q.dlqRows++
		}
		return nil
	})
}

// forgetDLQRow keeps the queue's live row count when a row stops being live.
func (s *Store) forgetDLQRow(row *dlqRow) {
	if q := s.queuesByID[row.queueID]; q != nil && row.replayedMs == 0 && q.dlqRows > 0 {
		q.dlqRows--
	}
}

// eachDLQRow calls f with the tenant's rows in id order, from the apply
// batch. Keys are collected first: the batch is written while the caller
// acts on them.
func eachDLQRow(ctx *applyCtx, tenant wire.ID, f func(key []byte, row *dlqRow) bool) {
	prefix := dlqPrefix(tenant)
	it := ctx.b.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	type kv struct{ k, v []byte }
	var rows []kv
	for it.First(); it.Valid(); it.Next() {
		rows = append(rows, kv{append([]byte(nil), it.Key()...), append([]byte(nil), it.Value()...)})
	}
	ctx.closeIter(it)
	for _, r := range rows {
		row, err := decodeDLQRow(binary.BigEndian.Uint64(r.k[17:]), r.v)
		if err != nil {
			continue
		}
		if !f(r.k, &row) {
			return
		}
	}
}

// deleteDLQRows deletes the tenant's rows (replayed markers included) that
// came from queue qid. Rows are keyed by tenant, so this reads each row's
// leading queue id; only the matching keys are held in memory.
func deleteDLQRows(ctx *applyCtx, tenant wire.ID, qid uint64) {
	prefix := dlqPrefix(tenant)
	it := ctx.b.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	var doomed [][]byte
	for it.First(); it.Valid(); it.Next() {
		if id, n := binary.Uvarint(it.Value()); n > 0 && id == qid {
			doomed = append(doomed, append([]byte(nil), it.Key()...))
		}
	}
	ctx.closeIter(it)
	for _, k := range doomed {
		ctx.del(k)
	}
}

// applyDLQPurge deletes up to wire.MaxDLQPurge of the tenant's rows that
// match the queue and group filters.
func (s *Store) applyDLQPurge(ctx *applyCtx, c *wire.DLQPurgeCmd) wire.CountResult {
	res := wire.CountResult{Code: wire.CodeOK}
	eachDLQRow(ctx, c.Tenant, func(key []byte, row *dlqRow) bool {
		if (c.Queue != "" && row.queue != c.Queue) || (c.Group != "" && row.group != c.Group) {
			return true
		}
		if res.N >= wire.MaxDLQPurge {
			res.More = true
			return false
		}
		ctx.del(key)
		s.forgetDLQRow(row)
		res.N++
		return true
	})
	return res
}

// applyDLQReplay marks a row replayed with where the engine pushed its
// message again (the push is the engine's: the target may live in another
// group). A row already replayed keeps its first outcome, answered as a
// duplicate, so a retried replay never records a second push.
func (s *Store) applyDLQReplay(ctx *applyCtx, c *wire.DLQReplayCmd) wire.DLQReplayResult {
	key := dlqKey(c.Tenant, c.ID)
	v, ok := ctx.get(key)
	if !ok {
		return wire.DLQReplayResult{Code: wire.CodeNotFound}
	}
	row, err := decodeDLQRow(c.ID, v)
	if err != nil {
		return wire.DLQReplayResult{Code: wire.CodeBadRequest}
	}
	if row.replayedMs != 0 {
		return wire.DLQReplayResult{Code: wire.CodeOK, Duplicate: true, Queue: row.replayQueue, Partition: row.replayPart,
			PartitionID: row.replayPartID, Offset: row.replayOffset, MsgID: row.replayMsgID}
	}
	s.forgetDLQRow(&row)
	row.replayedMs, row.record = ctx.nowMs, nil
	row.replayQueue, row.replayPart, row.replayPartID, row.replayOffset, row.replayMsgID = c.Queue, c.Partition, c.PartitionID, c.Offset, c.MsgID
	ctx.set(key, row.encode())
	return wire.DLQReplayResult{Code: wire.CodeOK, Duplicate: c.Duplicate, Queue: c.Queue, Partition: c.Partition,
		PartitionID: c.PartitionID, Offset: c.Offset, MsgID: c.MsgID}
}
