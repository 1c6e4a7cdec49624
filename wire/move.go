package wire

// Moving a partition from one raft group to another (docs/placement.md,
// "Moving a partition"). Every kind here is written only at FormatV9 or
// later: a build before it never meets them.
const (
	// KindMoveRecord (home): a move's replicated record, its steps and the
	// directory switch (MoveRecordCmd).
	KindMoveRecord Kind = 80
	// KindMoveCopy (target): a bounded piece of the source's log and
	// state, into the hidden incoming partition (MoveCopyCmd).
	KindMoveCopy Kind = 81
	// KindMoveSeal (source): the partition stops taking writes, or takes
	// them again (MoveSealCmd).
	KindMoveSeal Kind = 82
	// KindMoveFinish (target): the incoming partition becomes the live
	// one (MoveFinishCmd).
	KindMoveFinish Kind = 83
	// KindMoveDrop drops what a move leaves: the source's sealed partition
	// after the switch, or the target's incoming one after a cancel.
	KindMoveDrop Kind = 84
)

// Move states, as the home records them.
const (
	MoveCopying  uint8 = 1 // the target receives the source's log while it takes writes
	MoveSealed   uint8 = 2 // the source takes no writes; the tail and state are copied
	MoveSwitched uint8 = 3 // the directory names the target; the source's copy is dropped next
	MoveDone     uint8 = 4
	MoveFailed   uint8 = 5 // Reason says why; the source took writes again
)

// MoveStateName names a move state for views.
func MoveStateName(s uint8) string {
	switch s {
	case MoveCopying:
		return "copying"
	case MoveSealed:
		return "sealed"
	case MoveSwitched:
		return "switched"
	case MoveDone:
		return "done"
	case MoveFailed:
		return "failed"
	}
	return "unknown"
}

// Operations of a MoveRecordCmd.
const (
	MoveOpStart    uint8 = 1 // record a move (CodeExists while another of the partition is active)
	MoveOpProgress uint8 = 2 // record a step: State, Copied, End
	MoveOpSwitch   uint8 = 3 // point the directory entry at To; State becomes switched
	MoveOpDone     uint8 = 4
	MoveOpFail     uint8 = 5 // Reason
	MoveOpCancel   uint8 = 6 // ask the mover to cancel (only while copying)
	MoveOpForget   uint8 = 7 // drop a finished record
)

// MoveMaxChunkBytes bounds the records one MoveCopyCmd carries.
const MoveMaxChunkBytes = 2 << 20

// MoveInfo is one move as its home records it.
type MoveInfo struct {
	Tenant    ID
	Queue     string
	Index     uint32
	From, To  uint16
	State     uint8
	Cancel    bool   // a cancel was asked
	Copied    uint64 // offsets below it are in the target
	End       uint64 // the source's end when last seen (final once sealed)
	Reason    string // why it failed
	StartedMs int64
	UpdatedMs int64
	// EpochBase: the switch's new Kafka leader epoch base for the
	// partition (DirEntry.EpochBase), chosen by the mover so the epoch in
	// the target is above the source's.
	EpochBase uint32
}

func (m *MoveInfo) encode(w *Writer) {
	w.Fixed(m.Tenant[:])
	w.String(m.Queue)
	w.Uvarint(uint64(m.Index))
	w.Uvarint(uint64(m.From))
	w.Uvarint(uint64(m.To))
	w.U8(m.State)
	w.Bool(m.Cancel)
	w.Uvarint(m.Copied)
	w.Uvarint(m.End)
	w.String(m.Reason)
	w.Varint(m.StartedMs)
	w.Varint(m.UpdatedMs)
	w.Uvarint(uint64(m.EpochBase))
}

func decodeMoveInfo(r *Reader) MoveInfo {
	var m MoveInfo
	copy(m.Tenant[:], r.Fixed(16))
	m.Queue = r.String()
	m.Index = r.u32()
	m.From = r.u16g()
	m.To = r.u16g()
	m.State = r.U8()
	m.Cancel = r.Bool()
	m.Copied = r.Uvarint()
	m.End = r.Uvarint()
	m.Reason = r.String()
	m.StartedMs = r.Varint()
	m.UpdatedMs = r.Varint()
	m.EpochBase = r.u32()
	return m
}

// EncodeMoveInfo is a move record as stored.
func EncodeMoveInfo(m *MoveInfo) []byte {
	w := Writer{}
	m.encode(&w)
	return w.B
}

// DecodeMoveInfo decodes a stored move record.
func DecodeMoveInfo(b []byte) (MoveInfo, error) {
	r := Reader{b: b}
	m := decodeMoveInfo(&r)
	return m, r.Done()
}

// u16g reads a raft group number.
func (r *Reader) u16g() uint16 {
	g := r.Uvarint()
	if g >= MaxGroups {
		r.fail("group out of range")
	}
	return uint16(g)
}

