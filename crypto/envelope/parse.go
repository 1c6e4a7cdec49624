package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// fields holds the raw (still base64) member values of an envelope.
type fields struct {
	enc, iv, tag []byte
}

const (
	seenEnc = 1 << iota
	seenIV
	seenTag
	seenAll = seenEnc | seenIV | seenTag
)

// parse recognises the envelope's shape: one JSON object whose members are
// exactly "encrypted", "iv" and "authTag", each a string, in any order, with
// optional JSON whitespace. Anything else (extra or duplicate members, other
// value types, trailing data) is not an envelope.
//
// The fast path scans the bytes in place and does not allocate. Envelopes
// written by Seal never contain a backslash; if one does (an encoder that
// escaped '/' as "\/", say), parse falls back to encoding/json, which has the
// same acceptance rules.
func parse(b []byte) (fields, bool) {
	var f fields
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return f, false
	}
	i++
	seen := 0
	for {
		i = skipWS(b, i)
		key, j, st := scanString(b, i)
		if st == strEscaped {
			return parseSlow(b)
		}
		if st != strOK {
			return f, false
		}
		i = skipWS(b, j)
		if i >= len(b) || b[i] != ':' {
			return f, false
		}
		i = skipWS(b, i+1)
		val, j, st := scanString(b, i)
		if st == strEscaped {
			return parseSlow(b)
		}
		if st != strOK {
			return f, false
		}
		if !f.set(&seen, key, val) {
			return f, false
		}
		i = skipWS(b, j)
		if i >= len(b) {
			return f, false
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] != '}' {
			return f, false
		}
		i = skipWS(b, i+1)
		if i != len(b) || seen != seenAll {
			return f, false
		}
		return f, true
	}
}

// set records one member; false for an unknown or repeated member name.
func (f *fields) set(seen *int, key, val []byte) bool {
	var bit int
	switch string(key) { // no allocation: the compiler recognises this form
	case "encrypted":
		bit, f.enc = seenEnc, val
	case "iv":
		bit, f.iv = seenIV, val
	case "authTag":
		bit, f.tag = seenTag, val
	default:
		return false
	}
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

type strStatus int

const (
	strOK strStatus = iota
	strBad
	strEscaped
)

// scanString reads a JSON string starting at b[i] == '"' and returns its
// contents and the index after the closing quote. Strings holding a backslash
// are reported as strEscaped for the slow path. Only printable ASCII is
// accepted: raw control characters are invalid JSON, and no envelope member
// name or base64 value contains anything else (rejecting it here keeps the
// fast path equal to the slow one, which turns invalid UTF-8 into U+FFFD).
func scanString(b []byte, i int) ([]byte, int, strStatus) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, strBad
	}
	start := i + 1
	for j := start; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[start:j], j + 1, strOK
		case c == '\\':
			return nil, j, strEscaped
		case c < 0x20 || c >= 0x7f:
			return nil, j, strBad
		}
	}
	return nil, len(b), strBad
}

// parseSlow applies parse's rules with encoding/json, for envelopes whose
// strings contain escapes. It allocates; it is not on Seal's output path.
func parseSlow(b []byte) (fields, bool) {
	var f fields
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return f, false
	}
	seen := 0
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return f, false
		}
		key, _ := kt.(string)
		vt, err := dec.Token()
		if err != nil {
			return f, false
		}
		val, isStr := vt.(string)
		if !isStr || !printableASCII(val) || !f.set(&seen, []byte(key), []byte(val)) {
			return f, false
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return f, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return f, false // trailing data
	}
	return f, seen == seenAll
}

// printableASCII applies the fast path's byte rule to an unescaped value, so
// both paths accept the same envelopes (base64 decoding would otherwise skip
// an escaped "\n").
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
