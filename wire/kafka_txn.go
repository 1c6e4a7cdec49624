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

// TxnBeginCmd opens a transactional id's transaction (applied again for an
// open transaction of the same producer epoch it answers the same TxnSeq)
// and adds Groups (bit g: raft group g) to the groups its records and
// offsets are staged in, so EndTxn resolves each of them (AddPartitionsToTxn,
// TxnOffsetCommit).
type TxnBeginCmd struct {
	Tenant     ID
	TxnID      string
	ProducerID int64
	Epoch      int16
	Groups     uint64
}

// Encode appends the command body.
func (c *TxnBeginCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.TxnID)
	w.Varint(c.ProducerID)
	w.Varint(int64(c.Epoch))
	w.U64(c.Groups)
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
	c.Groups = r.U64()
	return c, r.Done()
}

// KafkaStageCmd stages one piece of an open Kafka transaction in the raft
// group holding its partitions: a producer batch (Produce, checked against
// the producer's sequence like any produce, so a retried batch is
// recognised) or consumer-group offsets (TxnOffsetCommit). Staged pieces are
// the group's prepared part of transaction XID (see xtxn.go), invisible to
// every reader until the coordinator's decision commits them; an abort
// drops them. DeadlineMs is when a part still undecided asks the
// coordinator group Coord, recording an abort there when there is none.
type KafkaStageCmd struct {
	XID        ID
	Coord      uint16
	DeadlineMs int64
	TxnID      string
	Produce    KafkaProduceCmd // Produce.Push.Count == 0: offsets only
	Offsets    []TxnOffset
}

// Encode appends the command body.
func (c *KafkaStageCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.XID[:])
	w.Uvarint(uint64(c.Coord))
	w.Varint(c.DeadlineMs)
	w.String(c.TxnID)
	w.Uvarint(uint64(len(c.Offsets)))
	for _, o := range c.Offsets {
		w.String(o.Group)
		w.String(o.Queue)
		w.Uvarint(uint64(o.PartitionIndex))
		w.Uvarint(o.Offset)
		w.String(o.Metadata)
	}
	return c.Produce.Encode(w.B)
}

// EncodeHeader appends the command up to the produce's records, which the
// caller appends (AppendRecord) right after, as KafkaProduceCmd.EncodeHeader.
func (c *KafkaStageCmd) EncodeHeader(b []byte) []byte {
	recs := c.Produce.Push.Records
	c.Produce.Push.Records = nil
	b = c.Encode(b)
	c.Produce.Push.Records = recs
	return b
}

// DecodeKafkaStageCmd decodes a stage body. Records alias b.
func DecodeKafkaStageCmd(b []byte) (KafkaStageCmd, error) {
	r := Reader{b: b}
	var c KafkaStageCmd
	copy(c.XID[:], r.Fixed(16))
	c.Coord = uint16(r.u32())
	c.DeadlineMs = r.Varint()
	c.TxnID = r.String()
	if n := r.Count(MaxTxnOffsets, 5); n > 0 {
		c.Offsets = make([]TxnOffset, n)
	}
	for i := range c.Offsets {
		c.Offsets[i] = TxnOffset{Group: r.String(), Queue: r.String(), PartitionIndex: r.u32(), Offset: r.Uvarint(), Metadata: r.String()}
	}
	if r.err != nil {
		return c, r.err
	}
	p, err := DecodeKafkaProduceCmd(r.Rest())
	c.Produce = p
	return c, err
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

// TxnOffset is a consumer-group position the transaction commits
// (TxnOffsetCommit).
type TxnOffset struct {
	Group          string
	Queue          string
	PartitionIndex uint32
	Offset         uint64
	Metadata       string
}

// MaxTxnOffsets bounds the offsets one KafkaStageCmd carries.
const MaxTxnOffsets = 1 << 20

// TxnEndCmd ends transaction TxnSeq of a transactional id, committed or
// aborted, at its coordinator: the transactional id's state. The staged
// records and offsets are resolved in their groups as the decision this
// command travels in says (engine TxnEnd). BumpEpoch fences the producer (a
// coordinator abort: the transaction timed out).
type TxnEndCmd struct {
	Tenant     ID
	TxnID      string
	ProducerID int64
	Epoch      int16
	TxnSeq     uint64
	Commit     bool
	BumpEpoch  bool
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
	return w.B
}

// DecodeTxnEndCmd decodes an end body.
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
	return c, r.Done()
}

// TxnSettledCmd tells a transactional id's coordinator group that its
// ended transaction XID is resolved in every raft group it wrote to: the
// id may begin its next transaction. Until then a new transaction is
// refused (CodeTxnUnsettled), so no partition ever holds a batch of the
// next transaction before the previous one's marker (which read_committed
// clients need: they skip a producer's batches from an aborted
// transaction's first offset to its marker).
type TxnSettledCmd struct {
	Tenant ID
	TxnID  string
	XID    ID
}

// Encode appends the command body.
func (c *TxnSettledCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.TxnID)
	w.Fixed(c.XID[:])
	return w.B
}

// DecodeTxnSettledCmd decodes a settled body.
func DecodeTxnSettledCmd(b []byte) (TxnSettledCmd, error) {
	r := Reader{b: b}
	var c TxnSettledCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.TxnID = r.String()
	copy(c.XID[:], r.Fixed(16))
	return c, r.Done()
}
