package raftgroups

import (
	"time"

	"github.com/lni/dragonboat/v4"
)

// Dragonboat takes a snapshot every SnapshotEntries applied entries, but
// group commit makes an entry anything from one record to MaxBatchBytes,
// so a count alone either snapshots a lightly loaded group too often or
// lets a busy group's log grow to many GiB. A snapshot is not free: the
// store's Sync runs under the lock applies wait on, and dragonboat fsyncs
// its snapshot record, the log's compaction record and the log manifest.
// At 500 entries a snapshot came every second or so per group and produce
// p99 on one node sat at 60-70 ms (20,000 records/s); at 20,000 entries it
// fell to about 10 ms (docs/placement.md). So the count is set high and
// volume bounds the log: a group that has applied SnapshotBytes of commands
// since its store last synced is asked for a snapshot here, keeping half of
// those entries for followers that lag a little.

// snapshotCheckEvery is how often groups are looked at.
const snapshotCheckEvery = time.Second

func (h *Host) snapshotBySize() {
	for _, g := range h.groups {
		bytes, entries := g.store.SinceSync()
		if bytes < h.cfg.SnapshotBytes || entries < 2 {
			continue
		}
		opt := dragonboat.SnapshotOption{OverrideCompactionOverhead: true, CompactionOverhead: entries / 2}
		// Asynchronous: its effect is the store's next Sync, seen at the
		// next check. A request while a snapshot is running is refused
		// (ErrSystemBusy) and made again then.
		_, _ = g.nh.RequestSnapshot(g.shardID, opt, time.Minute)
	}
}
