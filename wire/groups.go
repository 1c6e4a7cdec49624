package wire

// Consumer-group administration commands: seek, delete, subscription
// change. A seek of a whole queue and a group delete visit every partition
// of their queues, so they go in steps (Steps): each entry visits at most
// Limit partitions and answers where the next one starts.

// GroupStepLimit is the most partitions a seek or group delete visits in
// one apply: one apply writes at most that many cursors, and a queue of
// millions of partitions neither holds its raft group for seconds nor
// builds a batch of every cursor.
const GroupStepLimit = 8192

// Steps bounds one entry of a stepped command: it visits at most Limit
// partitions, from the partition at index Index of the queue with id Queue
// (ids and indexes as the raft group holding them numbers them). Limit 0 is
// the whole walk in one entry, as entries written before steps existed.
// Since is the group's clock at the walk's first step, carried from step
// to step (the first sets it): a group delete leaves positions written
// after it, by a group that re-formed while the walk went on. An optional
// last field, written when set.
type Steps struct {
	Limit uint32
	Queue uint64
	Index uint32
	Since int64
}

// encode appends the steps as an optional tail: nothing when Limit is 0.
func (s Steps) encode(w *Writer) {
	if s.Limit == 0 {
		return
	}
	w.Uvarint(uint64(s.Limit))
	w.Uvarint(s.Queue)
	w.Uvarint(uint64(s.Index))
	if s.Since > 0 {
		w.Varint(s.Since)
	}
}

// decodeSteps reads the optional tail encode wrote.
func decodeSteps(r *Reader) Steps {
	if r.Len() == 0 {
		return Steps{}
	}
	s := Steps{Limit: uint32(r.Uvarint()), Queue: r.Uvarint(), Index: uint32(r.Uvarint())}
	if r.Len() > 0 {
		if s.Since = r.Varint(); s.Since <= 0 {
			r.fail("steps: a walk's start not positive")
		}
	}
	return s
}

// SeekCmd moves a group's cursors on a queue (one partition when
// Partition is set) to the end of each partition (ToEnd) or to the first
// message appended at or after TimestampMs. The group's leases there are
// dropped: a seek says where consumption stands now.
type SeekCmd struct {
	Tenant      ID
	Queue       string
	Group       string
	Partition   string
	ToEnd       bool
	TimestampMs int64
	Steps       Steps
}

// Encode appends the command body.
func (c *SeekCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	w.String(c.Group)
	w.String(c.Partition)
	w.Bool(c.ToEnd)
	w.Varint(c.TimestampMs)
	c.Steps.encode(&w)
	return w.B
}

// EncodeStep encodes the command as the step s of its walk.
func (c SeekCmd) EncodeStep(s Steps) []byte {
	c.Steps = s
	return c.Encode(nil)
}

// DecodeSeekCmd decodes a seek body.
func DecodeSeekCmd(b []byte) (SeekCmd, error) {
	r := Reader{b: b}
	var c SeekCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Group = r.String()
	c.Partition = r.String()
	c.ToEnd = r.Bool()
	c.TimestampMs = r.Varint()
	c.Steps = decodeSteps(&r)
	return c, r.Done()
}

// DeleteGroupCmd removes a group's cursors and leases on one queue, or on
// every queue of the tenant when Queue is empty. With DeleteMetadata the
// group's subscriptions go too, so its next pop subscribes afresh.
type DeleteGroupCmd struct {
	Tenant         ID
	Group          string
	Queue          string
	DeleteMetadata bool
	Steps          Steps
}

// Encode appends the command body.
func (c *DeleteGroupCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Group)
	w.String(c.Queue)
	w.Bool(c.DeleteMetadata)
	c.Steps.encode(&w)
	return w.B
}

// EncodeStep encodes the command as the step s of its walk.
func (c DeleteGroupCmd) EncodeStep(s Steps) []byte {
	c.Steps = s
	return c.Encode(nil)
}

// DecodeDeleteGroupCmd decodes a delete-group body.
func DecodeDeleteGroupCmd(b []byte) (DeleteGroupCmd, error) {
	r := Reader{b: b}
	var c DeleteGroupCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Group = r.String()
	c.Queue = r.String()
	c.DeleteMetadata = r.Bool()
	c.Steps = decodeSteps(&r)
	return c, r.Done()
}

// SubscriptionCmd makes every subscription of a group start the
// partitions it has not touched yet at FromMs.
type SubscriptionCmd struct {
	Tenant ID
	Group  string
	FromMs int64
}

// Encode appends the command body.
func (c *SubscriptionCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Group)
	w.Varint(c.FromMs)
	return w.B
}

// DecodeSubscriptionCmd decodes a subscription body.
func DecodeSubscriptionCmd(b []byte) (SubscriptionCmd, error) {
	r := Reader{b: b}
	var c SubscriptionCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Group = r.String()
	c.FromMs = r.Varint()
	return c, r.Done()
}

// CountResult answers commands that report how many things they changed;
// More says the command stopped at its budget and should be sent again,
// for a stepped command with Next as its Steps.
type CountResult struct {
	Code Code
	N    uint64
	More bool
	Next Steps
}

// Encode appends the result.
func (c CountResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(c.Code))
	w.Uvarint(c.N)
	w.Bool(c.More)
	c.Next.encode(&w)
	return w.B
}

// DecodeCountResult decodes a count result.
func DecodeCountResult(b []byte) (CountResult, error) {
	r := Reader{b: b}
	c := CountResult{Code: Code(r.U8()), N: r.Uvarint(), More: r.Bool()}
	c.Next = decodeSteps(&r)
	return c, r.Done()
}
