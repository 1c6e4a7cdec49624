package raftgroups

import (
	"errors"
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// DiskUse is what this node's data dir takes on disk and what its
// filesystem holds, for /metrics/prometheus.
type DiskUse struct {
	DirBytes     uint64 // blocks the data dir's files take, as du counts them
	FSSizeBytes  uint64
	FSAvailBytes uint64 // available to an unprivileged user, as df counts it
}

// diskUseEvery bounds how often the data dir is walked: a scrape every few
// seconds must not stat every segment and log file each time.
const diskUseEvery = 10 * time.Second

// diskUseCache holds the last walk of the data dir.
type diskUseCache struct {
	mu   sync.Mutex
	at   time.Time
	dir  uint64
	werr error
}

// DiskUse measures the data dir (its walk at most every diskUseEvery) and
// its filesystem (every call: statfs is cheap).
func (h *Host) DiskUse() (DiskUse, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(h.cfg.Dir, &st); err != nil {
		return DiskUse{}, err
	}
	u := DiskUse{FSSizeBytes: st.Blocks * uint64(st.Bsize), FSAvailBytes: st.Bavail * uint64(st.Bsize)}
	c := &h.diskUse
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= diskUseEvery {
		c.dir, c.werr = dirBytes(h.cfg.Dir)
		c.at = time.Now()
	}
	u.DirBytes = c.dir
	return u, c.werr
}

// dirBytes sums the blocks of the regular files under dir. A file or dir
// removed during the walk (a compacted segment) is skipped, not an error.
func dirBytes(dir string) (uint64, error) {
	var n uint64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += uint64(st.Blocks) * 512
		} else {
			n += uint64(info.Size())
		}
		return nil
	})
	return n, err
}
