package storage

import (
	"math/rand/v2"
	"unsafe"

	"github.com/dchest/siphash"
)

// nameIndex finds a queue's partition index by name. A Go map from name to
// index costs about 50 bytes an entry (the key's string header, the value,
// the table's spare room); a queue of millions of partitions has one at
// its home (the directory) and one in each shard, so this table keeps only
// a slot of 8 bytes per entry (the index and 32 bits of the name's hash)
// and asks the caller for the name at an index to confirm a match: the
// names already live in the directory entries and partition states.
// An entry leaves when its partition is removed as idle (cleanup.go).
// Lookups only: nothing iterates it, so its random hash key changes no
// answer. The key is the table's own (SipHash, keyed: names come from
// clients, who must not be able to pick colliding ones), drawn when the
// first name comes in, so a load image can keep the table with the key that
// placed its slots (image.go).
type nameIndex struct {
	slots []uint64 // hash<<32 | index+1; 0 is an empty slot
	n     int
	key   [2]uint64
}

// len is how many names the table holds.
func (t *nameIndex) len() int { return t.n }

// get returns the index whose name is name; nameAt gives the name at an
// index the table holds.
func (t *nameIndex) get(name string, nameAt func(uint32) string) (uint32, bool) {
	if t.n == 0 {
		return 0, false
	}
	tag := t.tag(name)
	mask := uint64(len(t.slots) - 1)
	for i := tag & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if s>>32 == tag {
			if index := uint32(s) - 1; nameAt(index) == name {
				return index, true
			}
		}
	}
}

// put records that name is at index; name must not be in the table yet.
func (t *nameIndex) put(name string, index uint32) {
	if (t.n+1)*4 > len(t.slots)*3 {
		if t.n == 0 {
			t.key = [2]uint64{rand.Uint64(), rand.Uint64()}
		}
		t.resize(max(16, 2*len(t.slots)))
	}
	t.place(t.tag(name)<<32 | uint64(index+1))
	t.n++
}

// del removes the entry of name at index, if the table holds it. Linear
// probing needs no tombstone: the entries after the freed slot, up to the
// next empty one, move back into it when their own position allows (each
// stays reachable from its tag's position without crossing an empty slot).
func (t *nameIndex) del(name string, index uint32) {
	if t.n == 0 {
		return
	}
	want := t.tag(name)<<32 | uint64(index+1)
	mask := uint64(len(t.slots) - 1)
	i := want >> 32 & mask
	for t.slots[i] != want {
		if t.slots[i] == 0 {
			return
		}
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; t.slots[j] != 0; j = (j + 1) & mask {
		home := t.slots[j] >> 32 & mask
		// The entry at j may fill the hole at i unless its home lies
		// cyclically in (i, j]: then it must stay at or after its home.
		if (j-home)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = 0
	t.n--
	if len(t.slots) > 16 && t.n*8 < len(t.slots) {
		t.resize(len(t.slots) / 2) // a queue that shed most of its partitions gives the room back
	}
}

// resize moves every entry into a table of size slots (a power of two).
func (t *nameIndex) resize(size int) {
	old := t.slots
	t.slots = make([]uint64, size)
	for _, s := range old {
		if s != 0 {
			t.place(s)
		}
	}
}

// place puts a slot at the first free position from its tag's: the tag
// (32 bits of the name's hash) is all a slot keeps, so it alone places it,
// in a table of up to 2^32 slots.
func (t *nameIndex) place(s uint64) {
	mask := uint64(len(t.slots) - 1)
	i := s >> 32 & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

// tag is the 32 bits of name's hash a slot keeps.
func (t *nameIndex) tag(name string) uint64 {
	return siphash.Hash(t.key[0], t.key[1], unsafe.Slice(unsafe.StringData(name), len(name))) >> 32
}
