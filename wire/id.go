package wire

import (
	"encoding/hex"
	"errors"
)

// ID is a 16-byte identifier: tenants, message ids and lease ids are UUIDs
// on the outside and 16 raw bytes inside commands and storage keys.
type ID [16]byte

// ErrBadID is returned by ParseID for text that is not a UUID.
var ErrBadID = errors.New("wire: not a UUID")

// IsZero reports whether id is all zeroes (an absent id).
func (id ID) IsZero() bool { return id == ID{} }

// String formats id in the canonical 8-4-4-4-12 UUID form.
func (id ID) String() string {
	return string(id.AppendText(make([]byte, 0, 36)))
}

// AppendText appends the canonical UUID form of id to b.
func (id ID) AppendText(b []byte) []byte {
	var buf [36]byte
	hex.Encode(buf[0:8], id[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], id[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], id[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], id[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:], id[10:])
	return append(b, buf[:]...)
}

// ParseID parses the canonical 36-character UUID form (either case).
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, ErrBadID
	}
	src := [...]struct{ from, to, at int }{{0, 8, 0}, {9, 13, 4}, {14, 18, 6}, {19, 23, 8}, {24, 36, 10}}
	for _, p := range src {
		if _, err := hex.Decode(id[p.at:], []byte(s[p.from:p.to])); err != nil {
			return ID{}, ErrBadID
		}
	}
	return id, nil
}

// DefaultTenant is the tenant every request belongs to when tenancy is off.
var DefaultTenant = ID{15: 1}
