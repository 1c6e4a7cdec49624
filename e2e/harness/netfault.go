package harness

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// A Network stands between the nodes of a cluster started with
// Options.Proxied: every node reaches every peer's raft ports (one listener
// per group, group N on port + N) and HTTP port through a TCP proxy of
// this process, which a test can cut per direction. The nodes all list
// the same QUEEN_RAFT_PEERS (the proxies' addresses) and listen on their
// own ports behind them: dragonboat learns a peer's address both from the
// bootstrap membership and from the source address of every batch the peer
// sends, and panics when the two differ, so a peer string per node (one
// proxy per ordered pair) cannot work. A proxy is therefore shared by all
// the peers of one node and tells them apart by which process owns the
// connecting socket (owner_linux.go).
//
// A cut acts on bytes in one direction between two nodes, whichever of
// them opened the connection: the raft stream one node opens to another
// carries requests one way and answers the other.
type Network struct {
	mu      sync.Mutex
	nodes   []*Node
	rules   map[link]Mode
	changed chan struct{} // closed and replaced on every rule change
	conns   map[*pconn]struct{}
	lns     []net.Listener
	closed  bool
	wg      sync.WaitGroup

	resets  atomic.Int64
	unknown atomic.Int64
}

// Mode is what a cut does to the bytes of a direction.
type Mode int

const (
	// Open forwards bytes.
	Open Mode = iota
	// Blackhole holds bytes as if every packet were lost: the sender's
	// writes stall once the buffers fill, nothing arrives, and a
	// connection opened meanwhile is accepted but carries nothing (a
	// dropped SYN would make the dial wait instead). Healed, held bytes
	// flow on, as TCP retransmission would deliver them.
	Blackhole
	// Reset resets every connection between the two nodes at once, in
	// both directions, and every new one as it arrives (a REJECT rule
	// with tcp-reset).
	Reset
)

func (m Mode) String() string {
	switch m {
	case Blackhole:
		return "blackhole"
	case Reset:
		return "reset"
	}
	return "open"
}

type link struct{ from, to int } // node ids

type pconn struct {
	src, dst     int
	client, peer net.Conn
	once         sync.Once
	done         chan struct{}
}

func (pc *pconn) close(reset bool) {
	pc.once.Do(func() {
		for _, c := range []net.Conn{pc.client, pc.peer} {
			if c == nil {
				continue
			}
			if tc, ok := c.(*net.TCPConn); ok && reset {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
		}
		close(pc.done)
	})
}

// newNetwork listens on every node's peer-facing ports and forwards to the
// ports the node listens on.
func newNetwork(nodes []*Node, groups int) (*Network, error) {
	if err := ProxySupported(); err != nil {
		return nil, err
	}
	nw := &Network{nodes: nodes, rules: map[link]Mode{}, changed: make(chan struct{}), conns: map[*pconn]struct{}{}}
	for _, n := range nodes {
		for g := 0; g < groups; g++ {
			pub, _ := addrPlus(n.PeerRaftAddr, g)
			real, _ := addrPlus(n.RaftAddr, g)
			if err := nw.listen(n.ID, pub, real); err != nil {
				nw.Close()
				return nil, err
			}
		}
		if err := nw.listen(n.ID, n.PeerHTTPAddr, n.HTTPAddr); err != nil {
			nw.Close()
			return nil, err
		}
	}
	return nw, nil
}

func addrPlus(addr string, n int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(p+n)), nil
}

func (nw *Network) listen(dst int, pub, real string) error {
	ln, err := net.Listen("tcp", pub)
	if err != nil {
		return fmt.Errorf("harness: proxy for node %d: %w", dst, err)
	}
	nw.lns = append(nw.lns, ln)
	nw.wg.Add(1)
	go func() {
		defer nw.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			nw.wg.Add(1)
			go func() { defer nw.wg.Done(); nw.serve(c, dst, real) }()
		}
	}()
	return nil
}

// source names the node that opened c, or 0. The client's socket exists
// before its connect returns, but the lookup races the process table on a
// busy machine, so it tries a few times.
func (nw *Network) source(c net.Conn) int {
	cp := c.RemoteAddr().(*net.TCPAddr).Port
	sp := c.LocalAddr().(*net.TCPAddr).Port
	for try := 0; try < 5; try++ {
		byPid := map[int]int{}
		var pids []int
		for _, n := range nw.nodes {
			if pid := n.Pid(); pid != 0 {
				byPid[pid] = n.ID
				pids = append(pids, pid)
			}
		}
		if pid, err := socketOwner(cp, sp, pids); err == nil {
			return byPid[pid]
		}
		time.Sleep(time.Duration(try+1) * 2 * time.Millisecond) // back off, not synchronisation: the lookup just failed
	}
	return 0
}

