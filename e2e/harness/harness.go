// Package harness builds the queen binary and runs real queen nodes for the
// end-to-end tests and the benchmarks: free 127.0.0.1 ports, a temp data dir
// per node, logs to a file, and SIGKILL / SIGTERM / restart. It never talks
// to a node's internals, only to its ports.
//
// Test processes that go test runs side by side share one build of the
// binary (SharedBuild, build.go) and never hand out the same port
// (UsePortBlocks, ports.go).
package harness

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/queen-mq/queen/raftgroups"
)

// Node is one queen process and the ports it owns.
type Node struct {
	ID        int
	HTTPAddr  string // 127.0.0.1:port
	RaftAddr  string // group 0's raft address; group N is port + N
	KafkaAddr string
	// PeerRaftAddr and PeerHTTPAddr are where the node's peers reach it
	// (QUEEN_RAFT_PEERS): its own ports, or its proxy's in a cluster
	// started with Options.Proxied.
	PeerRaftAddr string
	PeerHTTPAddr string
	Dir          string
	Env          map[string]string // extra settings, e.g. QUEEN_RAFT_TOKEN

	bin string
	// held are the ports allocated for the node (and its proxies), given
	// back when its cluster closes.
	held     []portSpan
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	exitCode int
	logPath  string
}

// Options shape a cluster.
type Options struct {
	Nodes int
	// Groups sets QUEEN_RAFT_GROUPS; 0 leaves the node's default (derived
	// from the machine, see DefaultGroups).
	Groups int
	Env    map[string]string // settings for every node
	// NodeEnv adds settings for single nodes, by node id (1-based), over
	// Env: e.g. a fault suite's QUEEN_TEST_CLOCK_OFFSET_MS on one node.
	NodeEnv map[int]map[string]string
	// BaseDir holds the nodes' data dirs (a test's TempDir).
	BaseDir string
	// Proxied puts a fault proxy between every node and its peers
	// (Cluster.Net, netfault.go).
	Proxied bool
	// PeersWithoutHTTP lists only raft addresses in QUEEN_RAFT_PEERS, so
	// no node knows where another's broker port is: whatever works
	// between nodes then goes over the node channel.
	PeersWithoutHTTP bool
}

// DefaultGroups is how many raft groups a node of a cluster of nodes runs
// without QUEEN_RAFT_GROUPS on this machine.
func DefaultGroups(nodes int) int { return raftgroups.DefaultGroups(nodes, runtime.NumCPU()) }

// Cluster is a set of nodes that know each other through QUEEN_RAFT_PEERS.
type Cluster struct {
	Nodes []*Node
	// Net cuts and heals links between nodes (Options.Proxied only).
	Net   *Network
	peers string
	// lastID is the highest node id handed out: a removed node's id is
	// never reused (raft refuses it forever).
	lastID int
}

// NewCluster allocates ports and directories; nodes are started with Start.
func NewCluster(bin string, o Options) (*Cluster, error) {
	if o.Nodes < 1 {
		o.Nodes = 1
	}
	ports := o.Groups
	if ports < 1 {
		ports = DefaultGroups(o.Nodes)
	}
	c := &Cluster{}
	var peers []string
	for i := 1; i <= o.Nodes; i++ {
		n, err := newNode(i, bin, o.BaseDir, ports)
		if err != nil {
			return nil, err
		}
		if o.Proxied {
			pubRaft, err := FreePortRange(ports)
			if err != nil {
				return nil, err
			}
			pubHTTP, err := FreePortRange(1)
			if err != nil {
				return nil, err
			}
			n.held = append(n.held, portSpan{pubRaft, ports}, portSpan{pubHTTP, 1})
			n.PeerRaftAddr = fmt.Sprintf("127.0.0.1:%d", pubRaft)
			n.PeerHTTPAddr = fmt.Sprintf("127.0.0.1:%d", pubHTTP)
		}
		if o.Groups > 0 {
			n.Env["QUEEN_RAFT_GROUPS"] = strconv.Itoa(o.Groups)
		}
		for k, v := range o.Env {
			n.Env[k] = v
		}
		for k, v := range o.NodeEnv[i] {
			n.Env[k] = v
		}
		c.Nodes = append(c.Nodes, n)
		c.lastID = i
		if o.PeersWithoutHTTP {
			peers = append(peers, fmt.Sprintf("%d=%s", i, n.PeerRaftAddr))
		} else {
			peers = append(peers, fmt.Sprintf("%d=%s/%s", i, n.PeerRaftAddr, n.PeerHTTPAddr))
		}
	}
	if o.Nodes > 1 {
		c.peers = strings.Join(peers, ",")
	}
	if o.Proxied {
		nw, err := newNetwork(c.Nodes, ports)
		if err != nil {
			return nil, err
		}
		c.Net = nw
	}
	return c, nil
}

// StartAll starts every node.
func (c *Cluster) StartAll() error {
	for _, n := range c.Nodes {
		if err := c.Start(n); err != nil {
			return err
		}
	}
	return nil
}

