package wire

// Streams (Queen's /streams/v1 routes). A streaming cycle is a transaction
// (TxnCmd): its state writes are a KV operation in the reserved namespace
// StreamsNamespace, its sink pushes are push operations, and its source
// acknowledgment is one TxnOpStreamAck, the only part the transaction
// kinds before it could not express: a cumulative acknowledgment that
// moves the group's cursor past a message and keeps or ends the lease.

// TxnOpStreamAck is a transaction operation whose body is a StreamAckOp.
// Applied only from FormatV3: an older build refuses the kind, so a group
// below it is never proposed one (raftgroups checks the group's format).
const TxnOpStreamAck uint8 = 6

// PushSkipDups, on a push of a transaction, skips a record whose
// transaction id its partition stores already (answered duplicate, as a
// plain push answers it) instead of rolling the transaction back: a
// Streams cycle's sink pushes deduplicate as pushes do. Honoured from
// FormatV3 (before it, every replica rolls back alike).
const PushSkipDups uint8 = 1 << 5

// StreamsNamespace is the KV namespace holding Streams queries and state.
// Its name does not match the KV routes' namespace pattern, so the user KV
// API can neither read nor write it.
const StreamsNamespace = "_streams"

// StreamAckOp acknowledges, for Group, every message of partition
// PartitionID up to and including the one named TxnID. A non-zero LeaseID
// must be the group's live lease there. Completed moves the cursor past the
// message and counts Count consumed; Release ends the lease, otherwise the
// lease stays until it expires and the rest of its messages come back after
// it. AckFailed/AckDLQ dead-letters the message (Error, or a default text),
// moves past it and ends the lease.
type StreamAckOp struct {
	Tenant      ID
	Group       string
	PartitionID uint64
	TxnID       []byte
	LeaseID     ID
	Status      uint8
	Count       uint32
	Error       string
	Release     bool
}

// Encode appends the operation body.
func (o *StreamAckOp) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(o.Tenant[:])
	w.String(o.Group)
	w.Uvarint(o.PartitionID)
	w.Bytes(o.TxnID)
	w.Fixed(o.LeaseID[:])
	w.U8(o.Status)
	w.Uvarint(uint64(o.Count))
	w.String(o.Error)
	w.Bool(o.Release)
	return w.B
}

// DecodeStreamAckOp decodes a stream acknowledgment body.
func DecodeStreamAckOp(b []byte) (StreamAckOp, error) {
	r := Reader{b: b}
	var o StreamAckOp
	copy(o.Tenant[:], r.Fixed(16))
	o.Group = r.String()
	o.PartitionID = r.Uvarint()
	o.TxnID = r.Bytes()
	copy(o.LeaseID[:], r.Fixed(16))
	o.Status = r.U8()
	o.Count = uint32(r.Uvarint())
	o.Error = r.String()
	o.Release = r.Bool()
	if o.Status > AckDLQ {
		r.fail("stream ack status")
	}
	return o, r.Done()
}

// StreamAckResult answers a StreamAckOp.
type StreamAckResult struct {
	Code          Code
	Offset        uint64 // the acknowledged message's offset
	LeaseReleased bool
	DLQ           bool
}

// Encode appends the result.
func (r StreamAckResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(r.Code))
	w.Uvarint(r.Offset)
	w.Bool(r.LeaseReleased)
	w.Bool(r.DLQ)
	return w.B
}

// DecodeStreamAckResult decodes a stream acknowledgment result.
func DecodeStreamAckResult(b []byte) (StreamAckResult, error) {
	r := Reader{b: b}
	res := StreamAckResult{Code: Code(r.U8()), Offset: r.Uvarint()}
	res.LeaseReleased = r.Bool()
	res.DLQ = r.Bool()
	return res, r.Done()
}
