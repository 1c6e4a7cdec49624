package storage

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// A timer is a durable delayed push. It lives in its queue's home group,
// while the partition it fires into may live in any group, so firing is the
// leader's work, not the apply loop's: the leader reads due timers
// (DueTimers), pushes each payload through the engine with a transaction id
// derived from the timer and its due time (so a push repeated after a
// leader change is a duplicate, not a second message), then proposes
// TimerFiredCmd with the outcome, which marks the timer fired or schedules
// its next attempt. A fired timer stays as a tombstone for
// timerTombstoneMs so a retried schedule of the same key answers too_late
// instead of firing again.
const (
	timerTombstoneMs = 3600 * 1000
	timerBackoffMin  = 1000
	timerBackoffMax  = 60000
)

type timerRec struct {
	dueMs     int64
	partition string
	payload   []byte
	flags     uint64
	txn       string
	attempts  uint32
	fired     bool
}

func (t *timerRec) encode() []byte {
	w := wire.Writer{B: make([]byte, 0, 32+len(t.payload))}
	w.Varint(t.dueMs)
	w.String(t.partition)
	w.Bytes(t.payload)
	w.Uvarint(t.flags)
	w.String(t.txn)
	w.Uvarint(uint64(t.attempts))
	w.Bool(t.fired)
	return w.B
}

func decodeTimer(b []byte) (timerRec, bool) {
	r := wire.NewReader(b)
	t := timerRec{dueMs: r.Varint(), partition: r.String()}
	t.payload = append([]byte(nil), r.Bytes()...)
	t.flags = r.Uvarint()
	t.txn = r.String()
	t.attempts = uint32(r.Uvarint())
	t.fired = r.Bool()
	return t, r.Done() == nil
}

func timerKey(tenant wire.ID, queue, key string) []byte {
	return nsKey(tagTimer, tenant, queue, []byte(key))
}

// timerDueKey orders timers by due time; the suffix is the timer's key
// without its tag.
func timerDueKey(dueMs int64, tk []byte) []byte {
	b := appendU64([]byte{tagTimerDue}, uint64(dueMs))
	return append(b, tk[1:]...)
}

func (s *Store) applyTimers(ctx *applyCtx, c *wire.TimersCmd) wire.TimersResult {
	res := wire.TimersResult{Code: wire.CodeOK, Ops: make([]wire.TimerOpResult, len(c.Ops))}
	for i := range c.Ops {
		res.Ops[i] = s.timerOp(ctx, c.Tenant, &c.Ops[i])
	}
	return res
}

func (s *Store) timerOp(ctx *applyCtx, tenant wire.ID, op *wire.TimerOp) wire.TimerOpResult {
	tk := timerKey(tenant, op.Queue, op.TimerKey)
	var cur *timerRec
	if v, ok := ctx.get(tk); ok {
		if t, ok := decodeTimer(v); ok {
			cur = &t
		}
	}
	due := ctx.nowMs + max(op.DelayMs, 0)
	switch op.Op {
	case wire.TimerSchedule:
		switch {
		case cur != nil && cur.fired:
			return wire.TimerOpResult{Status: wire.TimerTooLate, DueMs: cur.dueMs}
		case cur != nil:
			// Scheduling is idempotent per key: the first schedule stands.
			return wire.TimerOpResult{OK: true, Status: wire.TimerScheduled, DueMs: cur.dueMs}
		}
		partition := op.Partition
		if partition == "" {
			partition = "Default"
		}
		s.putTimer(ctx, tk, nil, &timerRec{dueMs: due, partition: partition, payload: op.Payload, flags: op.PayloadFlags, txn: op.Txn})
		return wire.TimerOpResult{OK: true, Status: wire.TimerScheduled, DueMs: due}
	case wire.TimerReschedule, wire.TimerCancel:
		switch {
		case cur == nil:
			return wire.TimerOpResult{Status: wire.TimerAbsent}
		case cur.fired:
			return wire.TimerOpResult{Status: wire.TimerTooLate, DueMs: cur.dueMs}
		}
		if op.Op == wire.TimerCancel {
			ctx.del(timerDueKey(cur.dueMs, tk))
			ctx.del(tk)
			return wire.TimerOpResult{OK: true, Status: wire.TimerCancelled}
		}
		next := *cur
		next.dueMs, next.attempts = due, 0
		if op.Payload != nil {
			next.payload, next.flags = op.Payload, op.PayloadFlags
		}
		s.putTimer(ctx, tk, cur, &next)
		return wire.TimerOpResult{OK: true, Status: wire.TimerRescheduled, DueMs: due}
	}
	return wire.TimerOpResult{Status: "unknown_op"}
}

