package wire

// KindRelocateChunks moves the live chunks of a chunk-sequence range to
// new sequences (storage/relocate.go). Numbered in the administration
// range: it changes where records are kept, never what they are.
const KindRelocateChunks Kind = 26

// RelocateChunksCmd relocates the live chunks with sequences in
// [From, To), stopping once MaxBytes of records have moved; the result's
// Next says where a following command resumes. The leader sends it for a
// range its own segments show mostly dead; every replica moves the same
// chunks, since which chunks are live is replicated state.
type RelocateChunksCmd struct {
	From, To uint64
	MaxBytes uint64
}

// Encode appends the command body.
func (c *RelocateChunksCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Uvarint(c.From)
	w.Uvarint(c.To)
	w.Uvarint(c.MaxBytes)
	return w.B
}

// DecodeRelocateChunksCmd decodes a relocation body.
func DecodeRelocateChunksCmd(b []byte) (RelocateChunksCmd, error) {
	r := Reader{b: b}
	c := RelocateChunksCmd{From: r.Uvarint(), To: r.Uvarint(), MaxBytes: r.Uvarint()}
	return c, r.Done()
}

// RelocateChunksResult answers a relocation: Moved chunks went to new
// sequences; Next is where the range's remainder starts (To when done).
type RelocateChunksResult struct {
	Code  Code
	Moved uint64
	Next  uint64
}

// Encode appends the result.
func (c RelocateChunksResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(c.Code))
	w.Uvarint(c.Moved)
	w.Uvarint(c.Next)
	return w.B
}

// DecodeRelocateChunksResult decodes a relocation result.
func DecodeRelocateChunksResult(b []byte) (RelocateChunksResult, error) {
	r := Reader{b: b}
	c := RelocateChunksResult{Code: Code(r.U8()), Moved: r.Uvarint(), Next: r.Uvarint()}
	return c, r.Done()
}
