package storage

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// A timer is a durable delayed push: at its due time (on the replicated
// clock) the apply loop pushes its payload into its queue, exactly once,
// because firing and marking the timer fired are one write. A fired timer
// stays as a tombstone for timerTombstoneMs so a retried schedule of the
// same key answers too_late instead of firing again.
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

// timerSweeper fires due timers and drops old tombstones.
type timerSweeper struct{}

func (timerSweeper) name() string { return "timers" }

func (timerSweeper) due(s *Store, nowMs int64) bool {
	first, ok := s.firstKey([]byte{tagTimerDue})
	return ok && len(first) >= 9 && int64(binary.BigEndian.Uint64(first[1:9])) <= nowMs
}

func (timerSweeper) sweep(s *Store, ctx *applyCtx) {
	lower := []byte{tagTimerDue}
	it := ctx.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	var due [][]byte
	for it.First(); it.Valid() && len(due) < wire.TimerFireBatch; it.Next() {
		k := it.Key()
		if len(k) < 9 || int64(binary.BigEndian.Uint64(k[1:9])) > ctx.nowMs {
			break
		}
		due = append(due, append([]byte(nil), k...))
	}
	it.Close()
	bytes := 0
	for _, dk := range due {
		if bytes >= wire.TimerFireMaxBytes {
			return
		}
		ctx.del(dk)
		tk := append([]byte{tagTimer}, dk[9:]...)
		v, ok := ctx.get(tk)
		if !ok {
			continue
		}
		t, ok := decodeTimer(v)
		if !ok || t.dueMs != int64(binary.BigEndian.Uint64(dk[1:9])) {
			continue // a stale index entry: the timer moved
		}
		if t.fired {
			ctx.del(tk) // the tombstone's time is up
			continue
		}
		bytes += len(t.payload)
		s.fireTimer(ctx, tk, &t)
	}
}

// fireTimer pushes a timer's payload into its queue. A push that fails is
// retried with backoff; after wire.TimerMaxFireAttempts it is dead-lettered
// under the group __timer__.
func (s *Store) fireTimer(ctx *applyCtx, tk []byte, t *timerRec) {
	tenant, queue, key := splitNSKey(tk)
	rec := wire.Record{Flags: t.flags, MsgID: timerMsgID(tk, t.dueMs), Payload: t.payload}
	if t.txn != "" {
		rec.Flags |= wire.FlagTxnID
		rec.TxnID = []byte(t.txn)
	}
	ns, task := wire.QueueLabels(queue)
	cmd := wire.PushCmd{Tenant: tenant, Queue: queue, Partition: t.partition, PartitionIndex: -1, Count: 1,
		Flags:     wire.PushCreateQueue | wire.PushCreatePartition | wire.PushIndexTxn,
		Namespace: ns, Task: task, Records: wire.AppendRecord(nil, &rec)}
	res := s.applyPush(ctx, &cmd)
	if res.Code == wire.CodeOK {
		fired := *t
		fired.fired, fired.payload, fired.dueMs = true, nil, ctx.nowMs+timerTombstoneMs
		s.putTimer(ctx, tk, nil, &fired)
		return
	}
	t.attempts++
	if t.attempts >= wire.TimerMaxFireAttempts {
		s.deadLetterTimer(ctx, tenant, queue, key, t, res.Code)
		ctx.del(tk)
		return
	}
	backoff := min(int64(timerBackoffMin)<<(t.attempts-1), timerBackoffMax)
	next := *t
	next.dueMs = ctx.nowMs + backoff
	s.putTimer(ctx, tk, nil, &next)
}

func (s *Store) deadLetterTimer(ctx *applyCtx, tenant wire.ID, queue, key string, t *timerRec, code wire.Code) {
	rec := wire.Record{Flags: t.flags | wire.FlagTxnID, MsgID: timerMsgID(timerKey(tenant, queue, key), t.dueMs),
		TxnID: []byte("timer:" + key), Payload: t.payload}
	body := wire.AppendRecord(nil, &rec)
	it := wire.NewRecordIter(body)
	b, _, _ := it.Next()
	row := dlqRow{id: s.counters.nextDLQID, queue: queue, partition: t.partition, group: wire.TimerDLQGroup,
		errText: "timer fire failed: " + code.Err().Error(), retryCount: t.attempts, createdMs: ctx.nowMs,
		appendMs: ctx.nowMs, record: b}
	if q := s.queue(tenant, queue); q != nil {
		row.queueID = q.id
	}
	s.counters.nextDLQID++
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