// putTimer writes a timer and moves its due-index entry.
func (s *Store) putTimer(ctx *applyCtx, tk []byte, old, t *timerRec) {
	if old != nil {
		ctx.del(timerDueKey(old.dueMs, tk))
	}
	ctx.set(tk, t.encode())
	ctx.set(timerDueKey(t.dueMs, tk), nil)
}

// timerTombstoneKey orders fired timers' tombstones by when they go.
func timerTombstoneKey(goneMs int64, tk []byte) []byte {
	b := appendU64([]byte{tagTimerGone}, uint64(goneMs))
	return append(b, tk[1:]...)
}

// timerSweeper drops the tombstones of fired timers whose time is up.
type timerSweeper struct{}

func (timerSweeper) name() string { return "timers" }

func (timerSweeper) due(s *Store, nowMs int64) bool {
	first, ok := s.firstKeyHeld([]byte{tagTimerGone})
	return ok && len(first) >= 9 && int64(binary.BigEndian.Uint64(first[1:9])) <= nowMs
}

func (timerSweeper) sweep(s *Store, ctx *applyCtx) {
	lower := []byte{tagTimerGone}
	it := ctx.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	var gone [][]byte
	for it.First(); it.Valid() && len(gone) < wire.TimerFireBatch; it.Next() {
		k := it.Key()
		if len(k) < 9 || int64(binary.BigEndian.Uint64(k[1:9])) > ctx.nowMs {
			break
		}
		gone = append(gone, append([]byte(nil), k...))
	}
	ctx.closeIter(it)
	for _, gk := range gone {
		ctx.del(gk)
		tk := append([]byte{tagTimer}, gk[9:]...)
		if v, ok := ctx.get(tk); ok {
			if t, ok := decodeTimer(v); ok && t.fired && t.dueMs == int64(binary.BigEndian.Uint64(gk[1:9])) {
				ctx.del(tk)
			}
		}
	}
}

// DueTimer is a timer due to fire, as the leader's fire loop reads it.
type DueTimer struct {
	Tenant    wire.ID
	Queue     string
	Key       string
	DueMs     int64
	Partition string
	// Record is the stored record the fire pushes: its message id and
	// transaction id are derived from the timer and its due time.
	Record   wire.Record
	Attempts uint32
}

// DueTimers lists up to wire.TimerFireBatch timers due at nowMs (and at most
// wire.TimerFireMaxBytes of payload), earliest first.
func (s *Store) DueTimers(nowMs int64) ([]DueTimer, error) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return nil, ErrClosed
	}
	lower := []byte{tagTimerDue}
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	defer it.Close()
	var out []DueTimer
	bytes := 0
	for it.First(); it.Valid() && len(out) < wire.TimerFireBatch && bytes < wire.TimerFireMaxBytes; it.Next() {
		k := it.Key()
		if len(k) < 9 {
			continue
		}
		dueMs := int64(binary.BigEndian.Uint64(k[1:9]))
		if dueMs > nowMs {
			break
		}
		tk := append([]byte{tagTimer}, k[9:]...)
		v, closer, err := s.db.Get(tk)
		if err != nil {
			continue // a stale index entry
		}
		t, ok := decodeTimer(v)
		closer.Close()
		if !ok || t.fired || t.dueMs != dueMs {
			continue
		}
		tenant, queue, key := splitNSKey(tk)
		bytes += len(t.payload)
		out = append(out, DueTimer{Tenant: tenant, Queue: queue, Key: key, DueMs: dueMs, Partition: t.partition,
			Record: timerRecord(tk, &t), Attempts: t.attempts})
	}
	return out, nil
}

// NextTimerMs is when the earliest pending timer is due (0: none).
func (s *Store) NextTimerMs() int64 {
	first, ok := s.firstKey([]byte{tagTimerDue})
	if !ok || len(first) < 9 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(first[1:9]))
}

