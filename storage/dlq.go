package storage

import (
	"github.com/queen-mq/queen/wire"
)

// dlqRow is a dead-lettered message: a snapshot of the record and why it
// was given up on.
type dlqRow struct {
	id         uint64
	queueID    uint64
	queue      string
	partID     uint64
	partition  string
	offset     uint64
	group      string
	errText    string
	retryCount uint32
	createdMs  int64
	appendMs   int64
	record     []byte // the stored record body (wire.ParseRecord)

	// A replayed row stays behind as a marker without its record, so a
	// repeated replay is answered as a duplicate (apply_dlq.go).
	replayedMs   int64
	replayQueue  string
	replayPart   string
	replayPartID uint64
	replayOffset uint64
	replayMsgID  wire.ID
}

func (r *dlqRow) encode() []byte {
	w := wire.Writer{B: make([]byte, 0, 96+len(r.record))}
	w.Uvarint(r.queueID)
	w.String(r.queue)
	w.Uvarint(r.partID)
	w.String(r.partition)
	w.Uvarint(r.offset)
	w.String(r.group)
	w.String(r.errText)
	w.Uvarint(uint64(r.retryCount))
	w.Varint(r.createdMs)
	w.Varint(r.appendMs)
	w.Bytes(r.record)
	if r.replayedMs != 0 {
		w.Varint(r.replayedMs)
		w.String(r.replayQueue)
		w.String(r.replayPart)
		w.Uvarint(r.replayPartID)
		w.Uvarint(r.replayOffset)
		w.Fixed(r.replayMsgID[:])
	}
	return w.B
}

func decodeDLQRow(id uint64, b []byte) (dlqRow, error) {
	rd := wire.NewReader(b)
	r := dlqRow{id: id}
	r.queueID = rd.Uvarint()
	r.queue = rd.String()
	r.partID = rd.Uvarint()
	r.partition = rd.String()
	r.offset = rd.Uvarint()
	r.group = rd.String()
	r.errText = rd.String()
	r.retryCount = uint32(rd.Uvarint())
	r.createdMs = rd.Varint()
	r.appendMs = rd.Varint()
	r.record = append([]byte(nil), rd.Bytes()...)
	if rd.Len() > 0 {
		r.replayedMs = rd.Varint()
		r.replayQueue = rd.String()
		r.replayPart = rd.String()
		r.replayPartID = rd.Uvarint()
		r.replayOffset = rd.Uvarint()
		copy(r.replayMsgID[:], rd.Fixed(16))
	}
	return r, rd.Done()
}

// deadLetter moves the message at off out of the group's way: into the
// dead-letter queue when the queue has one, otherwise it is dropped. Either
// way the caller advances the cursor past it.
func (s *Store) deadLetter(ctx *applyCtx, q *queueState, p *partState, c *cursor, off uint64, errText string, failures uint32) {
	if !q.cfg.DLQEnabled() {
		return
	}
	q.count(ctx.nowMs, Activity{DLQ: 1})
	q.dlqRows++
	row := dlqRow{
		id: s.nextDLQID(ctx, q.tenant), queueID: q.id, queue: q.name, partID: p.id, partition: p.name,
		offset: off, group: c.group, errText: errText, retryCount: failures, createdMs: ctx.nowMs,
	}
	s.readRange(ctx, p.id, off, off+1, func(_ uint64, appendMs int64, body []byte) bool {
		row.appendMs = appendMs
		row.record = append([]byte(nil), body...)
		return false
	})
	ctx.set(dlqKey(q.tenant, row.id), row.encode())
}
