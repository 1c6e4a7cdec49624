package wire

// Transaction operation kinds. An operation's body is the codec of the
// command it stands for, so a transaction's push is exactly a PushCmd and the
// state machine applies it with the same code.
const (
	TxnOpPush     uint8 = 1 // body: PushCmd
	TxnOpAck      uint8 = 2 // body: AckCmd
	TxnOpPosition uint8 = 3 // body: PositionOp
	TxnOpKV       uint8 = 4 // body: KVCmd (a required failure rolls back, CodeConflict)
	TxnOpTimers   uint8 = 5 // body: TimersCmd
)

// Limits of one transaction (spec §2.8: 16,384 positions).
const (
	MaxTxnOps    = 1 << 16
	MaxTxnLeases = 1 << 14
)

// TxnOp is one operation of a transaction.
type TxnOp struct {
	Kind uint8
	Body []byte
}

// TxnCmd is a transaction: its operations commit together, in order, in
// one raft entry, or none of them does. RequiredLeases must all be live
// when it applies. ID is chosen by the proposer and makes the command
// idempotent: a retried entry of a transaction that already committed is
// answered with the result it committed with.
type TxnCmd struct {
	Tenant         ID
	ID             ID
	RequiredLeases []ID
	Ops            []TxnOp
}

// Encode appends the command body.
func (c *TxnCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.Fixed(c.ID[:])
	w.Uvarint(uint64(len(c.RequiredLeases)))
	for _, id := range c.RequiredLeases {
		w.Fixed(id[:])
	}
	w.Uvarint(uint64(len(c.Ops)))
	for _, op := range c.Ops {
		w.U8(op.Kind)
		w.Bytes(op.Body)
	}
	return w.B
}

// DecodeTxnCmd decodes a transaction body. Operation bodies alias b.
func DecodeTxnCmd(b []byte) (TxnCmd, error) {
	r := Reader{b: b}
	var c TxnCmd
	copy(c.Tenant[:], r.Fixed(16))
	copy(c.ID[:], r.Fixed(16))
	n := r.Count(MaxTxnLeases, 16)
	if n > 0 {
		c.RequiredLeases = make([]ID, n)
		for i := range c.RequiredLeases {
			copy(c.RequiredLeases[i][:], r.Fixed(16))
		}
	}
	n = r.Count(MaxTxnOps, 2)
	c.Ops = make([]TxnOp, n)
	for i := range c.Ops {
		c.Ops[i].Kind = r.U8()
		c.Ops[i].Body = r.Bytes()
	}
	return c, r.Done()
}

// PositionOp sets a consumer group's position in one partition inside a
// transaction. Reset (JSON offset null) forgets the position instead, so
// the group starts the partition where its subscription says. SubMode is
// the subscription a group that never touched the queue gets.
type PositionOp struct {
	Queue     string
	Group     string
	Partition string
	Offset    uint64
	Reset     bool
	Metadata  string
	SubMode   uint8
}

// Encode appends the operation body.
func (p *PositionOp) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.String(p.Queue)
	w.String(p.Group)
	w.String(p.Partition)
	w.Uvarint(p.Offset)
	w.Bool(p.Reset)
	w.String(p.Metadata)
	w.U8(p.SubMode)
	return w.B
}

// DecodePositionOp decodes a position operation.
func DecodePositionOp(b []byte) (PositionOp, error) {
	r := Reader{b: b}
	var p PositionOp
	p.Queue = r.String()
	p.Group = r.String()
	p.Partition = r.String()
	p.Offset = r.Uvarint()
	p.Reset = r.Bool()
	p.Metadata = r.String()
	p.SubMode = r.U8()
	return p, r.Done()
}

// TxnResult answers a TxnCmd. When Code is OK every operation committed and
// Ops holds their results in order (PushResult, AckResult, CodeResult for a
// position). Otherwise nothing changed: Code says why, FailedLease names
// the required lease that was not live (or is -1), FailedOp and FailedItem
// the operation and the item inside it (a push record, an ack item) that
// could not be applied (or -1).
type TxnResult struct {
	Code        Code
	FailedLease int
	FailedOp    int
	FailedItem  int
	Ops         [][]byte
	// Detail says more about a rollback (a KV operation's reason).
	Detail string
}

// TxnFailure is a rolled-back result.
func TxnFailure(code Code, lease, op, item int) TxnResult {
	return TxnResult{Code: code, FailedLease: lease, FailedOp: op, FailedItem: item}
}

// Encode appends the result.
func (t TxnResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(t.Code))
	w.Varint(int64(t.FailedLease))
	w.Varint(int64(t.FailedOp))
	w.Varint(int64(t.FailedItem))
	w.Uvarint(uint64(len(t.Ops)))
	for _, o := range t.Ops {
		w.Bytes(o)
	}
	w.String(t.Detail)
	return w.B
}

// DecodeTxnResult decodes a transaction result. Operation results alias b.
func DecodeTxnResult(b []byte) (TxnResult, error) {
	r := Reader{b: b}
	t := TxnResult{Code: Code(r.U8())}
	t.FailedLease = int(r.Varint())
	t.FailedOp = int(r.Varint())
	t.FailedItem = int(r.Varint())
	n := r.Count(MaxTxnOps, 1)
	if n > 0 {
		t.Ops = make([][]byte, n)
		for i := range t.Ops {
			t.Ops[i] = r.Bytes()
		}
	}
	t.Detail = r.String()
	return t, r.Done()
}
