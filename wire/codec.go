// Package wire owns the bytes that cross the raft boundary: the commands the
// engine proposes, the results the state machine answers with, and the record
// format messages are stored in. It is pure data and codecs: it never touches
// raft, disk, the network or the clock, so the state machine can decode a
// command without trusting anything but the bytes, and every decoder can be
// fuzzed on its own.
//
// Encoding is a small hand-rolled binary format (uvarints, length-prefixed
// byte strings, fixed-width ids). It is versioned per entry; a decoder that
// meets bytes it does not understand returns ErrMalformed instead of
// guessing.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrMalformed is returned by every decoder in this package when the input is
// truncated, oversized or otherwise not what an encoder of this package
// produces.
var ErrMalformed = errors.New("wire: malformed encoding")

// Writer appends encoded values to B. The zero value is ready to use; reuse a
// Writer (B = B[:0]) to avoid allocations on hot paths.
type Writer struct {
	B []byte
}

// U8 appends one byte.
func (w *Writer) U8(v uint8) { w.B = append(w.B, v) }

// Bool appends a boolean as one byte.
func (w *Writer) Bool(v bool) {
	if v {
		w.B = append(w.B, 1)
	} else {
		w.B = append(w.B, 0)
	}
}

// Uvarint appends an unsigned varint.
func (w *Writer) Uvarint(v uint64) { w.B = binary.AppendUvarint(w.B, v) }

// Varint appends a zig-zag signed varint.
func (w *Writer) Varint(v int64) { w.B = binary.AppendVarint(w.B, v) }

// U64 appends a fixed-width big-endian uint64.
func (w *Writer) U64(v uint64) { w.B = binary.BigEndian.AppendUint64(w.B, v) }

// Bytes appends a length-prefixed byte string.
func (w *Writer) Bytes(b []byte) {
	w.B = binary.AppendUvarint(w.B, uint64(len(b)))
	w.B = append(w.B, b...)
}

// String appends a length-prefixed string.
func (w *Writer) String(s string) {
	w.B = binary.AppendUvarint(w.B, uint64(len(s)))
	w.B = append(w.B, s...)
}

// Fixed appends raw bytes with no length prefix (ids of a known width).
func (w *Writer) Fixed(b []byte) { w.B = append(w.B, b...) }

// Reader decodes values from a byte slice. The first error sticks: after it,
// every method returns zero values and Err reports it, so decoders can read a
// whole struct and check once.
type Reader struct {
	b   []byte
	err error
}

// NewReader returns a Reader over b. Byte slices it returns alias b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err is the first decoding error, if any.
func (r *Reader) Err() error { return r.err }

// Len is the number of bytes not yet consumed.
func (r *Reader) Len() int { return len(r.b) }

// Rest returns the unconsumed bytes without copying.
func (r *Reader) Rest() []byte { return r.b }

func (r *Reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrMalformed, what)
	}
	r.b = nil
}

// U8 reads one byte.
func (r *Reader) U8() uint8 {
	if len(r.b) < 1 {
		r.fail("truncated u8")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// Bool reads a boolean written by Writer.Bool.
func (r *Reader) Bool() bool {
	switch r.U8() {
	case 0:
		return false
	case 1:
		return true
	default:
		r.fail("bad bool")
		return false
	}
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Varint reads a zig-zag signed varint.
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// U64 reads a fixed-width big-endian uint64.
func (r *Reader) U64() uint64 {
	if len(r.b) < 8 {
		r.fail("truncated u64")
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// Count reads a uvarint element count and checks it against max and against
// the bytes left (each element takes at least minSize bytes), so a forged
// count can never make a decoder allocate more than the input justifies.
func (r *Reader) Count(max, minSize int) int {
	v := r.Uvarint()
	if r.err != nil {
		return 0
	}
	if minSize < 1 {
		minSize = 1
	}
	if v > uint64(max) || v > uint64(len(r.b)/minSize) {
		r.fail("count out of range")
		return 0
	}
	return int(v)
}

// Bytes reads a length-prefixed byte string. The result aliases the input.
func (r *Reader) Bytes() []byte {
	n := r.Uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) || n > math.MaxInt32 {
		r.fail("byte string past end")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// String reads a length-prefixed string (copied, so it outlives the input).
func (r *Reader) String() string { return string(r.Bytes()) }

// Fixed reads n raw bytes. The result aliases the input.
func (r *Reader) Fixed(n int) []byte {
	if n > len(r.b) {
		r.fail("truncated fixed field")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// Done checks that the whole input was consumed.
func (r *Reader) Done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return r.err
}