// Start starts (or restarts) one node with its data dir and ports.
func (c *Cluster) Start(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		select {
		case <-n.exited: // it died on its own (a crash): start it again
			n.cmd = nil
		default:
			return fmt.Errorf("harness: node %d already running", n.ID)
		}
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return err
	}
	_, httpPort, _ := net.SplitHostPort(n.HTTPAddr)
	env := append(os.Environ(),
		"PORT="+httpPort,
		"QUEEN_BIND_ADDR=127.0.0.1",
		"QUEEN_RAFT_DIR="+filepath.Join(n.Dir, "data"),
		"QUEEN_RAFT_LISTEN="+n.RaftAddr,
		"QUEEN_RAFT_NODE_ID="+strconv.Itoa(n.ID),
		"QUEEN_KAFKA_ADDR="+n.KafkaAddr,
		"QUEEN_KAFKA_ADVERTISED_ADDR="+n.KafkaAddr,
		"QUEEN_RAFT_RTT_MS=20",
		"QUEEN_STMT_TIMEOUT_MS=15000",
		"QUEEN_SHUTDOWN_GRACE_MS=5000",
	)
	if c.peers != "" {
		env = append(env, "QUEEN_RAFT_PEERS="+c.peers)
	}
	for k, v := range n.Env {
		env = append(env, k+"="+v)
	}
	n.logPath = filepath.Join(n.Dir, "queen.log")
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(n.bin)
	cmd.Env = env
	cmd.Dir = n.Dir // keeps stray files (dragonboat settings) out of the repo
	cmd.Stdout, cmd.Stderr = logf, logf
	// The node dies with the process that started it, so a test that is
	// killed (timeout, panic) leaves no queen behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("harness: start node %d: %w", n.ID, err)
	}
	n.cmd = cmd
	n.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		logf.Close()
		n.mu.Lock()
		n.exitCode = cmd.ProcessState.ExitCode()
		n.mu.Unlock()
		close(exited)
	}(cmd, n.exited)
	return nil
}

// Kill sends SIGKILL and waits for the process to be gone.
func (n *Node) Kill() { n.signal(syscall.SIGKILL, 10*time.Second) }

// Stop sends SIGTERM and waits up to 30 s, then SIGKILLs.
func (n *Node) Stop() {
	if !n.signal(syscall.SIGTERM, 30*time.Second) {
		n.Kill()
	}
}

func (n *Node) signal(sig syscall.Signal, wait time.Duration) bool {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return true
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(wait):
		return false
	}
	n.mu.Lock()
	n.cmd = nil
	n.mu.Unlock()
	return true
}

// ExitCode is the exit code of the last process run (-1 if killed by a
// signal).
func (n *Node) ExitCode() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exitCode
}

// Terminate sends SIGTERM and reports whether the process exited within
// wait.
func (n *Node) Terminate(wait time.Duration) bool { return n.signal(syscall.SIGTERM, wait) }

// Pid is the running process's id, 0 when it is not running.
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether the process is alive.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// StopAll stops every node (SIGTERM, then SIGKILL).
func (c *Cluster) StopAll() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func(n *Node) { defer wg.Done(); n.Stop() }(n)
	}
	wg.Wait()
}

// Close stops every node, then the proxies of a proxied cluster, and gives
// their ports back for later clusters of this process.
func (c *Cluster) Close() {
	c.StopAll()
	if c.Net != nil {
		c.Net.Close()
	}
	for _, n := range c.Nodes {
		releasePorts(n.held)
		n.held = nil
	}
}

// URL is the node's HTTP base URL.
func (n *Node) URL() string { return "http://" + n.HTTPAddr }

// Log returns the node's log so far.
func (n *Node) Log() string {
	b, _ := os.ReadFile(n.logPath)
	return string(b)
}

// WaitHealthy polls /health until it answers 200 or ctx ends.
func (n *Node) WaitHealthy(ctx context.Context) error {
	return Poll(ctx, 20*time.Millisecond, func() (bool, error) {
		if !n.Running() {
			return false, fmt.Errorf("node %d exited; log:\n%s", n.ID, tail(n.Log(), 3000))
		}
		resp, err := http.Get(n.URL() + "/health")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// WaitAllHealthy waits for every running node.
func (c *Cluster) WaitAllHealthy(ctx context.Context) error {
	for _, n := range c.Nodes {
		if err := n.WaitHealthy(ctx); err != nil {
			return fmt.Errorf("node %d: %w", n.ID, err)
		}
	}
	return nil
}

// Poll calls f every interval until it reports done, returns an error, or
// ctx ends (then the last state is reported as an error).
func Poll(ctx context.Context, interval time.Duration, f func() (bool, error)) error {
	for {
		done, err := f()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("harness: gave up waiting: %w", ctx.Err())
		case <-time.After(interval):
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// Tail returns the last n bytes of a node's log, for failure messages.
func (n *Node) Tail(size int) string { return tail(n.Log(), size) }

// Grep reports whether the node's log contains s.
func (n *Node) Grep(s string) bool { return bytes.Contains([]byte(n.Log()), []byte(s)) }

// newNode allocates node id's ports (raftPorts consecutive raft ports, one
// HTTP, one Kafka) and its data dir under baseDir; peers reach it directly
// unless a fault proxy is put in front.
func newNode(id int, bin, baseDir string, raftPorts int) (*Node, error) {
	raftPort, err := FreePortRange(raftPorts)
	if err != nil {
		return nil, err
	}
	httpPort, err := FreePortRange(1)
	if err != nil {
		return nil, err
	}
	kafkaPort, err := FreePortRange(1)
	if err != nil {
		return nil, err
	}
	n := &Node{
		ID: id, bin: bin,
		HTTPAddr:  fmt.Sprintf("127.0.0.1:%d", httpPort),
		RaftAddr:  fmt.Sprintf("127.0.0.1:%d", raftPort),
		KafkaAddr: fmt.Sprintf("127.0.0.1:%d", kafkaPort),
		Dir:       filepath.Join(baseDir, fmt.Sprintf("node%d", id)),
		Env:       map[string]string{},
		held:      []portSpan{{raftPort, raftPorts}, {httpPort, 1}, {kafkaPort, 1}},
	}
	n.PeerRaftAddr, n.PeerHTTPAddr = n.RaftAddr, n.HTTPAddr
	return n, nil
}
