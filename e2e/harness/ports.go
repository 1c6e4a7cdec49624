package harness

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Ports for nodes and proxies come from the kernel's ephemeral range by
// default: bind 127.0.0.1:0 and release it. Within one process that is
// safe (a port handed out is reserved), but test processes running side by
// side (go test runs several packages at once) could hand out the same
// port, and any process's outgoing connection can take a node's port
// before the node binds it. So a test process calls UsePortBlocks, and
// its ports then come from a range below the kernel's ephemeral range,
// which the kernel never gives an outgoing connection. The range is cut
// into blocks of blockSize ports, and a block belongs to one process at a
// time: the process holds an exclusive flock on the block's lock file (in
// portLockDir) until it exits, when the kernel drops the lock, however the
// process ended. Each port is still checked free before it is handed out,
// against anything else on the machine listening there.
//
// Within a process, a port is reserved while the cluster holding it lives;
// Cluster.Close gives its ports back, and they are handed out again only
// once no new block can be had.
//
// When no block can be owned at all (the ephemeral range leaves no room
// below it, the lock directory cannot be written, every block is owned by
// other processes), ports come from the ephemeral range as without blocks,
// which another process can race (e2etest.StartPreparedCluster retries a
// start that lost such a race).
const (
	blockSize = 256
	rangeLow  = 20000
	rangeHigh = 32000 // exclusive; lower when the ephemeral range starts below it
)

// portLockDir holds one lock file per block, shared by every user of the
// machine (a lock file is opened read-only, which flock allows, so one
// user's file serves another's processes).
func portLockDir() string { return filepath.Join(os.TempDir(), "queen-ports") }

type portSpan struct{ base, n int }

var pool struct {
	mu       sync.Mutex
	reserved map[int]bool
	// blocks are the first ports of the blocks this process owns, in the
	// order it took them; locks keeps their lock files open (and so
	// locked) for the life of the process.
	blocks []int
	locks  []*os.File
	// cur and next: the block being handed out and the first port of it
	// not tried yet.
	cur, next int
	// lo, hi bound the blocks; nextBlock is the next one to try to own.
	lo, hi, nextBlock int
	inited            bool
	useBlocks         bool
}

// UsePortBlocks makes FreePortRange hand out ports from blocks below the
// ephemeral range that this process owns, for as long as it lives. The
// end-to-end test packages call it (e2etest.Main); a lone process such as
// queen bench does not, and so writes no lock files.
func UsePortBlocks() {
	pool.mu.Lock()
	pool.useBlocks = true
	pool.mu.Unlock()
}

// FreePortRange returns a port p such that p..p+n-1 are free on 127.0.0.1
// right now and handed out to no one else by this process or, after
// UsePortBlocks, through the block locks, by any other process that uses
// them.
func FreePortRange(n int) (int, error) {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if pool.reserved == nil {
		pool.reserved = map[int]bool{}
	}
	if pool.useBlocks && n >= 1 && n <= blockSize {
		if p, ok := fromBlocks(n); ok {
			return p, nil
		}
	}
	return fromEphemeral(n)
}

// releasePorts gives spans back to this process's pool.
func releasePorts(spans []portSpan) {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for _, s := range spans {
		for p := s.base; p < s.base+s.n; p++ {
			delete(pool.reserved, p)
		}
	}
}

// fromBlocks finds n consecutive free ports in the blocks this process
// owns: first on from where the last one ended, then in a newly owned
// block, and only then again from the first block owned (ports given
// back by closed clusters).
func fromBlocks(n int) (int, bool) {
	if !pool.inited {
		pool.inited = true
		pool.lo, pool.hi = blockRange()
		pool.nextBlock = pool.lo
	}
	if len(pool.blocks) > 0 {
		if p, ok := scanBlock(pool.cur, pool.next, n); ok {
			return p, true
		}
	}
	if b, ok := ownBlock(); ok {
		pool.blocks = append(pool.blocks, b)
		pool.cur, pool.next = len(pool.blocks)-1, b
		if p, ok := scanBlock(pool.cur, b, n); ok {
			return p, true
		}
	}
	for i, b := range pool.blocks {
		if p, ok := scanBlock(i, b, n); ok {
			pool.cur = i
			return p, true
		}
	}
	return 0, false
}

// scanBlock looks for n consecutive free, unreserved ports in block i
// from port from on, and reserves them.
func scanBlock(i, from, n int) (int, bool) {
	end := pool.blocks[i] + blockSize
	for base := from; base+n <= end; {
		busy := -1
		for p := base; p < base+n; p++ {
			if pool.reserved[p] || !portFree(p) {
				busy = p
				break
			}
		}
		if busy < 0 {
			for p := base; p < base+n; p++ {
				pool.reserved[p] = true
			}
			pool.next = base + n
			return base, true
		}
		base = busy + 1
	}
	return 0, false
}

// ownBlock takes the next block no other process owns; false when none is
// left or the lock directory cannot be used.
func ownBlock() (int, bool) {
	dir := portLockDir()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, false
	}
	// Any user's processes take blocks here: world-writable, sticky like
	// /tmp itself (best effort: the directory may be another user's).
	_ = os.Chmod(dir, 0o777|os.ModeSticky)
	for ; pool.nextBlock+blockSize <= pool.hi; pool.nextBlock += blockSize {
		b := pool.nextBlock
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(b)+".lock"), os.O_RDONLY|os.O_CREATE, 0o666)
		if err != nil {
			continue
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		pool.locks = append(pool.locks, f)
		pool.nextBlock += blockSize
		return b, true
	}
	return 0, false
}

// blockRange is rangeLow..rangeHigh cut short where the kernel's
// ephemeral range (Linux: net.ipv4.ip_local_port_range) begins inside
// it; empty when that range starts at or below rangeLow, or is unknown.
func blockRange() (lo, hi int) {
	lo, hi = rangeLow, rangeHigh
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	f := strings.Fields(string(b))
	if err != nil || len(f) != 2 {
		return lo, lo // unknown: no blocks
	}
	elo, err1 := strconv.Atoi(f[0])
	ehi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return lo, lo
	}
	if elo < hi && ehi >= lo {
		hi = max(elo, lo)
	}
	return lo, hi
}

// fromEphemeral is the fallback: ports the kernel picks from its
// ephemeral range, checked free and reserved in this process.
func fromEphemeral(n int) (int, error) {
	for try := 0; try < 100; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		base := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if base+n > 65535 {
			continue
		}
		ok := true
		for p := base; p < base+n && ok; p++ {
			ok = !pool.reserved[p] && portFree(p)
		}
		if ok {
			for p := base; p < base+n; p++ {
				pool.reserved[p] = true
			}
			return base, nil
		}
	}
	return 0, errors.New("harness: no free port range")
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
