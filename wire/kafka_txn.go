package wire

// InitProducerCmd allocates a Kafka producer id. Without a transactional id
// it always allocates a fresh one (what Kafka does, KIP-360 bumps included).
// With one it fences the id's previous producer: the epoch goes up (a new id
// when it would overflow) and a transaction still open is aborted. ReqID is
// chosen by the proposer, so a retried proposal answers what the first one
// did instead of bumping again.
type InitProducerCmd struct {
	Tenant        ID
	Transactional bool
	TxnID         string
	TimeoutMs     uint32 // the transaction timeout the producer asked for
	ReqID         ID
}

// Encode appends the command body.
func (c *InitProducerCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.Bool(c.Transactional)
	w.String(c.TxnID)
	w.Uvarint(uint64(c.TimeoutMs))
	w.Fixed(c.ReqID[:])
	return w.B
}

// DecodeInitProducerCmd decodes an init-producer body.
func DecodeInitProducerCmd(b []byte) (InitProducerCmd, error) {
	r := Reader{b: b}
	var c InitProducerCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Transactional = r.Bool()
	c.TxnID = r.String()
	c.TimeoutMs = r.u32()
	copy(c.ReqID[:], r.Fixed(16))
	return c, r.Done()
}

// InitProducerResult answers an InitProducerCmd.
type InitProducerResult struct {
	Code       Code
	ProducerID int64
	Epoch      int16
}

// Encode appends the result.
func (p InitProducerResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(p.Code))
	w.Varint(p.ProducerID)
	w.Varint(int64(p.Epoch))
	return w.B
}

// DecodeInitProducerResult decodes an init-producer result.
func DecodeInitProducerResult(b []byte) (InitProducerResult, error) {
	r := Reader{b: b}
	p := InitProducerResult{Code: Code(r.U8()), ProducerID: r.Varint(), Epoch: r.i16()}
	return p, r.Done()
}

// TxnBeginCmd marks a transactional id's transaction as open, so a leader
// that did not stage it knows it was lost. Applied again for an open
// transaction of the same producer epoch it answers the same TxnSeq.
type TxnBeginCmd struct {
	Tenant     ID
	TxnID      string
	ProducerID int64
	Epoch      int16
}

// Encode appends the command body.
func (c *TxnBeginCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.TxnID)
	w.Varint(c.ProducerID)
	w.Varint(int64(c.Epoch))
	return w.B
}

// DecodeTxnBeginCmd decodes a begin body.
func DecodeTxnBeginCmd(b []byte) (TxnBeginCmd, error) {
	r := Reader{b: b}
	var c TxnBeginCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.TxnID = r.String()
	c.ProducerID = r.Varint()
	c.Epoch = r.i16()
	return c, r.Done()
}

// KafkaTxnResult answers TxnBeginCmd and TxnEndCmd: the transaction's number and
// the producer epoch after the command.
type KafkaTxnResult struct {
	Code   Code
	TxnSeq uint64
	Epoch  int16
}

// Encode appends the result.
func (t KafkaTxnResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(t.Code))
	w.Uvarint(t.TxnSeq)
	w.Varint(int64(t.Epoch))
	return w.B
}

// DecodeKafkaTxnResult decodes a begin or end result.
func DecodeKafkaTxnResult(b []byte) (KafkaTxnResult, error) {
	r := Reader{b: b}
	t := KafkaTxnResult{Code: Code(r.U8()), TxnSeq: r.Uvarint(), Epoch: r.i16()}
	return t, r.Done()
}

// SeqBatch is one producer batch of a transaction: its first sequence and
// record count, remembered so a retried batch is recognised after commit.
type SeqBatch struct {
	BaseSeq int32
	Count   uint32
}

// TxnPush is everything a transaction appends to one partition, in stored
// record form, with the producer batches it came in.
type TxnPush struct {
	Queue          string
	PartitionIndex uint32
	Batches        []SeqBatch
	Count          int
	Records        []byte
}

// TxnOffset is a consumer-group position the transaction commits
// (TxnOffsetCommit).
type TxnOffset struct {
	Group          string
	Queue          string
	PartitionIndex uint32
	Offset         uint64
	Metadata       string
}

// Limits of one TxnEndCmd.
const (
	MaxTxnPushes  = 1 << 16
	MaxTxnBatches = 1 << 20
	MaxTxnOffsets = 1 << 20
)

// TxnEndCmd ends transaction TxnSeq of a transactional id: with Commit its
// records and offsets are applied all together, in this one command; without
// it nothing is written, and the pushes carry only their batches, so the
// producer's sequences move past them. BumpEpoch fences the producer (a
// coordinator abort: the transaction timed out or its staged records were
// lost with a leader).
type TxnEndCmd struct {
	Tenant     ID
	TxnID      string
	ProducerID int64
	Epoch      int16
	TxnSeq     uint64
	Commit     bool
	BumpEpoch  bool
	StateTTLMs uint32
	Pushes     []TxnPush
	Offsets    []TxnOffset
}

// Encode appends the command body.
func (c *TxnEndCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.TxnID)
	w.Varint(c.ProducerID)
	w.Varint(int64(c.Epoch))
	w.Uvarint(c.TxnSeq)
	w.Bool(c.Commit)
	w.Bool(c.BumpEpoch)
	w.Uvarint(uint64(c.StateTTLMs))
	w.Uvarint(uint64(len(c.Pushes)))
	for i := range c.Pushes {
		p := &c.Pushes[i]
		w.String(p.Queue)
		w.Uvarint(uint64(p.PartitionIndex))
		w.Uvarint(uint64(len(p.Batches)))
		for _, sb := range p.Batches {
			w.Varint(int64(sb.BaseSeq))
			w.Uvarint(uint64(sb.Count))
		}
		w.Uvarint(uint64(p.Count))
		w.Bytes(p.Records)
	}
	w.Uvarint(uint64(len(c.Offsets)))
	for _, o := range c.Offsets {
		w.String(o.Group)
		w.String(o.Queue)
		w.Uvarint(uint64(o.PartitionIndex))
		w.Uvarint(o.Offset)
		w.String(o.Metadata)
	}
	return w.B
}

// DecodeTxnEndCmd decodes an end body. Records alias b.
func DecodeTxnEndCmd(b []byte) (TxnEndCmd, error) {
	r := Reader{b: b}
	var c TxnEndCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.TxnID = r.String()
	c.ProducerID = r.Varint()
	c.Epoch = r.i16()
	c.TxnSeq = r.Uvarint()
	c.Commit = r.Bool()
	c.BumpEpoch = r.Bool()
	c.StateTTLMs = r.u32()
	if n := r.Count(MaxTxnPushes, 5); n > 0 {
		c.Pushes = make([]TxnPush, n)
	}
	for i := range c.Pushes {
		p := &c.Pushes[i]
		p.Queue = r.String()
		p.PartitionIndex = r.u32()
		if n := r.Count(MaxTxnBatches, 2); n > 0 {
			p.Batches = make([]SeqBatch, n)
		}
		for j := range p.Batches {
			p.Batches[j] = SeqBatch{BaseSeq: r.i32(), Count: r.u32()}
		}
		p.Count = r.Count(MaxRecordBytes, 0)
		p.Records = r.Bytes()
	}
	if n := r.Count(MaxTxnOffsets, 5); n > 0 {
		c.Offsets = make([]TxnOffset, n)
	}
	for i := range c.Offsets {
		c.Offsets[i] = TxnOffset{Group: r.String(), Queue: r.String(), PartitionIndex: r.u32(), Offset: r.Uvarint(), Metadata: r.String()}
	}
	return c, r.Done()
}
