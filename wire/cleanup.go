package wire

// Removing idle empty partitions (docs/placement.md, "Removing idle
// partitions"). The group holding a partition removes it first, in a tick,
// and keeps its index as gone for ever; the queue's home then drops the
// directory entry, told by the shard's leader (DropDirCmd) or by an engine
// whose push a shard refused with CodePartitionGone (AllocCmd.Gone).

// Kinds of the cleanup commands.
const (
	KindDropDir     Kind = 18 // DropDirCmd (home): drop directory entries of removed partitions
	KindForgetDrops Kind = 19 // DropDirCmd (the shard): the home dropped them, stop telling it
)

// MaxDropDir bounds the indexes one DropDirCmd names.
const MaxDropDir = 4096

// TickCmd is a tick's body: the leader's settings for the time-driven work
// whose outcome depends on them, so every replica sweeps alike whatever its
// own configuration says. An empty body (every tick before there was one)
// is the zero TickCmd.
type TickCmd struct {
	// PartitionCleanupMs removes partitions empty and idle that long; 0
	// removes none.
	PartitionCleanupMs int64
	// TraceRetentionMs removes trace events older than that. An optional
	// tail: a tick without it (older builds proposed none) keeps the
	// default retention, so every replica sweeps alike whatever its own
	// QUEEN_RAFT_TRACE_RETENTION_S says.
	TraceRetentionMs int64
}

// Encode appends the command body.
func (c *TickCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Varint(c.PartitionCleanupMs)
	if c.TraceRetentionMs > 0 {
		w.Varint(c.TraceRetentionMs)
	}
	return w.B
}

// DecodeTickCmd decodes a tick body; an empty one is the zero TickCmd.
func DecodeTickCmd(b []byte) (TickCmd, error) {
	var c TickCmd
	if len(b) == 0 {
		return c, nil
	}
	r := Reader{b: b}
	c.PartitionCleanupMs = r.Varint()
	if c.PartitionCleanupMs < 0 {
		r.fail("negative cleanup age")
	}
	if r.Len() > 0 {
		if c.TraceRetentionMs = r.Varint(); c.TraceRetentionMs <= 0 {
			r.fail("trace retention not positive")
		}
	}
	return c, r.Done()
}

// DropDirCmd names removed partitions of one incarnation of a queue by
// index, all placed in Group: at the home it drops their directory entries
// (KindDropDir), in that group it records that the home has (KindForgetDrops).
type DropDirCmd struct {
	Tenant  ID
	Queue   string
	Inc     uint64
	Group   uint16
	Indexes []uint32
}

// Encode appends the command body.
func (c *DropDirCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	w.Uvarint(c.Inc)
	w.Uvarint(uint64(c.Group))
	w.Uvarint(uint64(len(c.Indexes)))
	for _, i := range c.Indexes {
		w.Uvarint(uint64(i))
	}
	return w.B
}

// DecodeDropDirCmd decodes a drop-dir body.
func DecodeDropDirCmd(b []byte) (DropDirCmd, error) {
	r := Reader{b: b}
	var c DropDirCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Inc = r.Uvarint()
	g := r.Uvarint()
	if g >= MaxGroups {
		r.fail("group out of range")
	}
	c.Group = uint16(g)
	n := r.Count(MaxDropDir, 1)
	if n > 0 {
		c.Indexes = make([]uint32, n)
		for i := range c.Indexes {
			c.Indexes[i] = r.u32()
		}
	}
	return c, r.Done()
}
