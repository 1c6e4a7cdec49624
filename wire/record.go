package wire

// Record flags say which optional fields a stored record carries.
const (
	FlagJSON      uint64 = 1 << 0 // payload is JSON text (pushed over HTTP)
	FlagKey       uint64 = 1 << 1 // a Kafka key is present (absent means null)
	FlagHeaders   uint64 = 1 << 2 // Kafka headers are present
	FlagTimestamp uint64 = 1 << 3 // the producer's own timestamp is present
	FlagNullValue uint64 = 1 << 4 // a Kafka null value (tombstone)
	FlagTrace     uint64 = 1 << 5 // a trace id is present
	FlagSub       uint64 = 1 << 6 // the producer's JWT subject is present
	FlagTxnID     uint64 = 1 << 7 // an explicit transaction id (else the message id)
	FlagEncrypted uint64 = 1 << 8 // payload is an encryption envelope
	// FlagSealed (always with FlagEncrypted): the record's key, headers,
	// producer timestamp, trace id, producer subject and payload are sealed
	// together, the payload being the envelope of their encoding
	// (AppendSealedFields). Without it, FlagEncrypted seals only the
	// payload (records written before every field was sealed).
	FlagSealed uint64 = 1 << 9
)

// sealedOuter are the flags a sealed record keeps in clear: what the state
// machine needs (the transaction id, for dedup and acks) and the marks.
const sealedOuter = FlagTxnID | FlagEncrypted | FlagSealed

// Header is one Kafka record header. A nil Value is a null header value.
type Header struct {
	Key   string
	Value []byte
}

// Record is one stored message. Byte slices returned by ParseRecord alias the
// stored bytes: copy what must outlive them.
type Record struct {
	Flags       uint64
	MsgID       ID
	TxnID       []byte // only with FlagTxnID
	Key         []byte // only with FlagKey
	Headers     []Header
	Timestamp   int64 // producer timestamp (unix ms), only with FlagTimestamp
	TraceID     []byte
	ProducerSub []byte
	Payload     []byte
}

// Limits that keep a forged record from asking for unbounded memory.
const (
	MaxHeaders     = 1 << 14
	MaxRecordBytes = 1 << 30
)

// AppendRecord appends r, length-prefixed, as it is stored and as it travels
// inside a push command: the state machine copies these bytes verbatim into
// the partition log. The length is computed first, so the record is written
// once, in place (payloads are most of the bytes a broker moves).
func AppendRecord(b []byte, r *Record) []byte {
	w := Writer{B: b}
	n := uvarintLen(r.Flags) + len(r.MsgID) + fieldsLen(r)
	if r.Flags&FlagTxnID != 0 {
		n += uvarintLen(uint64(len(r.TxnID))) + len(r.TxnID)
	}
	w.Uvarint(uint64(n))
	w.Uvarint(r.Flags)
	w.Fixed(r.MsgID[:])
	if r.Flags&FlagTxnID != 0 {
		w.Bytes(r.TxnID)
	}
	appendFields(&w, r)
	return w.B
}

// AppendSealedFields appends what a sealed record seals: r's flags (but
// the clear ones) and every field after the transaction id, as
// AppendRecord lays them out. ParseSealedFields reads it back.
func AppendSealedFields(b []byte, r *Record) []byte {
	w := Writer{B: b}
	w.Uvarint(r.Flags &^ sealedOuter)
	appendFields(&w, r)
	return w.B
}

// SealedFieldsLen is the length AppendSealedFields appends for r.
func SealedFieldsLen(r *Record) int { return uvarintLen(r.Flags&^sealedOuter) + fieldsLen(r) }

// appendFields writes the optional fields the flags name, then the payload.
func appendFields(w *Writer, r *Record) {
	if r.Flags&FlagKey != 0 {
		w.Bytes(r.Key)
	}
	if r.Flags&FlagHeaders != 0 {
		w.Uvarint(uint64(len(r.Headers)))
		for _, h := range r.Headers {
			w.String(h.Key)
			if h.Value == nil {
				w.Uvarint(0)
			} else {
				w.Uvarint(uint64(len(h.Value)) + 1)
				w.Fixed(h.Value)
			}
		}
	}
	if r.Flags&FlagTimestamp != 0 {
		w.Varint(r.Timestamp)
	}
	if r.Flags&FlagTrace != 0 {
		w.Bytes(r.TraceID)
	}
	if r.Flags&FlagSub != 0 {
		w.Bytes(r.ProducerSub)
	}
	w.Bytes(r.Payload)
}