// timerRecord is the record a timer fires: a message id derived from the
// timer and its due time, and the transaction id its schedule named or
// one derived the same way, so the push a fire makes twice is found a
// duplicate the second time.
func timerRecord(tk []byte, t *timerRec) wire.Record {
	rec := wire.Record{Flags: t.flags | wire.FlagTxnID, MsgID: timerMsgID(tk, t.dueMs), Payload: t.payload}
	rec.TxnID = []byte(t.txn)
	if t.txn == "" {
		// Named explicitly, so the push is deduplicated by it, and
		// spelled as the message id, which is what a message without
		// one shows.
		rec.TxnID = []byte(rec.MsgID.String())
	}
	return rec
}

// applyTimerFired records what became of a timer's fire: fired (a
// tombstone stays for timerTombstoneMs), or failed, retried with backoff
// and dead-lettered under the group __timer__ after
// wire.TimerMaxFireAttempts. An outcome for a timer that moved, was
// cancelled or already fired is stale and changes nothing.
func (s *Store) applyTimerFired(ctx *applyCtx, c *wire.TimerFiredCmd) wire.CodeResult {
	tk := timerKey(c.Tenant, c.Queue, c.Key)
	v, ok := ctx.get(tk)
	if !ok {
		return wire.CodeResult{Code: wire.CodeNotFound}
	}
	t, ok := decodeTimer(v)
	if !ok || t.fired || t.dueMs != c.DueMs {
		return wire.CodeResult{Code: wire.CodeConflict}
	}
	ctx.del(timerDueKey(t.dueMs, tk))
	if c.Code == wire.CodeOK {
		fired := t
		fired.fired, fired.payload, fired.dueMs = true, nil, ctx.nowMs+timerTombstoneMs
		ctx.set(tk, fired.encode())
		ctx.set(timerTombstoneKey(fired.dueMs, tk), nil)
		return wire.CodeResult{Code: wire.CodeOK}
	}
	t.attempts++
	if t.attempts >= wire.TimerMaxFireAttempts {
		s.deadLetterTimer(ctx, c.Tenant, c.Queue, c.Key, &t, c.Code)
		ctx.del(tk)
		return wire.CodeResult{Code: wire.CodeOK}
	}
	backoff := min(int64(timerBackoffMin)<<(t.attempts-1), timerBackoffMax)
	next := t
	next.dueMs = ctx.nowMs + backoff
	ctx.set(tk, next.encode())
	ctx.set(timerDueKey(next.dueMs, tk), nil)
	return wire.CodeResult{Code: wire.CodeOK}
}

func (s *Store) deadLetterTimer(ctx *applyCtx, tenant wire.ID, queue, key string, t *timerRec, code wire.Code) {
	rec := wire.Record{Flags: t.flags | wire.FlagTxnID, MsgID: timerMsgID(timerKey(tenant, queue, key), t.dueMs),
		TxnID: []byte("timer:" + key), Payload: t.payload}
	body := wire.AppendRecord(nil, &rec)
	it := wire.NewRecordIter(body)
	b, _, _ := it.Next()
	row := dlqRow{id: s.nextDLQID(ctx, tenant), queue: queue, partition: t.partition, group: wire.TimerDLQGroup,
		errText: "timer fire failed: " + code.Err().Error(), retryCount: t.attempts, createdMs: ctx.nowMs,
		appendMs: ctx.nowMs, record: b}
	if q := s.queue(tenant, queue); q != nil {
		row.queueID = q.id
	}
	ctx.set(dlqKey(tenant, row.id), row.encode())
}

// timerMsgID derives the message id a timer fires with from the timer and
// its due time: the same on every replica, a UUIDv7 whose time is the due
// time.
func timerMsgID(tk []byte, dueMs int64) wire.ID {
	h := sha256.Sum256(strconv.AppendInt(append([]byte(nil), tk...), dueMs, 10))
	var id wire.ID
	copy(id[:], h[:16])
	binary.BigEndian.PutUint16(id[4:6], uint16(dueMs))
	binary.BigEndian.PutUint32(id[0:4], uint32(dueMs>>16))
	id[6] = 0x70 | id[6]&0x0f
	id[8] = 0x80 | id[8]&0x3f
	return id
}

// splitNSKey undoes nsKey.
func splitNSKey(k []byte) (tenant wire.ID, ns, key string) {
	copy(tenant[:], k[1:17])
	rest := k[17:]
	for i, c := range rest {
		if c == 0 {
			return tenant, string(rest[:i]), string(rest[i+1:])
		}
	}
	return tenant, string(rest), ""
}
