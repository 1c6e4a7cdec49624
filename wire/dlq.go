package wire

// Dead-letter queue commands: purge rows, replay a row as a new push, and
// erase a message.

// MaxDLQPurge bounds the rows one purge command deletes, so one apply never
// runs unbounded; the caller sends the command again while More is set.
const MaxDLQPurge = 10000

// DLQPurgeCmd deletes a tenant's dead-lettered rows, only those of Queue
// and Group when they are set.
type DLQPurgeCmd struct {
	Tenant ID
	Queue  string
	Group  string
}

// Encode appends the command body.
func (c *DLQPurgeCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	w.String(c.Group)
	return w.B
}

// DecodeDLQPurgeCmd decodes a purge body.
func DecodeDLQPurgeCmd(b []byte) (DLQPurgeCmd, error) {
	r := Reader{b: b}
	var c DLQPurgeCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Group = r.String()
	return c, r.Done()
}

// DLQReplayCmd marks dead-lettered row ID replayed: the engine pushed its
// message again, as a new message MsgID with transaction id "dlq:<ID>", to
// Queue/Partition (PartitionID, Offset; Duplicate when that push found it
// there already). A row already replayed keeps its first outcome.
type DLQReplayCmd struct {
	Tenant      ID
	ID          uint64
	MsgID       ID
	Queue       string
	Partition   string
	PartitionID uint64
	Offset      uint64
	Duplicate   bool
}

// Encode appends the command body.
func (c *DLQReplayCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.Uvarint(c.ID)
	w.Fixed(c.MsgID[:])
	w.String(c.Queue)
	w.String(c.Partition)
	w.Uvarint(c.PartitionID)
	w.Uvarint(c.Offset)
	w.Bool(c.Duplicate)
	return w.B
}

// DecodeDLQReplayCmd decodes a replay body.
func DecodeDLQReplayCmd(b []byte) (DLQReplayCmd, error) {
	r := Reader{b: b}
	var c DLQReplayCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.ID = r.Uvarint()
	copy(c.MsgID[:], r.Fixed(16))
	c.Queue = r.String()
	c.Partition = r.String()
	c.PartitionID = r.Uvarint()
	c.Offset = r.Uvarint()
	c.Duplicate = r.Bool()
	return c, r.Done()
}

// DLQReplayResult answers a replay: where the message went, and whether it
// was already there (Duplicate) rather than pushed now.
type DLQReplayResult struct {
	Code        Code
	Duplicate   bool
	Queue       string
	Partition   string
	PartitionID uint64
	Offset      uint64
	MsgID       ID
}

// Encode appends the result.
func (d DLQReplayResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(d.Code))
	w.Bool(d.Duplicate)
	w.String(d.Queue)
	w.String(d.Partition)
	w.Uvarint(d.PartitionID)
	w.Uvarint(d.Offset)
	w.Fixed(d.MsgID[:])
	return w.B
}

// DecodeDLQReplayResult decodes a replay result.
func DecodeDLQReplayResult(b []byte) (DLQReplayResult, error) {
	r := Reader{b: b}
	var d DLQReplayResult
	d.Code = Code(r.U8())
	d.Duplicate = r.Bool()
	d.Queue = r.String()
	d.Partition = r.String()
	d.PartitionID = r.Uvarint()
	d.Offset = r.Uvarint()
	copy(d.MsgID[:], r.Fixed(16))
	return d, r.Done()
}

// DeleteMessageCmd erases the message a transaction id addresses in a
// partition: its payload is replaced by a null tombstone at the same offset
// (offsets stay gap-free), its transaction id is forgotten and its
// dead-letter rows are removed.
type DeleteMessageCmd struct {
	Tenant      ID
	PartitionID uint64
	TxnID       []byte
}

// Encode appends the command body.
func (c *DeleteMessageCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.Uvarint(c.PartitionID)
	w.Bytes(c.TxnID)
	return w.B
}

// DecodeDeleteMessageCmd decodes a delete-message body.
func DecodeDeleteMessageCmd(b []byte) (DeleteMessageCmd, error) {
	r := Reader{b: b}
	var c DeleteMessageCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.PartitionID = r.Uvarint()
	c.TxnID = append([]byte(nil), r.Bytes()...)
	return c, r.Done()
}