// fieldsLen is the size appendFields writes for r.
func fieldsLen(r *Record) int {
	bytesLen := func(b []byte) int { return uvarintLen(uint64(len(b))) + len(b) }
	n := 0
	if r.Flags&FlagKey != 0 {
		n += bytesLen(r.Key)
	}
	if r.Flags&FlagHeaders != 0 {
		n += uvarintLen(uint64(len(r.Headers)))
		for _, h := range r.Headers {
			n += uvarintLen(uint64(len(h.Key))) + len(h.Key)
			if h.Value == nil {
				n++
			} else {
				n += uvarintLen(uint64(len(h.Value))+1) + len(h.Value)
			}
		}
	}
	if r.Flags&FlagTimestamp != 0 {
		n += uvarintLen(uint64(r.Timestamp<<1) ^ uint64(r.Timestamp>>63))
	}
	if r.Flags&FlagTrace != 0 {
		n += bytesLen(r.TraceID)
	}
	if r.Flags&FlagSub != 0 {
		n += bytesLen(r.ProducerSub)
	}
	return n + bytesLen(r.Payload)
}

// ParseRecord decodes one record body (without its length prefix).
func ParseRecord(b []byte) (Record, error) {
	r := Reader{b: b}
	var rec Record
	rec.Flags = r.Uvarint()
	copy(rec.MsgID[:], r.Fixed(16))
	if rec.Flags&FlagTxnID != 0 {
		rec.TxnID = r.Bytes()
	}
	if err := parseFields(&r, &rec); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// ParseSealedFields decodes what AppendSealedFields wrote into rec, which
// holds a sealed record: its fields and flags become the plaintext
// record's, keeping its message and transaction ids. Byte slices alias b.
// On error rec is left as it was.
func ParseSealedFields(b []byte, rec *Record) error {
	r := Reader{b: b}
	inner := *rec
	inner.Flags = r.Uvarint()&^sealedOuter | rec.Flags&FlagTxnID
	if err := parseFields(&r, &inner); err != nil {
		return err
	}
	*rec = inner
	return nil
}

// parseFields reads the optional fields rec.Flags names, then the payload,
// and checks nothing follows.
func parseFields(r *Reader, rec *Record) error {
	rec.Key, rec.Headers, rec.Timestamp, rec.TraceID, rec.ProducerSub = nil, nil, 0, nil, nil
	if rec.Flags&FlagKey != 0 {
		rec.Key = r.Bytes()
		if rec.Key == nil {
			rec.Key = []byte{}
		}
	}
	if rec.Flags&FlagHeaders != 0 {
		n := r.Count(MaxHeaders, 2)
		rec.Headers = make([]Header, n)
		for i := range rec.Headers {
			rec.Headers[i].Key = r.String()
			switch vl := r.Uvarint(); {
			case vl == 0:
			case vl-1 > uint64(r.Len()):
				r.fail("header value past end")
			default:
				rec.Headers[i].Value = r.Fixed(int(vl - 1))
			}
		}
	}
	if rec.Flags&FlagTimestamp != 0 {
		rec.Timestamp = r.Varint()
	}
	if rec.Flags&FlagTrace != 0 {
		rec.TraceID = r.Bytes()
	}
	if rec.Flags&FlagSub != 0 {
		rec.ProducerSub = r.Bytes()
	}
	rec.Payload = r.Bytes()
	return r.Done()
}

// RecordHead is the part of a record the state machine needs to apply a
// push: who it is, without decoding the payload.
type RecordHead struct {
	Flags uint64
	MsgID ID
	TxnID []byte
}

// ParseRecordHead decodes only the flags, message id and transaction id.
func ParseRecordHead(b []byte) (RecordHead, error) {
	r := Reader{b: b}
	var h RecordHead
	h.Flags = r.Uvarint()
	copy(h.MsgID[:], r.Fixed(16))
	if h.Flags&FlagTxnID != 0 {
		h.TxnID = r.Bytes()
	}
	return h, r.err
}

// TxnKey is the transaction id a record is addressed by: the explicit one, or
// the 16 raw bytes of its message id. The two never collide in an index
// because explicit ids are stored with a different tag (see storage).
func (h RecordHead) TxnKey() (explicit bool, key []byte) {
	if h.Flags&FlagTxnID != 0 {
		return true, h.TxnID
	}
	return false, h.MsgID[:]
}

// RecordIter walks a run of length-prefixed records without copying.
type RecordIter struct {
	r Reader
}

// NewRecordIter iterates over the concatenated length-prefixed records in b.
func NewRecordIter(b []byte) RecordIter { return RecordIter{r: Reader{b: b}} }

// Next returns the next record body (without its length prefix), and the
// whole framed record (with it).
func (it *RecordIter) Next() (body, framed []byte, ok bool) {
	if it.r.Len() == 0 || it.r.err != nil {
		return nil, nil, false
	}
	start := it.r.b
	body = it.r.Bytes()
	if it.r.err != nil {
		return nil, nil, false
	}
	framed = start[:len(start)-it.r.Len()]
	return body, framed, true
}

// Err reports a framing error met by Next.
func (it *RecordIter) Err() error { return it.r.err }
