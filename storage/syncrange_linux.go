package storage

import (
	"os"
	"syscall"
)

// startWriteback asks the kernel to write f's dirty pages in [0, end) now,
// waiting first for writeback it started before, so dirty segment data
// never piles up for one long fsync (pebble's BytesPerSync does the same
// for its files).
func startWriteback(f *os.File, end int64) error {
	const waitBefore, write = 1, 2 // SYNC_FILE_RANGE_WAIT_BEFORE, SYNC_FILE_RANGE_WRITE
	return syscall.SyncFileRange(int(f.Fd()), 0, end, waitBefore|write)
}
