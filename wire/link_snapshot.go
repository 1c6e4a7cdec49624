package wire

// A standby installs a source group's snapshot (when the source compacted
// the entries it needs next) through its own log: the snapshot's stream in
// KindLinkSnapshotChunk pieces, then one KindLinkSnapshotDone that
// replaces the group's state with the staged stream on every replica at
// the same point of the log. Chunks are staged in the store itself, so a
// replica brought up by a raft snapshot or a restart mid-install stages
// the same bytes as its peers.

// MaxLinkSnapshotChunk bounds one chunk's data: a proposal of its size
// never holds the standby's log up.
const MaxLinkSnapshotChunk = 2 << 20

// LinkSnapshotChunkCmd is piece Seq (from 0) of install ID's stream. A
// chunk with Seq 0 starts the install (dropping any other one staged); a
// later one applies only when it is the next piece of the staged install.
type LinkSnapshotChunkCmd struct {
	ID   uint64 // the install, chosen at random by the proposer (never 0)
	Seq  uint64
	Data []byte
}

// Encode appends the command body.
func (c *LinkSnapshotChunkCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U64(c.ID)
	w.Uvarint(c.Seq)
	w.Bytes(c.Data)
	return w.B
}

// DecodeLinkSnapshotChunkCmd decodes a chunk body; Data aliases b.
func DecodeLinkSnapshotChunkCmd(b []byte) (LinkSnapshotChunkCmd, error) {
	r := Reader{b: b}
	c := LinkSnapshotChunkCmd{ID: r.U64(), Seq: r.Uvarint(), Data: r.Bytes()}
	if r.err == nil {
		switch {
		case c.ID == 0:
			r.fail("link snapshot install id 0")
		case len(c.Data) == 0 || len(c.Data) > MaxLinkSnapshotChunk:
			r.fail("link snapshot chunk empty or too large")
		}
	}
	return c, r.Done()
}

// LinkSnapshotDoneCmd ends install ID: when exactly Chunks pieces of Bytes
// bytes in all with checksum CRC (CRC-32C of the stream) are staged, the
// group's state becomes the stream's, taken at SourceIndex of the source
// named Source, and the group follows the source from there.
type LinkSnapshotDoneCmd struct {
	ID          uint64
	Chunks      uint64
	Bytes       uint64
	CRC         uint32
	SourceIndex uint64
	Source      string
}

// Encode appends the command body.
func (c *LinkSnapshotDoneCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U64(c.ID)
	w.Uvarint(c.Chunks)
	w.Uvarint(c.Bytes)
	w.Uvarint(uint64(c.CRC))
	w.Uvarint(c.SourceIndex)
	w.String(c.Source)
	return w.B
}

// DecodeLinkSnapshotDoneCmd decodes a done body.
func DecodeLinkSnapshotDoneCmd(b []byte) (LinkSnapshotDoneCmd, error) {
	r := Reader{b: b}
	c := LinkSnapshotDoneCmd{ID: r.U64(), Chunks: r.Uvarint(), Bytes: r.Uvarint()}
	crc := r.Uvarint()
	c.SourceIndex, c.Source = r.Uvarint(), r.String()
	if r.err == nil {
		switch {
		case c.ID == 0 || c.Chunks == 0:
			r.fail("link snapshot done without an install or chunks")
		case crc > 1<<32-1:
			r.fail("link snapshot checksum out of range")
		}
	}
	c.CRC = uint32(crc)
	return c, r.Done()
}
