package wire

// The standby's follow commands (KindLinkApply, KindLinkPromote; link.go).
// A standby group's leader reads the source group's committed entries and
// proposes them, in index order, into its own log as LinkApply commands:
// every standby replica then applies the same source entries at the same
// point of its own log.

// MaxLinkEntries bounds the entries one LinkApply may carry, so a forged
// count cannot make a decoder allocate more than its input justifies (the
// follower sends at most a few MiB per proposal, far fewer entries).
const MaxLinkEntries = 1 << 20

// LinkEntry is one committed entry of the source group.
type LinkEntry struct {
	// StampMs is the source entry's clock stamp (0 when it has none):
	// what the standby's lag in milliseconds is measured from.
	StampMs uint64
	// Skip marks an entry the source's state machine never saw as a
	// command (a membership change, an empty entry a new leader appends):
	// carried only so the source indexes stay contiguous.
	Skip bool
	// Payload is the entry's command bytes exactly as the source's Update
	// received them (a wire entry, AppendEntry's form).
	Payload []byte
}

// LinkApplyCmd is a run of source entries, FirstSourceIndex through
// LastSourceIndex, one per index. It applies only when FirstSourceIndex is
// one past the last source index the group applied: a run proposed twice
// (a leader change between proposing and hearing back) or out of turn is
// ignored, so no source entry is applied twice or skipped.
type LinkApplyCmd struct {
	// Source names the source cluster (QUEEN_STANDBY_OF as given), kept
	// in the group's link state for /health after a restart.
	Source           string
	FirstSourceIndex uint64
	LastSourceIndex  uint64
	Entries          []LinkEntry
}

// Encode appends the command body.
func (c *LinkApplyCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.String(c.Source)
	w.Uvarint(c.FirstSourceIndex)
	w.Uvarint(c.LastSourceIndex)
	w.Uvarint(uint64(len(c.Entries)))
	for i := range c.Entries {
		e := &c.Entries[i]
		w.Uvarint(e.StampMs)
		w.Bool(e.Skip)
		w.Bytes(e.Payload)
	}
	return w.B
}

// EncodedLinkEntrySize is about what e adds to an encoded LinkApplyCmd,
// for a proposer that bounds its proposals.
func EncodedLinkEntrySize(e *LinkEntry) int { return len(e.Payload) + 24 }

// DecodeLinkApplyCmd decodes a link-apply body. The entries' payloads
// alias b. It refuses a run whose index span does not match its entries:
// each source index carries exactly one entry.
func DecodeLinkApplyCmd(b []byte) (LinkApplyCmd, error) {
	r := Reader{b: b}
	c := LinkApplyCmd{Source: r.String(), FirstSourceIndex: r.Uvarint(), LastSourceIndex: r.Uvarint()}
	n := r.Count(MaxLinkEntries, 3)
	if r.err == nil {
		switch {
		case n == 0:
			r.fail("link apply without entries")
		case c.FirstSourceIndex == 0:
			r.fail("link apply from source index 0")
		case c.LastSourceIndex < c.FirstSourceIndex || c.LastSourceIndex-c.FirstSourceIndex != uint64(n-1):
			r.fail("link apply index span does not match its entries")
		}
	}
	if r.err != nil {
		return c, r.err
	}
	c.Entries = make([]LinkEntry, n)
	for i := range c.Entries {
		e := &c.Entries[i]
		e.StampMs = r.Uvarint()
		e.Skip = r.Bool()
		e.Payload = r.Bytes()
	}
	return c, r.Done()
}

// LinkPromoteCmd ends following in one group: from it on the group is a
// writable group of its own, at the last source entry it applied.
type LinkPromoteCmd struct{}

// Encode appends the command body (none).
func (c *LinkPromoteCmd) Encode(b []byte) []byte { return b }

// DecodeLinkPromoteCmd decodes a promote body, which is empty.
func DecodeLinkPromoteCmd(b []byte) (LinkPromoteCmd, error) {
	r := Reader{b: b}
	return LinkPromoteCmd{}, r.Done()
}