// MoveRecordCmd changes a move's record at the queue's home. Inc names
// the queue's incarnation.
type MoveRecordCmd struct {
	Op   uint8
	Inc  uint64
	Move MoveInfo // Tenant, Queue, Index always; the rest as Op needs
}

// Encode appends the command body.
func (c *MoveRecordCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(c.Op)
	w.Uvarint(c.Inc)
	c.Move.encode(&w)
	return w.B
}

// DecodeMoveRecordCmd decodes a move record body.
func DecodeMoveRecordCmd(b []byte) (MoveRecordCmd, error) {
	r := Reader{b: b}
	c := MoveRecordCmd{Op: r.U8(), Inc: r.Uvarint()}
	c.Move = decodeMoveInfo(&r)
	if c.Op < MoveOpStart || c.Op > MoveOpForget {
		r.fail("unknown move operation")
	}
	return c, r.Done()
}

// MoveRecordResult answers a MoveRecordCmd with the record after it.
type MoveRecordResult struct {
	Code Code
	Move MoveInfo
}

// Encode appends the result.
func (c MoveRecordResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(c.Code))
	c.Move.encode(&w)
	return w.B
}

// DecodeMoveRecordResult decodes a move record result.
func DecodeMoveRecordResult(b []byte) (MoveRecordResult, error) {
	r := Reader{b: b}
	c := MoveRecordResult{Code: Code(r.U8())}
	c.Move = decodeMoveInfo(&r)
	return c, r.Done()
}

// MoveChunk is one chunk of a partition's log as stored: its base offset,
// append time, record count, whether it is a Kafka batch kept as produced,
// and its stored bytes.
type MoveChunk struct {
	Base     uint64
	AppendMs int64
	Count    uint32
	Kept     bool
	Data     []byte
}

// Kinds of the state keys a move carries, each kept under the partition's
// id in its group.
const (
	MoveKeyCursor   uint8 = 1 // suffix: consumer group name; value: its cursor
	MoveKeyTxnIndex uint8 = 2 // suffix: index kind and transaction id; value: offset, time
	MoveKeyProducer uint8 = 3 // suffix: producer id; value: its sequence state
	MoveKeySkip     uint8 = 4 // suffix: first offset; value: skipped range end
	MoveKeyAborted  uint8 = 5 // suffix: marker offset; value: aborted transaction
)

// MoveKey is one state key of a partition, without its partition id.
type MoveKey struct {
	Kind   uint8
	Suffix []byte
	Value  []byte
}

// MoveCopyCmd brings a piece of the source's partition into the target
// group's hidden incoming partition for (queue, Index): Chunks in offset
// order (those below what it holds already are skipped, so a repeat is
// harmless) and state Keys (written as they are). The first command creates
// the incoming partition at the first chunk's base, or at Start when it
// carries none.
type MoveCopyCmd struct {
	Tenant    ID
	Queue     string
	Inc       uint64
	Index     uint32
	Name      string
	CreatedMs int64
	Start     uint64
	Chunks    []MoveChunk
	Keys      []MoveKey
}

// Encode appends the command body.
func (c *MoveCopyCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	w.Uvarint(c.Inc)
	w.Uvarint(uint64(c.Index))
	w.String(c.Name)
	w.Varint(c.CreatedMs)
	w.Uvarint(c.Start)
	w.Uvarint(uint64(len(c.Chunks)))
	for i := range c.Chunks {
		ch := &c.Chunks[i]
		w.Uvarint(ch.Base)
		w.Varint(ch.AppendMs)
		w.Uvarint(uint64(ch.Count))
		w.Bool(ch.Kept)
		w.Bytes(ch.Data)
	}
	w.Uvarint(uint64(len(c.Keys)))
	for i := range c.Keys {
		k := &c.Keys[i]
		w.U8(k.Kind)
		w.Bytes(k.Suffix)
		w.Bytes(k.Value)
	}
	return w.B
}

// DecodeMoveCopyCmd decodes a move copy body.
func DecodeMoveCopyCmd(b []byte) (MoveCopyCmd, error) {
	r := Reader{b: b}
	var c MoveCopyCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Inc = r.Uvarint()
	c.Index = r.u32()
	c.Name = r.String()
	c.CreatedMs = r.Varint()
	c.Start = r.Uvarint()
	if n := r.Count(1<<20, 4); n > 0 {
		c.Chunks = make([]MoveChunk, n)
		for i := range c.Chunks {
			ch := &c.Chunks[i]
			ch.Base = r.Uvarint()
			ch.AppendMs = r.Varint()
			ch.Count = r.u32()
			ch.Kept = r.Bool()
			ch.Data = r.Bytes()
			if ch.Count == 0 {
				r.fail("empty chunk")
			}
		}
	}
	if n := r.Count(1<<20, 3); n > 0 {
		c.Keys = make([]MoveKey, n)
		for i := range c.Keys {
			k := &c.Keys[i]
			k.Kind = r.U8()
			k.Suffix = r.Bytes()
			k.Value = r.Bytes()
			if k.Kind < MoveKeyCursor || k.Kind > MoveKeyAborted {
				r.fail("unknown move key kind")
			}
		}
	}
	return c, r.Done()
}

