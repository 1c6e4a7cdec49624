package wire

import (
	"math/bits"
	"testing"
)

func TestSharedLeaseIDCarriesItsGroups(t *testing.T) {
	seed := ID{0xde, 0xad, 0xbe, 0xef, 1, 2, 0x4f, 3, 0xbf, 4, 5, 6, 7, 8, 9, 10}
	for _, groups := range []uint64{1, 1<<3 | 1<<5, 1<<47 | 1<<48 | 1<<55 | 1<<56 | 1<<63, ^uint64(0)} {
		tag := bits.TrailingZeros64(groups)
		id := SharedLeaseID(seed, groups, tag)
		if !IsSharedLease(id) || SharedLeaseGroups(id) != groups || GroupOfTag(id) != tag {
			t.Fatalf("groups %x: id %s shared %v groups %x tag %d", groups, id, IsSharedLease(id), SharedLeaseGroups(id), GroupOfTag(id))
		}
		back, err := ParseID(id.String())
		if err != nil || back != id {
			t.Fatalf("%s does not parse back: %v", id, err)
		}
	}
	// A version-4 per-partition id is not shared.
	v4 := TagID(ID{6: 0x4a, 8: 0x9c}, 2)
	if IsSharedLease(v4) {
		t.Fatal("a v4 lease id reads as shared")
	}
}

func TestPopCmdSharedLease(t *testing.T) {
	x, y := ID{1}, ID{2}
	for _, c := range []struct {
		ids  []ID
		want bool
	}{{nil, false}, {[]ID{x}, false}, {[]ID{x, y}, false}, {[]ID{x, x, x}, true}, {[]ID{x, x, y}, false}} {
		p := PopCmd{LeaseIDs: c.ids}
		if p.SharedLease() != c.want {
			t.Fatalf("%v: shared %v", c.ids, !c.want)
		}
	}
}
