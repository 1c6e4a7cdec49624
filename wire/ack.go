package wire

// Ack statuses (spec §1.5).
const (
	AckCompleted uint8 = 0 // processed; aliases success, acked, ok
	AckFailed    uint8 = 1 // spends one retry; redelivered
	AckRetry     uint8 = 2 // redelivered without counting a failure
	AckDLQ       uint8 = 3 // straight to the dead-letter queue
)

// AckItem acknowledges one message of a partition for a group. A zero
// LeaseID is an unfenced ack.
type AckItem struct {
	PartitionID uint64
	TxnID       []byte
	LeaseID     ID
	Status      uint8
	Error       string
	// Resolved says the proposing node found TxnID at Offset among the
	// records of lease LeaseID covering [LeaseFrom, LeaseTo), reading its
	// committed replica off the apply loop: a record at an offset never
	// changes, so applying the ack needs no read when the lease is still
	// that one. Encoded as a flag in the status byte, so items without it
	// encode as they always did.
	Resolved           bool
	Offset             uint64
	LeaseFrom, LeaseTo uint64
}

// ackResolvedFlag marks, in an encoded item's status byte, an item that
// carries its offset and lease range.
const ackResolvedFlag = 0x80

// AckCmd acknowledges messages for one consumer group.
type AckCmd struct {
	Tenant ID
	Group  string
	Items  []AckItem
}

// MaxAckItems bounds the items of one ack command.
const MaxAckItems = 1 << 16

// Encode appends the command body.
func (c *AckCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Group)
	w.Uvarint(uint64(len(c.Items)))
	for i := range c.Items {
		it := &c.Items[i]
		w.Uvarint(it.PartitionID)
		w.Bytes(it.TxnID)
		w.Fixed(it.LeaseID[:])
		if it.Resolved {
			w.U8(it.Status | ackResolvedFlag)
		} else {
			w.U8(it.Status)
		}
		w.String(it.Error)
		if it.Resolved {
			w.Uvarint(it.Offset)
			w.Uvarint(it.LeaseFrom)
			w.Uvarint(it.LeaseTo)
		}
	}
	return w.B
}

// DecodeAckCmd decodes an ack body.
func DecodeAckCmd(b []byte) (AckCmd, error) {
	r := Reader{b: b}
	var c AckCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Group = r.String()
	n := r.Count(MaxAckItems, 20)
	c.Items = make([]AckItem, n)
	for i := range c.Items {
		it := &c.Items[i]
		it.PartitionID = r.Uvarint()
		it.TxnID = r.Bytes()
		copy(it.LeaseID[:], r.Fixed(16))
		it.Status = r.U8()
		it.Error = r.String()
		if it.Status&ackResolvedFlag != 0 {
			it.Status &^= ackResolvedFlag
			it.Resolved = true
			it.Offset, it.LeaseFrom, it.LeaseTo = r.Uvarint(), r.Uvarint(), r.Uvarint()
		}
	}
	return c, r.Done()
}

// AckOutcome is the result of one AckItem.
type AckOutcome struct {
	Code          Code // OK, Noop, LeaseMismatch, NotLeased, MessageNotFound, PartitionNotFound
	LeaseReleased bool
	DLQ           bool
}

// AckResult answers an AckCmd, one outcome per item in order.
type AckResult struct {
	Code  Code
	Items []AckOutcome
}

// Encode appends the result.
func (a AckResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(a.Code))
	w.Uvarint(uint64(len(a.Items)))
	for _, o := range a.Items {
		w.U8(uint8(o.Code))
		var f uint8
		if o.LeaseReleased {
			f |= 1
		}
		if o.DLQ {
			f |= 2
		}
		w.U8(f)
	}
	return w.B
}

// DecodeAckResult decodes an ack result.
func DecodeAckResult(b []byte) (AckResult, error) {
	r := Reader{b: b}
	a := AckResult{Code: Code(r.U8())}
	n := r.Count(MaxAckItems, 2)
	a.Items = make([]AckOutcome, n)
	for i := range a.Items {
		a.Items[i].Code = Code(r.U8())
		f := r.U8()
		a.Items[i].LeaseReleased = f&1 != 0
		a.Items[i].DLQ = f&2 != 0
	}
	return a, r.Done()
}
