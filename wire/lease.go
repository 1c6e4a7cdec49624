package wire

// Shared leases (docs/http-api.md, "Shared leases"): a pop that may claim
// several partitions gives every partition it claims one lease id, as
// Queen does, so one extend renews them all. The partitions may live in
// several raft groups, and an extend names only the id: the id itself says
// which groups to ask. It is a UUID version 8 (RFC 9562's layout of its
// own) carrying the bit set of the groups the pop proposed to (bit g: raft
// group g; groups are below 64, QUEEN_RAFT_GROUPS), random bits, and in its
// last byte the group of its first claim (TagID, GroupOfTag), where a
// transaction's required lease is checked. A per-partition lease id is a
// UUID version 4 with its group in the last byte; the version nibble tells
// the two apart.
//
// Layout (bytes): 0-5 groups 0-47; 6 version 8 and 4 random bits; 7 groups
// 48-55; 8 variant and 6 random bits; 9 groups 56-63; 10-14 random; 15 the
// tag.

// MaxSharedLeaseGroup bounds the groups a shared lease id can name.
const MaxSharedLeaseGroup = 64

// SharedLeaseID makes a shared lease id over groups (bit g: group g) from
// the random bytes of seed, tagged with group tag.
func SharedLeaseID(seed ID, groups uint64, tag int) ID {
	var id ID
	for i := 0; i < 6; i++ {
		id[i] = byte(groups >> (8 * i))
	}
	id[6] = 0x80 | seed[6]&0x0f
	id[7] = byte(groups >> 48)
	id[8] = 0x80 | seed[8]&0x3f
	id[9] = byte(groups >> 56)
	copy(id[10:15], seed[10:15])
	return TagID(id, tag)
}

// IsSharedLease reports whether id is a shared lease id.
func IsSharedLease(id ID) bool { return id[6]>>4 == 8 && id[8]>>6 == 2 }

// SharedLeaseGroups is the bit set of groups a shared lease id names.
func SharedLeaseGroups(id ID) uint64 {
	var g uint64
	for i := 0; i < 6; i++ {
		g |= uint64(id[i]) << (8 * i)
	}
	return g | uint64(id[7])<<48 | uint64(id[9])<<56
}