func (nw *Network) serve(c net.Conn, dst int, real string) {
	src := nw.source(c)
	if src == 0 {
		// Nothing but nodes dials these ports; a connection nobody owns
		// any more (the node died) is dropped and redialed.
		nw.unknown.Add(1)
		c.Close()
		return
	}
	peer, err := net.DialTimeout("tcp", real, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	pc := &pconn{src: src, dst: dst, client: c, peer: peer, done: make(chan struct{})}
	nw.mu.Lock()
	if nw.closed || nw.rules[link{src, dst}] == Reset || nw.rules[link{dst, src}] == Reset {
		nw.mu.Unlock()
		nw.resets.Add(1)
		pc.close(true)
		return
	}
	nw.conns[pc] = struct{}{}
	nw.mu.Unlock()
	defer func() {
		nw.mu.Lock()
		delete(nw.conns, pc)
		nw.mu.Unlock()
		pc.close(false)
	}()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); nw.pump(pc, c, peer, link{src, dst}) }()
	go func() { defer wg.Done(); nw.pump(pc, peer, c, link{dst, src}) }()
	wg.Wait()
}

// pump copies from → to while the direction l is open, holding what it
// read while l is blackholed; it ends the whole connection when either
// side ends.
func (nw *Network) pump(pc *pconn, from, to net.Conn, l link) {
	defer pc.close(false)
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			if !nw.waitOpen(pc, l) {
				return
			}
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a reset: the connection ends on both sides
		}
	}
}

// waitOpen blocks while l is blackholed; false once the connection ended.
func (nw *Network) waitOpen(pc *pconn, l link) bool {
	for {
		nw.mu.Lock()
		mode, changed := nw.rules[l], nw.changed
		nw.mu.Unlock()
		switch mode {
		case Open:
			return true
		case Reset:
			return false
		}
		select {
		case <-changed:
		case <-pc.done:
			return false
		}
	}
}

// set changes rules under the lock and wakes every held pump.
func (nw *Network) set(f func()) {
	nw.mu.Lock()
	f()
	close(nw.changed)
	nw.changed = make(chan struct{})
	var reset []*pconn
	for pc := range nw.conns {
		if nw.rules[link{pc.src, pc.dst}] == Reset || nw.rules[link{pc.dst, pc.src}] == Reset {
			reset = append(reset, pc)
		}
	}
	nw.mu.Unlock()
	for _, pc := range reset {
		nw.resets.Add(1)
		pc.close(true)
	}
}

// Cut applies m to the bytes from → to (Open heals that direction).
func (nw *Network) Cut(from, to *Node, m Mode) {
	nw.set(func() {
		if m == Open {
			delete(nw.rules, link{from.ID, to.ID})
		} else {
			nw.rules[link{from.ID, to.ID}] = m
		}
	})
}

// Isolate cuts n off from every peer, in both directions.
func (nw *Network) Isolate(n *Node, m Mode) {
	nw.set(func() {
		for _, p := range nw.nodes {
			if p.ID != n.ID {
				nw.rules[link{n.ID, p.ID}] = m
				nw.rules[link{p.ID, n.ID}] = m
			}
		}
	})
}

// IsolateOneWay cuts only the bytes n sends to its peers (out) or only
// those it receives from them (!out).
func (nw *Network) IsolateOneWay(n *Node, out bool, m Mode) {
	nw.set(func() {
		for _, p := range nw.nodes {
			if p.ID == n.ID {
				continue
			}
			if out {
				nw.rules[link{n.ID, p.ID}] = m
			} else {
				nw.rules[link{p.ID, n.ID}] = m
			}
		}
	})
}

// Heal removes every cut.
func (nw *Network) Heal() { nw.set(func() { clear(nw.rules) }) }

// Stats are the connections reset by cuts and those no node owned.
func (nw *Network) Stats() (resets, unknown int64) { return nw.resets.Load(), nw.unknown.Load() }

// Close stops every proxy and drops its connections.
func (nw *Network) Close() {
	nw.mu.Lock()
	if nw.closed {
		nw.mu.Unlock()
		return
	}
	nw.closed = true
	conns := make([]*pconn, 0, len(nw.conns))
	for pc := range nw.conns {
		conns = append(conns, pc)
	}
	nw.mu.Unlock()
	for _, ln := range nw.lns {
		ln.Close()
	}
	for _, pc := range conns {
		pc.close(false)
	}
	nw.wg.Wait()
}