// MoveCopyResult answers a copy: the incoming partition's id and the
// offset after what it holds.
type MoveCopyResult struct {
	Code Code
	PID  uint64
	Next uint64
}

// Encode appends the result.
func (c MoveCopyResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(c.Code))
	w.Uvarint(c.PID)
	w.Uvarint(c.Next)
	return w.B
}

// DecodeMoveCopyResult decodes a copy result.
func DecodeMoveCopyResult(b []byte) (MoveCopyResult, error) {
	r := Reader{b: b}
	c := MoveCopyResult{Code: Code(r.U8()), PID: r.Uvarint(), Next: r.Uvarint()}
	return c, r.Done()
}

// MoveSealCmd seals partition Index of a queue in its group (or, with
// Unseal, lets it take writes again after a failed or cancelled move).
type MoveSealCmd struct {
	Tenant ID
	Queue  string
	Inc    uint64
	Index  uint32
	Unseal bool
}

// Encode appends the command body.
func (c *MoveSealCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	w.Uvarint(c.Inc)
	w.Uvarint(uint64(c.Index))
	w.Bool(c.Unseal)
	return w.B
}

// DecodeMoveSealCmd decodes a seal body.
func DecodeMoveSealCmd(b []byte) (MoveSealCmd, error) {
	r := Reader{b: b}
	var c MoveSealCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Inc = r.Uvarint()
	c.Index = r.u32()
	c.Unseal = r.Bool()
	return c, r.Done()
}

// MoveSealResult is the sealed partition: its id (its state keys are read
// under it), log start, end and last write. CodeConflict: a Kafka
// transaction or a prepared cross-group transaction is open in it.
type MoveSealResult struct {
	Code        Code
	PID         uint64
	Start, Next uint64
	LastWriteMs int64
}

// Encode appends the result.
func (c MoveSealResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(c.Code))
	w.Uvarint(c.PID)
	w.Uvarint(c.Start)
	w.Uvarint(c.Next)
	w.Varint(c.LastWriteMs)
	return w.B
}

// DecodeMoveSealResult decodes a seal result.
func DecodeMoveSealResult(b []byte) (MoveSealResult, error) {
	r := Reader{b: b}
	c := MoveSealResult{Code: Code(r.U8()), PID: r.Uvarint(), Start: r.Uvarint(), Next: r.Uvarint(), LastWriteMs: r.Varint()}
	return c, r.Done()
}

// MoveFinishCmd makes the target's incoming partition (queue, Index) the
// group's live partition at that index, with the sealed source's log
// start, end and last write: CodeConflict when it does not hold the
// source's log up to Next yet.
type MoveFinishCmd struct {
	Tenant      ID
	Queue       string
	Inc         uint64
	Index       uint32
	Start, Next uint64
	LastWriteMs int64
}

// Encode appends the command body.
func (c *MoveFinishCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	w.Uvarint(c.Inc)
	w.Uvarint(uint64(c.Index))
	w.Uvarint(c.Start)
	w.Uvarint(c.Next)
	w.Varint(c.LastWriteMs)
	return w.B
}

// DecodeMoveFinishCmd decodes a finish body.
func DecodeMoveFinishCmd(b []byte) (MoveFinishCmd, error) {
	r := Reader{b: b}
	var c MoveFinishCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Inc = r.Uvarint()
	c.Index = r.u32()
	c.Start = r.Uvarint()
	c.Next = r.Uvarint()
	c.LastWriteMs = r.Varint()
	return c, r.Done()
}

// MoveDropCmd drops what a move leaves behind in a group: the incoming
// partition (Incoming: a cancelled or failed move, in the target) or the
// sealed one (the source, after the switch).
type MoveDropCmd struct {
	Tenant   ID
	Queue    string
	Index    uint32
	Incoming bool
}

// Encode appends the command body.
func (c *MoveDropCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	w.Uvarint(uint64(c.Index))
	w.Bool(c.Incoming)
	return w.B
}

// DecodeMoveDropCmd decodes a drop body.
func DecodeMoveDropCmd(b []byte) (MoveDropCmd, error) {
	r := Reader{b: b}
	var c MoveDropCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Index = r.u32()
	c.Incoming = r.Bool()
	return c, r.Done()
}
