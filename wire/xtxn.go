package wire

// Cross-group transactions (docs/placement.md): a transaction whose
// operations live in several raft groups commits by two-phase commit. Each
// participant but the coordinator prepares its part (checks it, pins what it
// touches, records it durably); the coordinator's decision entry applies its
// own part and records commit or abort, first writer wins; participants then
// resolve their part. A participant left prepared asks the coordinator for
// the decision, and records an abort there itself when there is none past
// the deadline, so every participant ends the same way.

// XPrepareCmd prepares a participant's part of transaction ID, coordinated
// by group Coord. Sub is the part: a TxnCmd (HTTP) or a TxnEndCmd holding
// one group's share of a Kafka commit.
type XPrepareCmd struct {
	ID         ID
	Coord      uint16
	DeadlineMs int64 // after this, a participant still prepared asks the coordinator
	Sub        Command
}

// Encode appends the command body.
func (c *XPrepareCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.ID[:])
	w.Uvarint(uint64(c.Coord))
	w.Varint(c.DeadlineMs)
	w.U8(uint8(c.Sub.Kind))
	w.Bytes(c.Sub.Body)
	return w.B
}

// DecodeXPrepareCmd decodes a prepare body. Sub.Body aliases b.
func DecodeXPrepareCmd(b []byte) (XPrepareCmd, error) {
	r := Reader{b: b}
	var c XPrepareCmd
	copy(c.ID[:], r.Fixed(16))
	c.Coord = uint16(r.u32())
	c.DeadlineMs = r.Varint()
	c.Sub.Kind = Kind(r.U8())
	c.Sub.Body = r.Bytes()
	return c, r.Done()
}

// XDecideCmd decides transaction ID at its coordinator. With Commit, the
// coordinator's own part (Own; Kind 0 when it has none) is checked and
// applied in the same entry, and the decision is commit only if it applies.
// A decision already recorded stands and is answered instead.
type XDecideCmd struct {
	ID           ID
	Commit       bool
	Participants []uint16 // every group but the coordinator
	Own          Command
}

// Encode appends the command body.
func (c *XDecideCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.ID[:])
	w.Bool(c.Commit)
	w.Uvarint(uint64(len(c.Participants)))
	for _, g := range c.Participants {
		w.Uvarint(uint64(g))
	}
	w.U8(uint8(c.Own.Kind))
	w.Bytes(c.Own.Body)
	return w.B
}

// DecodeXDecideCmd decodes a decide body. Own.Body aliases b.
func DecodeXDecideCmd(b []byte) (XDecideCmd, error) {
	r := Reader{b: b}
	var c XDecideCmd
	copy(c.ID[:], r.Fixed(16))
	c.Commit = r.Bool()
	n := r.Count(MaxGroups, 1)
	c.Participants = make([]uint16, n)
	for i := range c.Participants {
		c.Participants[i] = uint16(r.u32())
	}
	c.Own.Kind = Kind(r.U8())
	c.Own.Body = r.Bytes()
	return c, r.Done()
}

// XDecideResult answers a decide: the decision in force and, when this
// command's own part was applied (or refused), its result.
type XDecideResult struct {
	Code   Code
	Commit bool
	Own    []byte
}

// Encode appends the result.
func (x XDecideResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(x.Code))
	w.Bool(x.Commit)
	w.Bytes(x.Own)
	return w.B
}

// DecodeXDecideResult decodes a decide result.
func DecodeXDecideResult(b []byte) (XDecideResult, error) {
	r := Reader{b: b}
	x := XDecideResult{Code: Code(r.U8()), Commit: r.Bool()}
	x.Own = r.Bytes()
	return x, r.Done()
}

// XResolveCmd ends a participant's prepared part of transaction ID as the
// coordinator decided. A part already resolved answers its first result.
type XResolveCmd struct {
	ID     ID
	Commit bool
}

// Encode appends the command body.
func (c *XResolveCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.ID[:])
	w.Bool(c.Commit)
	return w.B
}

// DecodeXResolveCmd decodes a resolve body.
func DecodeXResolveCmd(b []byte) (XResolveCmd, error) {
	r := Reader{b: b}
	var c XResolveCmd
	copy(c.ID[:], r.Fixed(16))
	c.Commit = r.Bool()
	return c, r.Done()
}

// XResolveResult answers a prepare or a resolve: Code OK when the part is
// prepared (or committed), and the part's result (its check's refusal, or
// its operations' results once committed).
type XResolveResult struct {
	Code Code
	Sub  []byte
}

// Encode appends the result.
func (x XResolveResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(x.Code))
	w.Bytes(x.Sub)
	return w.B
}

// DecodeXResolveResult decodes a prepare or resolve result.
func DecodeXResolveResult(b []byte) (XResolveResult, error) {
	r := Reader{b: b}
	x := XResolveResult{Code: Code(r.U8())}
	x.Sub = r.Bytes()
	return x, r.Done()
}

// XForgetCmd drops decisions every participant has resolved.
type XForgetCmd struct {
	IDs []ID
}

// Encode appends the command body.
func (c *XForgetCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Uvarint(uint64(len(c.IDs)))
	for _, id := range c.IDs {
		w.Fixed(id[:])
	}
	return w.B
}

// DecodeXForgetCmd decodes a forget body.
func DecodeXForgetCmd(b []byte) (XForgetCmd, error) {
	r := Reader{b: b}
	var c XForgetCmd
	n := r.Count(1<<16, 16)
	c.IDs = make([]ID, n)
	for i := range c.IDs {
		copy(c.IDs[i][:], r.Fixed(16))
	}
	return c, r.Done()
}
