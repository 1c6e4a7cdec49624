package wire

// Timer operations (spec §1.10, §2.14).
const (
	TimerSchedule uint8 = iota + 1
	TimerReschedule
	TimerCancel
)

// Timer limits of spec §8.3.
const (
	MaxTimerOpsPerCall    = 256
	MaxTimerPayloadBytes  = 1 << 20
	TimerFireBatch        = 256
	TimerFireMaxBytes     = 4 << 20
	TimerMaxFireAttempts  = 5
	TimerDLQGroup         = "__timer__"
	MaxTimerHorizonMillis = 7776000 * 1000
)

// TimerOp schedules, reschedules or cancels the timer TimerKey of Queue.
// The payload is in stored form (an encrypted queue's payload is already
// sealed); PayloadFlags are the wire.Record flags it is pushed with.
type TimerOp struct {
	Op           uint8
	Queue        string
	Partition    string
	TimerKey     string
	DelayMs      int64
	Payload      []byte
	PayloadFlags uint64
	Txn          string
}

// TimersCmd applies timer operations of one tenant in order.
type TimersCmd struct {
	Tenant ID
	Ops    []TimerOp
}

// Encode appends the command body.
func (c *TimersCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	encodeTimerOps(&w, c.Ops)
	return w.B
}

func encodeTimerOps(w *Writer, ops []TimerOp) {
	w.Uvarint(uint64(len(ops)))
	for _, o := range ops {
		w.U8(o.Op)
		w.String(o.Queue)
		w.String(o.Partition)
		w.String(o.TimerKey)
		w.Varint(o.DelayMs)
		w.Bytes(o.Payload)
		w.Uvarint(o.PayloadFlags)
		w.String(o.Txn)
	}
}

func decodeTimerOps(r *Reader) []TimerOp {
	ops := make([]TimerOp, r.Count(MaxTimerOpsPerCall, 8))
	for i := range ops {
		o := &ops[i]
		o.Op = r.U8()
		o.Queue = r.String()
		o.Partition = r.String()
		o.TimerKey = r.String()
		o.DelayMs = r.Varint()
		o.Payload = r.Bytes()
		o.PayloadFlags = r.Uvarint()
		o.Txn = r.String()
	}
	return ops
}

// DecodeTimersCmd decodes a timers body.
func DecodeTimersCmd(b []byte) (TimersCmd, error) {
	r := Reader{b: b}
	var c TimersCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Ops = decodeTimerOps(&r)
	return c, r.Done()
}

// Timer statuses.
const (
	TimerScheduled   = "scheduled"
	TimerRescheduled = "rescheduled"
	TimerCancelled   = "cancelled"
	TimerAbsent      = "absent"
	TimerTooLate     = "too_late" // already fired
)

// TimerOpResult answers one timer operation.
type TimerOpResult struct {
	OK     bool
	Status string
	DueMs  int64
}

// TimersResult answers a TimersCmd.
type TimersResult struct {
	Code Code
	Ops  []TimerOpResult
}

// Encode appends the result.
func (t TimersResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(t.Code))
	w.Uvarint(uint64(len(t.Ops)))
	for _, o := range t.Ops {
		w.Bool(o.OK)
		w.String(o.Status)
		w.Varint(o.DueMs)
	}
	return w.B
}

// DecodeTimersResult decodes a timers result.
func DecodeTimersResult(b []byte) (TimersResult, error) {
	r := Reader{b: b}
	t := TimersResult{Code: Code(r.U8())}
	t.Ops = make([]TimerOpResult, r.Count(MaxTimerOpsPerCall, 3))
	for i := range t.Ops {
		t.Ops[i] = TimerOpResult{OK: r.Bool(), Status: r.String(), DueMs: r.Varint()}
	}
	return t, r.Done()
}

// TimerFiredCmd records the outcome of a timer's fire (the leader pushed
// its payload, or tried to): CodeOK marks it fired; another code counts a
// failed attempt. DueMs names the attempt, so a stale outcome is ignored.
type TimerFiredCmd struct {
	Tenant ID
	Queue  string
	Key    string
	DueMs  int64
	Code   Code
}

// Encode appends the command body.
func (c *TimerFiredCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	w.String(c.Key)
	w.Varint(c.DueMs)
	w.U8(uint8(c.Code))
	return w.B
}

// DecodeTimerFiredCmd decodes a timer-fired body.
func DecodeTimerFiredCmd(b []byte) (TimerFiredCmd, error) {
	r := Reader{b: b}
	var c TimerFiredCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Key = r.String()
	c.DueMs = r.Varint()
	c.Code = Code(r.U8())
	return c, r.Done()
}
