package wire

// KV operations (spec queen.md §1.8, §2.12).
const (
	KVGet uint8 = iota + 1
	KVGetMany
	KVGetPrefix
	KVPut
	KVPutIfAbsent
	KVDelete
	KVIncr
	KVCheck
)

// KV limits of spec §1.8.
const (
	MaxKVKeyBytes     = 512
	MaxKVValueBytes   = 64 << 10
	MaxKVOpsPerCall   = 256
	MaxKVKeysPerCall  = 1024
	MaxKVPrefixResult = 1000
)

// KVOp is one KV operation. Value is JSON text (an HTTP client's value as
// sent). Optional numbers use a Has* flag so zero is a real value.
type KVOp struct {
	Op        uint8
	NS        string
	Key       []byte
	Keys      [][]byte // getMany
	Value     []byte
	HasExpect bool
	Expect    uint64 // compare-and-set on the key's version (0: must be absent)
	TTLSec    uint32 // 0: forever
	Delta     int64
	HasMin    bool
	Min       int64
	HasMax    bool
	Max       int64
	Limit     uint32 // getPrefix
	Required  bool   // a failure aborts the whole command
}

// KVCmd applies operations to one tenant's KV store, in order, as one unit:
// if an operation marked Required fails, nothing of the command is applied.
type KVCmd struct {
	Tenant ID
	Ops    []KVOp
}

// Encode appends the command body.
func (c *KVCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	encodeKVOps(&w, c.Ops)
	return w.B
}

func encodeKVOps(w *Writer, ops []KVOp) {
	w.Uvarint(uint64(len(ops)))
	for i := range ops {
		o := &ops[i]
		w.U8(o.Op)
		w.String(o.NS)
		w.Bytes(o.Key)
		w.Uvarint(uint64(len(o.Keys)))
		for _, k := range o.Keys {
			w.Bytes(k)
		}
		w.Bytes(o.Value)
		w.Bool(o.HasExpect)
		w.Uvarint(o.Expect)
		w.Uvarint(uint64(o.TTLSec))
		w.Varint(o.Delta)
		w.Bool(o.HasMin)
		w.Varint(o.Min)
		w.Bool(o.HasMax)
		w.Varint(o.Max)
		w.Uvarint(uint64(o.Limit))
		w.Bool(o.Required)
	}
}

func decodeKVOps(r *Reader) []KVOp {
	n := r.Count(MaxKVOpsPerCall*4, 8)
	ops := make([]KVOp, n)
	for i := range ops {
		o := &ops[i]
		o.Op = r.U8()
		o.NS = r.String()
		o.Key = r.Bytes()
		nk := r.Count(MaxKVKeysPerCall, 1)
		if nk > 0 {
			o.Keys = make([][]byte, nk)
			for j := range o.Keys {
				o.Keys[j] = r.Bytes()
			}
		}
		o.Value = r.Bytes()
		o.HasExpect = r.Bool()
		o.Expect = r.Uvarint()
		o.TTLSec = r.u32()
		o.Delta = r.Varint()
		o.HasMin = r.Bool()
		o.Min = r.Varint()
		o.HasMax = r.Bool()
		o.Max = r.Varint()
		o.Limit = r.u32()
		o.Required = r.Bool()
	}
	return ops
}

// DecodeKVCmd decodes a KV body.
func DecodeKVCmd(b []byte) (KVCmd, error) {
	r := Reader{b: b}
	var c KVCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Ops = decodeKVOps(&r)
	return c, r.Done()
}

// KVItem is one key's state in a result.
type KVItem struct {
	Key       []byte
	Value     []byte
	Version   uint64
	ExpiresMs int64
}

// KV reasons: why an operation did not apply.
const (
	KVReasonNone            = ""
	KVReasonVersionMismatch = "version_mismatch"
	KVReasonExists          = "exists"
	KVReasonNotFound        = "not_found"
	KVReasonNotANumber      = "not_a_number"
	KVReasonOutOfBounds     = "out_of_bounds"
	KVReasonAborted         = "aborted" // another required operation failed
	// KVReasonBusy: a cross-group transaction prepared on the key holds it
	// until it commits or aborts (milliseconds); retry.
	KVReasonBusy = "transaction_in_progress"
)

// KVOpResult answers one operation.
type KVOpResult struct {
	Applied bool
	Reason  string
	Found   bool
	Item    KVItem   // the key's state after the operation (get: as read)
	Items   []KVItem // getMany (absent keys have Version 0), getPrefix
}

// KVResult answers a KVCmd. When a required operation failed, OK is false,
// FailedIndex names it and nothing was applied.
type KVResult struct {
	Code        Code
	OK          bool
	FailedIndex int
	Ops         []KVOpResult
}

// Encode appends the result.
func (k KVResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(k.Code))
	w.Bool(k.OK)
	w.Varint(int64(k.FailedIndex))
	w.Uvarint(uint64(len(k.Ops)))
	for i := range k.Ops {
		o := &k.Ops[i]
		w.Bool(o.Applied)
		w.String(o.Reason)
		w.Bool(o.Found)
		encodeKVItem(&w, &o.Item)
		w.Uvarint(uint64(len(o.Items)))
		for j := range o.Items {
			encodeKVItem(&w, &o.Items[j])
		}
	}
	return w.B
}

func encodeKVItem(w *Writer, it *KVItem) {
	w.Bytes(it.Key)
	w.Bytes(it.Value)
	w.Uvarint(it.Version)
	w.Varint(it.ExpiresMs)
}

func decodeKVItem(r *Reader) KVItem {
	return KVItem{Key: r.Bytes(), Value: r.Bytes(), Version: r.Uvarint(), ExpiresMs: r.Varint()}
}

// DecodeKVResult decodes a KV result.
func DecodeKVResult(b []byte) (KVResult, error) {
	r := Reader{b: b}
	var k KVResult
	k.Code = Code(r.U8())
	k.OK = r.Bool()
	k.FailedIndex = int(r.Varint())
	n := r.Count(MaxKVOpsPerCall*4, 5)
	k.Ops = make([]KVOpResult, n)
	for i := range k.Ops {
		o := &k.Ops[i]
		o.Applied = r.Bool()
		o.Reason = r.String()
		o.Found = r.Bool()
		o.Item = decodeKVItem(&r)
		m := r.Count(MaxKVKeysPerCall+MaxKVPrefixResult, 4)
		if m > 0 {
			o.Items = make([]KVItem, m)
			for j := range o.Items {
				o.Items[j] = decodeKVItem(&r)
			}
		}
	}
	return k, r.Done()
}
