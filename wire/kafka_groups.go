package wire

// Kafka consumer-group commands. A committed Kafka offset is a Queen
// group's position (CommitPositionCmd); these commands cover what Kafka
// groups do to positions beyond committing them.

// MaxDeleteOffsets bounds the partitions one DeleteOffsetsCmd names.
const MaxDeleteOffsets = 1 << 16

// PartitionRef names one partition of a queue by its permanent index (a
// Kafka topic-partition).
type PartitionRef struct {
	Queue     string
	Partition uint32
}

// DeleteOffsetsCmd forgets a group's positions in the named partitions
// (Kafka OffsetDelete): the group then starts those partitions where its
// subscription says an untouched partition starts, and a Kafka client
// reads no committed offset there. Deleting a position that is not there
// is not an error, so a retried command changes nothing.
type DeleteOffsetsCmd struct {
	Tenant ID
	Group  string
	Items  []PartitionRef
}

// Encode appends the command body.
func (c *DeleteOffsetsCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Group)
	w.Uvarint(uint64(len(c.Items)))
	for _, it := range c.Items {
		w.String(it.Queue)
		w.Uvarint(uint64(it.Partition))
	}
	return w.B
}

// DecodeDeleteOffsetsCmd decodes a delete-offsets body.
func DecodeDeleteOffsetsCmd(b []byte) (DeleteOffsetsCmd, error) {
	r := Reader{b: b}
	var c DeleteOffsetsCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Group = r.String()
	n := r.Count(MaxDeleteOffsets, 2)
	c.Items = make([]PartitionRef, n)
	for i := range c.Items {
		c.Items[i].Queue = r.String()
		c.Items[i].Partition = r.u32()
	}
	return c, r.Done()
}

// CodesResult answers a command with one code per item, in item order.
type CodesResult struct {
	Code  Code
	Codes []Code
}

// Encode appends the result.
func (c CodesResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(c.Code))
	w.Uvarint(uint64(len(c.Codes)))
	for _, code := range c.Codes {
		w.U8(uint8(code))
	}
	return w.B
}

// DecodeCodesResult decodes a per-item code result.
func DecodeCodesResult(b []byte) (CodesResult, error) {
	r := Reader{b: b}
	c := CodesResult{Code: Code(r.U8())}
	n := r.Count(MaxDeleteOffsets, 1)
	c.Codes = make([]Code, n)
	for i := range c.Codes {
		c.Codes[i] = Code(r.U8())
	}
	return c, r.Done()
}

// GroupMembersCmd records a Kafka consumer group's membership as its
// coordinator last completed a rebalance, so the coordinator that follows
// a leadership change takes over the members at their generation instead
// of making them all rejoin. State is the coordinator's own encoding
// (kafka/broker/groups); an empty State forgets the group's membership.
// A command older than the one applied (a lower generation) changes
// nothing, so writes that overtake each other leave the newest.
type GroupMembersCmd struct {
	Tenant     ID
	Group      string
	Generation int32
	State      []byte
}

// Encode appends the command body.
func (c *GroupMembersCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Group)
	w.Varint(int64(c.Generation))
	w.Bytes(c.State)
	return w.B
}

// DecodeGroupMembersCmd decodes a group-members body.
func DecodeGroupMembersCmd(b []byte) (GroupMembersCmd, error) {
	r := Reader{b: b}
	var c GroupMembersCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Group = r.String()
	c.Generation = int32(r.Varint())
	c.State = append([]byte(nil), r.Bytes()...) // kept by the store: no alias into the entry
	return c, r.Done()
}
