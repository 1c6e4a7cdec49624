package wire

// NoProducer is the ProducerID of a Kafka batch from a producer that is
// neither idempotent nor transactional.
const NoProducer int64 = -1

// KafkaProduceCmd appends one Kafka record batch, already converted to stored
// records, to one partition (addressed by index). With a ProducerID the
// state machine checks the batch's sequence against the producer's state in
// that partition first: a batch it already holds is answered with its
// original offset and not stored again, a gap or an old epoch is refused.
// Without one, a retried proposal is still recognised by the batch's first
// message id, so the engine's own retries never store a batch twice.
type KafkaProduceCmd struct {
	ProducerID int64 // NoProducer: not idempotent
	Epoch      int16
	BaseSeq    int32
	// StateTTLMs is how long the producer's state in this partition is kept
	// after its last batch (QUEEN_KAFKA_DEDUP_WINDOW_SECONDS); the command
	// carries it so every replica expires alike.
	StateTTLMs uint32
	// Push holds the target (PartitionIndex >= 0) and the records.
	Push PushCmd
}

// EncodeHeader appends the command body without the records; the caller
// appends Push.Count stored records (AppendRecord) right after it, so a
// produce is built in its final buffer without copying the records again.
func (c *KafkaProduceCmd) EncodeHeader(b []byte) []byte {
	w := Writer{B: b}
	w.Varint(c.ProducerID)
	w.Varint(int64(c.Epoch))
	w.Varint(int64(c.BaseSeq))
	w.Uvarint(uint64(c.StateTTLMs))
	recs := c.Push.Records
	c.Push.Records = nil
	w.B = c.Push.Encode(w.B)
	c.Push.Records = recs
	return w.B
}

// Encode appends the whole command body.
func (c *KafkaProduceCmd) Encode(b []byte) []byte {
	return append(c.EncodeHeader(b), c.Push.Records...)
}

// DecodeKafkaProduceCmd decodes a produce body. Records alias b.
func DecodeKafkaProduceCmd(b []byte) (KafkaProduceCmd, error) {
	r := Reader{b: b}
	var c KafkaProduceCmd
	c.ProducerID = r.Varint()
	c.Epoch = r.i16()
	c.BaseSeq = r.i32()
	c.StateTTLMs = r.u32()
	if r.err != nil {
		return c, r.err
	}
	p, err := DecodePushCmd(r.Rest())
	c.Push = p
	return c, err
}

// KafkaProduceResult answers a KafkaProduceCmd. CodeDuplicate means the
// batch was already stored, at BaseOffset.
type KafkaProduceResult struct {
	Code         Code
	QueueCreated bool
	BaseOffset   uint64
	LogStart     uint64
	// AppendMs is the batch's append time (replicated clock) when it was
	// appended by this command, 0 otherwise.
	AppendMs int64
}

// Encode appends the result.
func (p KafkaProduceResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(p.Code))
	w.Bool(p.QueueCreated)
	w.Uvarint(p.BaseOffset)
	w.Uvarint(p.LogStart)
	w.Varint(p.AppendMs)
	return w.B
}

// DecodeKafkaProduceResult decodes a produce result.
func DecodeKafkaProduceResult(b []byte) (KafkaProduceResult, error) {
	r := Reader{b: b}
	p := KafkaProduceResult{Code: Code(r.U8()), QueueCreated: r.Bool(), BaseOffset: r.Uvarint(), LogStart: r.Uvarint(), AppendMs: r.Varint()}
	return p, r.Done()
}

// NextSeq is the sequence that follows a batch of count records starting at
// seq; Kafka sequences wrap from MaxInt32 to 0.
func NextSeq(seq int32, count int) int32 {
	return int32((int64(seq) + int64(count)) % (1 << 31))
}

func (r *Reader) i16() int16 {
	v := r.Varint()
	if v < -1<<15 || v > 1<<15-1 {
		r.fail("i16 out of range")
		return 0
	}
	return int16(v)
}

func (r *Reader) i32() int32 {
	v := r.Varint()
	if v < -1<<31 || v > 1<<31-1 {
		r.fail("i32 out of range")
		return 0
	}
	return int32(v)
}
