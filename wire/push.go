package wire

// Push flags.
const (
	// PushIndexTxn records every message's transaction id so it can be
	// acknowledged and deduplicated by id; Kafka produce skips it.
	PushIndexTxn uint8 = 1 << 2
	// PushKeyHeld says the proposer holds the encryption key, so the state
	// machine refuses (CodeSealRequired) records it did not seal for a
	// queue whose options say encryptionEnabled. Without it (no key on the
	// proposer, or an entry written before the check) the records are
	// stored as they are, as the spec asks of a node without a key.
	PushKeyHeld uint8 = 1 << 3
	// PushKafkaBatch says Records is one Kafka record batch kept as
	// produced (AppendKafkaBatch), not stored records: the state machine
	// stores it as it is, and readers other than Kafka fetch decode it.
	PushKafkaBatch uint8 = 1 << 4
)

// PushCmd appends records to one partition of one queue. Records are already
// in their stored form (AppendRecord), so the state machine copies them into
// the log without re-encoding. The partition must exist in the group (the
// engine creates it first with AllocCmd and EnsureShardCmd).
type PushCmd struct {
	Tenant ID
	Queue  string
	// Partition names the partition; PartitionIndex >= 0 addresses it by its
	// permanent index instead.
	Partition      string
	PartitionIndex int32
	Flags          uint8
	// Inc is the queue incarnation the engine resolved the partition in; a
	// shard of another incarnation refuses the push (CodeQueueNotFound), so
	// nothing is appended to a shard a delete is about to drop. 0 skips
	// the check (pushes the state machine makes itself).
	Inc     uint64
	Count   int
	Records []byte
}

// Encode appends the command body.
func (c *PushCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	w.String(c.Partition)
	w.Varint(int64(c.PartitionIndex))
	w.U8(c.Flags)
	w.Uvarint(c.Inc)
	w.Uvarint(uint64(c.Count))
	w.Fixed(c.Records)
	return w.B
}

// DecodePushCmd decodes a push body. Records alias b.
func DecodePushCmd(b []byte) (PushCmd, error) {
	r := Reader{b: b}
	var c PushCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Partition = r.String()
	c.PartitionIndex = int32(r.Varint())
	c.Flags = r.U8()
	c.Inc = r.Uvarint()
	c.Count = r.Count(MaxRecordBytes, 2)
	c.Records = r.Rest()
	return c, r.err
}

// PushDup is one record of a push that was already stored: its index in the
// command, and the offset and message id it was stored with.
type PushDup struct {
	Index  int
	Offset uint64
	MsgID  ID
}

// PushResult answers a PushCmd. Records not listed in Dups were appended at
// consecutive offsets from BaseOffset, in command order.
type PushResult struct {
	Code           Code
	QueueCreated   bool
	PartitionID    uint64
	PartitionIndex uint32
	BaseOffset     uint64
	Dups           []PushDup
}

// Offset returns the offset record i of the command was stored at (or
// already had), and whether it was a duplicate.
func (p *PushResult) Offset(i int) (offset uint64, dup *PushDup) {
	before := 0
	for k := range p.Dups {
		d := &p.Dups[k]
		if d.Index == i {
			return d.Offset, d
		}
		if d.Index < i {
			before++
		}
	}
	return p.BaseOffset + uint64(i-before), nil
}

// Encode appends the result.
func (p PushResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(p.Code))
	w.Bool(p.QueueCreated)
	w.Uvarint(p.PartitionID)
	w.Uvarint(uint64(p.PartitionIndex))
	w.Uvarint(p.BaseOffset)
	w.Uvarint(uint64(len(p.Dups)))
	for _, d := range p.Dups {
		w.Uvarint(uint64(d.Index))
		w.Uvarint(d.Offset)
		w.Fixed(d.MsgID[:])
	}
	return w.B
}

// DecodePushResult decodes a push result.
func DecodePushResult(b []byte) (PushResult, error) {
	r := Reader{b: b}
	var p PushResult
	p.Code = Code(r.U8())
	p.QueueCreated = r.Bool()
	p.PartitionID = r.Uvarint()
	p.PartitionIndex = r.u32()
	p.BaseOffset = r.Uvarint()
	n := r.Count(MaxCommandsPerEntry*64, 18)
	if n > 0 {
		p.Dups = make([]PushDup, n)
		for i := range p.Dups {
			p.Dups[i].Index = int(r.Uvarint())
			p.Dups[i].Offset = r.Uvarint()
			copy(p.Dups[i].MsgID[:], r.Fixed(16))
		}
	}
	return p, r.Done()
}
