package harness

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Ports come from a block below the ephemeral range that this process
// owns: its lock file cannot be locked through another open file (as
// another process would), and no two ranges handed out overlap.
func TestFreePortRangeComesFromAnOwnedBlock(t *testing.T) {
	UsePortBlocks()
	lo, hi := blockRange()
	if hi-lo < blockSize {
		t.Skipf("no room for blocks below the ephemeral range (%d-%d)", lo, hi)
	}
	seen := map[int]bool{}
	for i := 0; i < 20; i++ {
		p, err := FreePortRange(5)
		if err != nil {
			t.Fatal(err)
		}
		if p < lo || p+5 > hi {
			t.Fatalf("range %d-%d outside %d-%d", p, p+4, lo, hi)
		}
		for q := p; q < p+5; q++ {
			if seen[q] {
				t.Fatalf("port %d handed out twice", q)
			}
			seen[q] = true
		}
	}
	pool.mu.Lock()
	blocks := append([]int(nil), pool.blocks...)
	pool.mu.Unlock()
	if len(blocks) == 0 {
		t.Fatal("no block owned")
	}
	for _, b := range blocks {
		f, err := os.Open(filepath.Join(portLockDir(), strconv.Itoa(b)+".lock"))
		if err != nil {
			t.Fatal(err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		f.Close()
		if err != syscall.EWOULDBLOCK {
			t.Fatalf("block %d: a second lock got %v, want EWOULDBLOCK", b, err)
		}
	}
}
