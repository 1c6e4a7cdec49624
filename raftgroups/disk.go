package raftgroups

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/queen-mq/queen/wire"
)

// Disk watermarks (spec §2.1, 507 storage_full). Above the high mark the
// node refuses new data so the raft log and the store can never be the
// thing that fills the disk; it accepts data again only once usage falls
// below the low mark, so it does not flap around one threshold. Only
// commands that add data are refused: pops, acks, deletes, configuration
// and retention keep working, because they are how an operator (or
// retention) frees space.

// diskCheckInterval is how often the data dir's filesystem is measured:
// statfs is cheap, and a second is far less than it takes to write the
// last 15% of a disk.
const diskCheckInterval = time.Second

// diskGuard tracks whether the data dir's filesystem is above the high
// mark. usage is replaceable so tests can drive it without filling a disk.
type diskGuard struct {
	dir       string
	high, low float64
	usage     func(dir string) (float64, error)
	full      atomic.Bool
	log       *slog.Logger
}

// check measures once and flips full across the watermarks.
func (d *diskGuard) check() {
	if d.high <= 0 || d.high >= 100 {
		return // disabled
	}
	pct, err := d.usage(d.dir)
	if err != nil {
		d.log.Warn("raft: cannot measure disk usage", "dir", d.dir, "err", err)
		return
	}
	switch {
	case !d.full.Load() && pct >= d.high:
		d.full.Store(true)
		d.log.Warn("raft: disk above QUEEN_RAFT_DISK_HIGH_PCT, refusing new data (507 storage_full)",
			"dir", d.dir, "used_pct", fmt.Sprintf("%.1f", pct), "high_pct", d.high, "low_pct", d.low)
	case d.full.Load() && pct < d.low:
		d.full.Store(false)
		d.log.Info("raft: disk below QUEEN_RAFT_DISK_LOW_PCT, accepting data again",
			"dir", d.dir, "used_pct", fmt.Sprintf("%.1f", pct))
	}
}

// refuses says whether cmds must be refused now: the disk is full and one
// of them adds data.
func (d *diskGuard) refuses(cmds []wire.Command) bool {
	if d == nil || !d.full.Load() {
		return false
	}
	for _, c := range cmds {
		if addsData(c.Kind) {
			return true
		}
	}
	return false
}

// addsData lists the command kinds that grow what the node stores. A Kafka
// EndTxn is not among them: a commit writes what was already accepted into
// the coordinator's bounded buffer, and an abort must always get through.
func addsData(k wire.Kind) bool {
	switch k {
	case wire.KindPush, wire.KindTransaction, wire.KindKafkaProduce, wire.KindKV, wire.KindTimers,
		wire.KindTrace, wire.KindDLQReplay,
		wire.KindMoveCopy: // a partition moving in waits for room; the mover tries again
		return true
	}
	return false
}

// statfsUsage is the used share of dir's filesystem as df counts it:
// used / (used + available to unprivileged users).
func statfsUsage(dir string) (float64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	used := float64(st.Blocks-st.Bfree) * float64(st.Bsize)
	avail := float64(st.Bavail) * float64(st.Bsize)
	if used+avail == 0 {
		return 0, nil
	}
	return 100 * used / (used + avail), nil
}

// StorageFull reports whether the node is refusing new data because its
// disk is above the high watermark.
func (h *Host) StorageFull() bool { return h.disk.full.Load() }
