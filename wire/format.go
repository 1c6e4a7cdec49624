package wire

// The cluster's format gate. Every raft group applies its log at a format
// version it records (SetFormatCmd): what a new build writes, or applies
// differently, only once every member runs a build that knows it, so a
// rolling upgrade never has one replica apply an entry another skips. A
// build writes and applies at the active format of each group, which its
// leader raises when every member can read the next; a build whose newest
// format is older than a group's active one stops there with one line
// saying so, before it applies anything it does not know.
const (
	// FormatV1 is every entry and stored form up to the gate itself.
	FormatV1 uint32 = 1
	// FormatV2: Kafka transactions scoped by xid and settled before the
	// next (KindKafkaTxnSettled), the tick's trace retention, a group
	// delete's walk start (Steps.Since), prepared parts' reservations and
	// their commit applied whatever came between.
	FormatV2 uint32 = 2
	// FormatV3: the Streams cycle's cumulative acknowledgment
	// (TxnOpStreamAck) inside a transaction.
	FormatV3 uint32 = 3
	// FormatV4: shared leases: a pop may lease every partition it claims
	// under one id (the same id in each of PopCmd.LeaseIDs' slots, a
	// wire.SharedLeaseID), which a build before it would index as one
	// partition's lease, so an extend there would renew one partition.
	FormatV4 uint32 = 4
	// FormatV5: the maxWaitTimeSeconds sweep also deletes what waited too
	// long (storage/apply_maxwait_evict.go), in partitions no group has
	// read too; a build before it only dead-letters for subscribed groups.
	FormatV5 uint32 = 5

	// FormatV6: KV versions, trace ids and DLQ ids numbered per tenant
	// (storage/tenant_counters.go), where a build before it numbers them
	// with counters every tenant of the group shares.
	FormatV6 uint32 = 6

	// FormatV7: a standby's link commands (link.go); a build before it has
	// no standby and never meets them. A standby group applies the
	// source's entries at the source's format, kept apart from its own
	// (storage/link_apply.go), so a source below FormatV7 is followed.
	FormatV7 uint32 = 7

	// FormatV8: a transactional id's state records an InitProducerId
	// since its last transaction ended (an optional tail of the stored
	// state a build before it cannot decode), so DescribeTransactions
	// answers Empty as Kafka does.
	FormatV8 uint32 = 8

	// FormatV9: moving a partition to another raft group (move.go): the
	// move's record at the home, the copy into the target, the seal and
	// drop in the source; a build before it never meets them.
	FormatV9 uint32 = 9

	// NewestFormat is the newest format this build writes and applies.
	NewestFormat = FormatV9
	// OldestFormat is the oldest format this build applies: a log from the
	// first entry on.
	OldestFormat = FormatV1
)

// SetFormatCmd raises a raft group's active format to Version (never
// lowers it).
type SetFormatCmd struct {
	Version uint32
}

// Encode appends the command body.
func (c *SetFormatCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Uvarint(uint64(c.Version))
	return w.B
}

// DecodeSetFormatCmd decodes a set-format body.
func DecodeSetFormatCmd(b []byte) (SetFormatCmd, error) {
	r := Reader{b: b}
	c := SetFormatCmd{Version: uint32(r.Uvarint())}
	if c.Version == 0 {
		r.fail("format version 0")
	}
	return c, r.Done()
}
