package wire

// Command kinds of a standby cluster (QUEEN_STANDBY_OF): a standby's raft
// group records what it received from the source's group through its own
// log, so every standby replica applies the same source entries in the same
// order and a standby survives its own node failures. They are written
// only at FormatV7 or later (see format.go).
const (
	// KindLinkApply carries a run of the source group's committed entries
	// (their raw payloads, in index order) and the source index of the
	// last one; applying it applies each as the source applied it.
	KindLinkApply Kind = 70
	// KindLinkPromote ends following: the group becomes writable at the
	// last source entry it applied.
	KindLinkPromote Kind = 71
	// KindLinkSnapshotChunk is one piece of a source snapshot being
	// installed because the source no longer holds the entries the
	// standby needs next.
	KindLinkSnapshotChunk Kind = 72
	// KindLinkSnapshotDone replaces the group's state with the installed
	// snapshot, taken at the source index it carries.
	KindLinkSnapshotDone Kind = 73
)
