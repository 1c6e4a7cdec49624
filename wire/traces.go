package wire

// MaxTraceNames bounds the names one trace event may carry.
const MaxTraceNames = 64

// TraceCmd records one trace event for a message (spec §2.10).
type TraceCmd struct {
	Tenant      ID
	PartitionID uint64
	TxnID       string
	Group       string
	EventType   string
	Data        []byte // JSON text
	Names       []string
}

// Encode appends the command body.
func (c *TraceCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.Uvarint(c.PartitionID)
	w.String(c.TxnID)
	w.String(c.Group)
	w.String(c.EventType)
	w.Bytes(c.Data)
	w.Uvarint(uint64(len(c.Names)))
	for _, n := range c.Names {
		w.String(n)
	}
	return w.B
}

// DecodeTraceCmd decodes a trace body.
func DecodeTraceCmd(b []byte) (TraceCmd, error) {
	r := Reader{b: b}
	var c TraceCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.PartitionID = r.Uvarint()
	c.TxnID = r.String()
	c.Group = r.String()
	c.EventType = r.String()
	c.Data = r.Bytes()
	c.Names = make([]string, r.Count(MaxTraceNames, 1))
	for i := range c.Names {
		c.Names[i] = r.String()
	}
	return c, r.Done()
}

// TraceResult answers a TraceCmd with the event's sequence number and time.
type TraceResult struct {
	Code      Code
	Seq       uint64
	CreatedMs int64
}

// Encode appends the result.
func (t TraceResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(t.Code))
	w.Uvarint(t.Seq)
	w.Varint(t.CreatedMs)
	return w.B
}

// DecodeTraceResult decodes a trace result.
func DecodeTraceResult(b []byte) (TraceResult, error) {
	r := Reader{b: b}
	t := TraceResult{Code: Code(r.U8()), Seq: r.Uvarint(), CreatedMs: r.Varint()}
	return t, r.Done()
}
