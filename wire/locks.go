package wire

// Lock operations (spec §1.9, §2.13).
const (
	LockAcquire uint8 = iota + 1
	LockRenew
	LockRelease
	LockGet
)

// Lock limits.
const (
	MaxLockOpsPerCall = 64
	MaxLockPermits    = 1024
	// LocksNamespace is the reserved KV namespace locks live in.
	LocksNamespace = "queen-locks"
)

// LockOp is one lock operation. A lock with Limit > 1 is a counting
// semaphore with that many slots.
type LockOp struct {
	Op     uint8
	Name   string
	TTLSec uint32
	Owner  string
	Limit  uint32
	Token  uint64 // renew, release: the token acquire returned
	Slot   uint32
}

// LocksCmd applies lock operations of one tenant in order.
type LocksCmd struct {
	Tenant ID
	Ops    []LockOp
}

// Encode appends the command body.
func (c *LocksCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.Uvarint(uint64(len(c.Ops)))
	for _, o := range c.Ops {
		w.U8(o.Op)
		w.String(o.Name)
		w.Uvarint(uint64(o.TTLSec))
		w.String(o.Owner)
		w.Uvarint(uint64(o.Limit))
		w.Uvarint(o.Token)
		w.Uvarint(uint64(o.Slot))
	}
	return w.B
}

// DecodeLocksCmd decodes a locks body.
func DecodeLocksCmd(b []byte) (LocksCmd, error) {
	r := Reader{b: b}
	var c LocksCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Ops = make([]LockOp, r.Count(MaxLockOpsPerCall, 7))
	for i := range c.Ops {
		o := &c.Ops[i]
		o.Op = r.U8()
		o.Name = r.String()
		o.TTLSec = r.u32()
		o.Owner = r.String()
		o.Limit = r.u32()
		o.Token = r.Uvarint()
		o.Slot = r.u32()
	}
	return c, r.Done()
}

// LockHolder is one held slot.
type LockHolder struct {
	Slot      uint32
	Owner     string
	Token     uint64
	ExpiresMs int64
}

// Lock reasons.
const (
	LockReasonHeld      = "held"      // a lock (limit 1) held by someone else
	LockReasonContended = "contended" // every slot of a semaphore is held
	LockReasonNotHolder = "not_holder"
)

// LockOpResult answers one lock operation. OK means acquired, renewed or
// released; for get it is always true.
type LockOpResult struct {
	OK        bool
	Reason    string
	Slot      uint32
	Token     uint64
	ExpiresMs int64
	Holders   []LockHolder
}

// LocksResult answers a LocksCmd.
type LocksResult struct {
	Code Code
	Ops  []LockOpResult
}

// Encode appends the result.
func (l LocksResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(l.Code))
	w.Uvarint(uint64(len(l.Ops)))
	for _, o := range l.Ops {
		w.Bool(o.OK)
		w.String(o.Reason)
		w.Uvarint(uint64(o.Slot))
		w.Uvarint(o.Token)
		w.Varint(o.ExpiresMs)
		w.Uvarint(uint64(len(o.Holders)))
		for _, h := range o.Holders {
			w.Uvarint(uint64(h.Slot))
			w.String(h.Owner)
			w.Uvarint(h.Token)
			w.Varint(h.ExpiresMs)
		}
	}
	return w.B
}

// DecodeLocksResult decodes a locks result.
func DecodeLocksResult(b []byte) (LocksResult, error) {
	r := Reader{b: b}
	l := LocksResult{Code: Code(r.U8())}
	l.Ops = make([]LockOpResult, r.Count(MaxLockOpsPerCall, 6))
	for i := range l.Ops {
		o := &l.Ops[i]
		o.OK = r.Bool()
		o.Reason = r.String()
		o.Slot = r.u32()
		o.Token = r.Uvarint()
		o.ExpiresMs = r.Varint()
		o.Holders = make([]LockHolder, r.Count(MaxLockPermits, 4))
		for j := range o.Holders {
			o.Holders[j] = LockHolder{Slot: r.u32(), Owner: r.String(), Token: r.Uvarint(), ExpiresMs: r.Varint()}
		}
	}
	return l, r.Done()
}
