package wire

// MaxCleanRanges bounds the offset ranges of one LogCleanCmd.
const MaxCleanRanges = 1 << 16

// OffsetRange is the offsets [From, To).
type OffsetRange struct {
	From, To uint64
}

// LogCleanCmd cleans one partition of a Kafka topic as the leader of its
// raft group decided from its committed records (its retention.bytes and
// cleanup.policy=compact): every replica applies the same decision, so
// they all keep the same records. StartAt moves the log start up to it,
// dropping the chunks wholly below (0: no move). Drop lists the ranges of
// offsets compaction removes, sorted and disjoint; the offsets of the
// records kept do not change.
type LogCleanCmd struct {
	Tenant      ID
	PartitionID uint64
	StartAt     uint64
	Drop        []OffsetRange
}

// Encode appends the command body.
func (c *LogCleanCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.Uvarint(c.PartitionID)
	w.Uvarint(c.StartAt)
	w.Uvarint(uint64(len(c.Drop)))
	for _, r := range c.Drop {
		w.Uvarint(r.From)
		w.Uvarint(r.To - r.From)
	}
	return w.B
}

// DecodeLogCleanCmd decodes a log-clean body; ranges out of order,
// overlapping or empty are refused.
func DecodeLogCleanCmd(b []byte) (LogCleanCmd, error) {
	r := Reader{b: b}
	var c LogCleanCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.PartitionID = r.Uvarint()
	c.StartAt = r.Uvarint()
	n := r.Count(MaxCleanRanges, 2)
	c.Drop = make([]OffsetRange, n)
	for i := range c.Drop {
		from, span := r.Uvarint(), r.Uvarint()
		switch {
		case span == 0 || from+span < from:
			r.fail("empty or overflowing range")
		case i > 0 && from < c.Drop[i-1].To:
			r.fail("ranges out of order")
		}
		c.Drop[i] = OffsetRange{From: from, To: from + span}
	}
	return c, r.Done()
}
