// Package raftgroups owns the raft groups of this node and is the engine both
// front doors call (spec decision 1). Each group is one dragonboat NodeHost
// with its own listener (raft port + N), its own directory and one on-disk
// state machine (storage.Store); group 0 sits on the raft port itself.
//
// Writes are commands (package wire) proposed through a per-group
// group-commit loop; reads are served from the local store below its
// committed high-water mark, with a ReadIndex barrier when they must be
// linearizable. raftgroups never parses HTTP or Kafka and never decides
// queue semantics: that is storage's apply loop.
package raftgroups

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/plugin/tan"
	"github.com/lni/dragonboat/v4/raftio"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/queen-mq/queen/crypto/nodetls"
	"github.com/queen-mq/queen/raftgroups/clock"
	"github.com/queen-mq/queen/raftgroups/transport"
	"github.com/queen-mq/queen/storage"
)

// Peer is one voting member of the cluster.
type Peer struct {
	ID       uint64
	RaftAddr string // host:port of group 0; group N uses port + N
	HTTPAddr string
}

// Config configures this node's raft groups. cmd/queen fills it from the
// environment; nothing here reads the environment.
type Config struct {
	NodeID     uint64
	Peers      []Peer // every voter, this node included
	ListenAddr string // host:port group 0 listens on; group N listens on port + N
	Dir        string
	Groups     int
	Token      string
	// AcceptTokens are accepted from peers besides Token while the raft
	// token is rotated (QUEEN_RAFT_TOKEN_ACCEPT; docs/operations.md).
	AcceptTokens []string
	// TLS, when set, is TLS between nodes (QUEEN_RAFT_TLS_*): every
	// group's raft listener serves TLS only and calls to peers use it.
	TLS *nodetls.Config
	// LinkToken, when set, serves a standby's reads (/link/v1/) on every
	// group's raft listener behind it (QUEEN_LINK_TOKEN; link_server.go).
	LinkToken string
	// StandbyOf, when set, makes this cluster a standby following the
	// source cluster whose nodes' raft base addresses it lists
	// (QUEEN_STANDBY_OF; standby.go). linkSource replaces the link
	// client in tests.
	StandbyOf  []string
	linkSource linkSource
	// Join makes a node with no raft state join a running cluster as a
	// learner of every group (QUEEN_RAFT_JOIN) instead of bootstrapping
	// one from Peers; an operator adds it first (AddLearner) and promotes
	// it once caught up. A node with raft state ignores it (a restart).
	Join bool
	// ForceRecover rebuilds every group as a one-voter cluster of this node
	// from its own applied state (QUEEN_RAFT_FORCE_RECOVER; recover.go),
	// for when a majority is gone for good.
	ForceRecover bool
	// Placement is the placement rule in force (tenancy.Placement.Spec),
	// recorded in Dir at the first boot: a later boot with another rule
	// is refused, since data placed by the old one would not be found.
	Placement string

	RTTMillisecond     uint64
	ElectionRTT        uint64
	HeartbeatRTT       uint64
	SnapshotEntries    uint64
	CompactionOverhead uint64
	SnapshotBytes      uint64 // applied command bytes that trigger a snapshot (snapshots.go)

	MaxEntryBytes  int           // largest entry, and so request, accepted (QUEEN_RAFT_ENTRY_MAX_BYTES, at most MaxEntryLimit)
	MaxBatchBytes  int           // group commit stops gathering at this entry size
	AttemptTimeout time.Duration // one proposal attempt
	RequestTimeout time.Duration // a write's whole budget (QUEEN_STMT_TIMEOUT_MS)
	MaxInFlight    int           // entries in flight per group
	// MaxInFlightBytes bounds the bytes of those entries (one entry
	// always goes): QUEEN_RAFT_INFLIGHT_BYTES.
	MaxInFlightBytes int
	QueueDepth       int // requests waiting per group before ErrOverloaded

	ReadyQuorum time.Duration // the leader must have heard a quorum this recently
	ReadyLag    uint64        // applied may trail commit by this many entries

	TraceRetention time.Duration // QUEEN_RAFT_TRACE_RETENTION_S
	// PartitionCleanup removes partitions empty and idle that long
	// (PARTITION_CLEANUP_DAYS; 0: QUEEN_PARTITION_CLEANUP_ENABLED is off).
	PartitionCleanup time.Duration
	// PartitionCache is how many partitions of HTTP queues each group
	// keeps in memory (QUEEN_PARTITION_CACHE; 0: every one).
	PartitionCache int

	// MaxClockSkew bounds how far this node's clock, which stamps every
	// entry, may be from the cluster's (QUEEN_RAFT_MAX_CLOCK_SKEW_MS;
	// clocksync.go). ClockTestOffset offsets this node's wall clock, for
	// tests only (QUEEN_TEST_CLOCK_OFFSET_MS). ClockSyncEvery is how often
	// the clock is compared with the peers' (1 s when zero).
	MaxClockSkew    time.Duration
	ClockTestOffset time.Duration
	ClockSyncEvery  time.Duration

	// DiskHighPct and DiskLowPct are the storage_full watermarks
	// (QUEEN_RAFT_DISK_HIGH_PCT / _LOW_PCT); DiskHighPct of 0 or 100 turns
	// the check off.
	DiskHighPct, DiskLowPct float64
	// DiskUsage is a test hook replacing statfs on Dir.
	DiskUsage func(dir string) (float64, error)

	// SegmentBytes is the size of the store's record segments (256 MiB
	// when zero); RelocateEvery is how often a leader looks for a mostly
	// dead segment range to relocate (30 s when zero). Tests shrink both.
	SegmentBytes  int64
	RelocateEvery time.Duration
	// MemoryBudget is the node's memory budget (QUEEN_MEMORY_LIMIT_MB, in
	// bytes; 0: none): each group's block cache and memtables take a
	// share of it (StoreMemory).
	MemoryBudget int64

	Logger *slog.Logger
	// DragonboatLogLevel is the least level of dragonboat's own lines that
	// reach Logger (logger.go maps dragonboat's levels first): cmd/queen
	// sets WARN unless LOG_LEVEL=debug, so a healthy node does not narrate
	// its elections.
	DragonboatLogLevel slog.Level
	// Metrics receives each group's series (metrics.go); cmd/queen passes
	// the set /metrics/prometheus writes. A private set when nil.
	Metrics *metrics.Set
	// CrashAt names a fault point where this process kills itself with
	// SIGKILL (QUEEN_FAULT_CRASH_AT), so end-to-end tests can stop a real
	// node between two steps of a protocol. Empty in production.
	CrashAt string
	// Drop is a test hook: a non-nil error for (group, target) drops raft
	// traffic to that peer as if it were unreachable.
	Drop func(group int, target string) error
	// BeforeApply is a test hook called before each batch of group's
	// entries is applied: blocking in it holds this replica's applies
	// back while its raft log keeps up, as a slow or restarting replica's.
	BeforeApply func(group int)
	// HoldFormat stops this node raising the formats of the groups it
	// leads (QUEEN_FORMAT_AUTO_RAISE=false; format.go): by default each
	// group's leader raises its format once every member runs a build
	// that knows it.
	HoldFormat bool
	// NewestFormat, a test setting (QUEEN_TEST_NEWEST_FORMAT), makes this
	// node apply formats only up to it, as an older build would: zero is
	// the build's own (wire.NewestFormat).
	NewestFormat uint32
	// ApplyTestDelay holds every batch of entries back that long before
	// this replica applies it (QUEEN_TEST_APPLY_DELAY_MS): a node that
	// trails its groups' leaders, for the end-to-end tests of
	// read-your-writes across nodes. Zero in production.
	ApplyTestDelay time.Duration
}

// DefaultGroups is how many raft groups a node of a cluster of nodes runs
// on a machine with cpus cores unless told otherwise: one per core, at
// least two, rounded up to a multiple of the cluster size so every node
// leads as many groups, at most sixteen. Each group has its own raft log,
// fsync stream, step worker and apply loop, so one topic's partitions
// spread over them use every core and, with leaders spread, every node.
// More groups than cores measured worse: on 2 cores, 6 groups on 3 nodes
// had twice the produce p99 of 3 groups at the same CPU per record, and 4
// groups on one node 7% more throughput but more CPU per record at a fixed
// rate than 2 (docs/placement.md).
func DefaultGroups(nodes, cpus int) int {
	nodes = max(nodes, 1)
	g := max(cpus, 2)
	g = (g + nodes - 1) / nodes * nodes
	if g > 16 {
		g = max(16/nodes*nodes, nodes)
	}
	return g
}

func (c *Config) setDefaults() {
	if c.Metrics == nil {
		c.Metrics = metrics.NewSet()
	}
	if c.Groups <= 0 {
		c.Groups = 1
	}
	if c.RTTMillisecond == 0 {
		c.RTTMillisecond = 50
	}
	if c.HeartbeatRTT == 0 {
		c.HeartbeatRTT = 2
	}
	if c.ElectionRTT == 0 {
		c.ElectionRTT = 20
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = 20000
	}
	if c.SnapshotBytes == 0 {
		c.SnapshotBytes = 256 << 20
	}
	if c.CompactionOverhead == 0 {
		c.CompactionOverhead = c.SnapshotEntries / 2
	}
	if c.MaxEntryBytes <= 0 {
		c.MaxEntryBytes = 96 << 20
	}
	c.MaxEntryBytes = min(c.MaxEntryBytes, MaxEntryLimit)
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = DefaultGatherBytes
	}
	if c.AttemptTimeout <= 0 {
		c.AttemptTimeout = 3 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 8
	}
	if c.MaxInFlightBytes <= 0 {
		c.MaxInFlightBytes = InFlightBytes(c.MemoryBudget, c.Groups)
	}
	if c.QueueDepth <= 0 {
		c.QueueDepth = 4096
	}
	if c.ReadyQuorum <= 0 {
		c.ReadyQuorum = 5 * time.Second
	}
	if c.RelocateEvery <= 0 {
		c.RelocateEvery = 30 * time.Second
	}
	if c.ReadyLag == 0 {
		c.ReadyLag = 1000
	}
	if c.MaxClockSkew <= 0 {
		c.MaxClockSkew = 500 * time.Millisecond
	}
	if c.ClockSyncEvery <= 0 {
		c.ClockSyncEvery = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Host runs this node's replica of every raft group.
type Host struct {
	cfg     Config
	diskUse diskUseCache
	log     *slog.Logger
	groups  []*group
	stop    chan struct{}
	wg      sync.WaitGroup
	closed  atomic.Bool
	// closing orders goOwned's wg.Add before Close's wg.Wait.
	closing sync.Mutex
	disk    *diskGuard
	// clock stamps every entry this node proposes and is the "now" it
	// compares replicated times with (clocksync.go).
	clock *clock.Clock
	// stopped is cancelled with stop, for background proposals that must
	// not hold up a shutdown.
	stopped    context.Context
	cancelStop context.CancelFunc
	// forgets carries resolved cross-group decisions to drop
	// (engine_loops.go).
	forgets chan forgetReq
	// onLeader is told of every leader change, once the engine exists
	// (leader_epoch.go); it must not block.
	onLeader atomic.Pointer[func(group int, leader, term uint64)]
	// nodeRoutes serves, and nodeClient makes, node-to-node HTTP calls
	// over group 0's raft listener (nodecall.go).
	nodeRoutes nodeRoutes
	nodeClient *transport.NodeClient
	// changing counts the membership changes this node is running; no
	// leadership is moved meanwhile (leaders.go), so a transfer never
	// races a config change it would have to carry over.
	changing atomic.Int32
	// standby is the follow state of a standby node (standby.go); nil
	// on a node of a cluster that follows none.
	standby *standby
}

type group struct {
	n       int
	shardID uint64
	nh      *dragonboat.NodeHost
	store   *storage.Store
	tf      *transport.Factory
	prop    *proposer
	// view is the group's membership as last read (membership.go):
	// seeded from Peers at boot, refreshed every second and after changes.
	view     atomic.Pointer[memberView]
	quorumAt atomic.Int64 // unix ms of the last completed ReadIndex
	metrics  *groupMetrics
	// hadLeader is set once this replica has seen a leader: until then a
	// "no leader" update is the election every boot runs, not news.
	hadLeader atomic.Bool
}

// Start opens every group's store and NodeHost and joins (or bootstraps)
// the cluster. It returns once every replica has recovered its local state;
// a leader may still be in election (see Ready).
func Start(cfg Config) (*Host, error) {
	cfg.setDefaults()
	if err := checkPeers(&cfg); err != nil {
		return nil, err
	}
	installDragonboatLogger(cfg.Logger, cfg.DragonboatLogLevel)
	if _, err := os.Stat("dragonboat-soft-settings.json"); err == nil {
		cfg.Logger.Warn("raft: dragonboat-soft-settings.json in the working directory overrides raft defaults; remove it")
	}
	if err := checkLayout(cfg.Dir, cfg.Placement); err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg, log: cfg.Logger, stop: make(chan struct{})}
	h.stopped, h.cancelStop = context.WithCancel(context.Background())
	h.clock = clock.New(clock.Config{MaxSkew: cfg.MaxClockSkew, TestOffset: cfg.ClockTestOffset, Logger: cfg.Logger})
	h.nodeClient = transport.NewNodeClient(cfg.TLS, cfg.Token, cfg.RequestTimeout, transport.Timeouts{})
	h.nodeRoutes.host = h
	h.disk = &diskGuard{dir: cfg.Dir, high: cfg.DiskHighPct, low: cfg.DiskLowPct, usage: cfg.DiskUsage, log: cfg.Logger}
	if h.disk.usage == nil {
		h.disk.usage = statfsUsage
	}
	for n := 0; n < cfg.Groups; n++ {
		g, err := h.startGroup(n)
		if err != nil {
			h.closeGroups()
			return nil, err
		}
		h.groups = append(h.groups, g)
	}
	if err := h.initStandby(); err != nil {
		h.closeGroups()
		return nil, err
	}
	h.disk.check() // a node that boots on a full disk refuses data from its first request
	h.bootClock()
	h.wg.Add(9)
	if !cfg.HoldFormat {
		h.wg.Add(1)
		go h.every(formatEvery, h.raiseFormats)
	}
	go h.every(time.Second, h.refreshMembership)
	go h.registerSelfLoop()
	go h.every(h.cfg.ClockSyncEvery, h.syncClock)
	go h.every(h.cfg.RelocateEvery, h.unlessFollowing(h.relocateChunks))
	go h.every(snapshotCheckEvery, h.snapshotBySize)
	go h.every(diskCheckInterval, h.disk.check)
	go h.probeQuorum()
	go h.every(5*time.Second, h.balanceLeaders)
	go h.proposeTicks()
	h.startStandby()
	return h, nil
}

func checkPeers(cfg *Config) error {
	if len(cfg.Peers) == 0 {
		return errors.New("raftgroups: no peers (a single node lists itself)")
	}
	seen := map[uint64]bool{}
	self := false
	for _, p := range cfg.Peers {
		if p.ID == 0 || seen[p.ID] {
			return fmt.Errorf("raftgroups: peer id %d is zero or repeated", p.ID)
		}
		seen[p.ID] = true
		if _, err := addrWithOffset(p.RaftAddr, 0); err != nil {
			return fmt.Errorf("raftgroups: peer %d raft address: %w", p.ID, err)
		}
		self = self || p.ID == cfg.NodeID
	}
	if !self {
		return fmt.Errorf("raftgroups: node id %d is not among the peers", cfg.NodeID)
	}
	slices.SortFunc(cfg.Peers, func(a, b Peer) int { return int(a.ID) - int(b.ID) })
	return nil
}

// GroupDir is where group n keeps its raft log and store: the data dir
// itself for group 0, groups/g<n>/ for the others (spec §4.7).
func GroupDir(dir string, n int) string {
	if n == 0 {
		return dir
	}
	return filepath.Join(dir, "groups", "g"+strconv.Itoa(n))
}

func (h *Host) startGroup(n int) (*group, error) {
	cfg := &h.cfg
	dir := GroupDir(cfg.Dir, n)
	g := &group{n: n, shardID: uint64(n + 1), metrics: newGroupMetrics(cfg.Metrics, n)}
	seed := &memberView{voters: map[uint64]string{}, learners: map[uint64]string{}, removed: map[uint64]bool{}}
	var self string
	for _, p := range cfg.Peers {
		addr, _ := addrWithOffset(p.RaftAddr, n)
		seed.voters[p.ID] = addr
		if p.ID == cfg.NodeID {
			self = addr
		}
	}
	g.view.Store(seed)
	listen, err := addrWithOffset(cfg.ListenAddr, n)
	if err != nil {
		return nil, fmt.Errorf("raftgroups: QUEEN_RAFT_LISTEN: %w", err)
	}
	tcfg := transport.Config{Token: cfg.Token, AcceptTokens: cfg.AcceptTokens, TLS: cfg.TLS, Group: n, MaxBodyBytes: frameLimit(cfg.MaxEntryBytes), Logger: h.log}
	if cfg.Drop != nil {
		tcfg.Drop = func(target string) error { return cfg.Drop(n, target) }
	}
	if n == 0 {
		tcfg.Clock = h.clock.NowMs // peers compare their clocks with group 0's listener
		tcfg.Node = &h.nodeRoutes
	}
	linkSrc, linkSrv := h.linkHandler(g) // nil without QUEEN_LINK_TOKEN
	if linkSrv != nil {
		tcfg.LinkToken, tcfg.Link = cfg.LinkToken, linkSrv
	}
	g.tf = transport.NewFactory(tcfg)
	// The raft log is tan, dragonboat's append-only log: each entry is
	// written once and whole files are dropped once a snapshot lets the log
	// be compacted. The pebble LogDB also flushed and compacted every entry,
	// which under Kafka load cost more than everything else (measured:
	// one node 89k -> 169k Kafka records/s, HTTP push 61k -> 100k msg/s).
	// tan keeps 16 encode buffers of KVWriteBufferSize and grows them for
	// larger entries, and has no memtable to report busy, so entries up to
	// QUEEN_RAFT_ENTRY_MAX_BYTES need no large write buffer here.
	logdb := config.GetTinyMemLogDBConfig()
	logdb.Shards = 1
	logdb.KVWriteBufferSize = 1 << 20
	nhc := config.NodeHostConfig{
		DeploymentID:        0x5155454e, // "QUEN": fixed per product, not a secret
		NodeHostDir:         filepath.Join(dir, "raft"),
		RTTMillisecond:      cfg.RTTMillisecond,
		RaftAddress:         self,
		ListenAddress:       listen,
		MaxSendQueueSize:    128 << 20,
		MaxReceiveQueueSize: 128 << 20,
		RaftEventListener:   leaderLogger{log: h.log, group: g, host: h},
		SystemEventListener: snapshotCounter{m: g.metrics},
		Expert: config.ExpertConfig{
			TransportFactory: g.tf,
			LogDBFactory:     tan.Factory,
			Engine:           config.EngineConfig{ExecShards: 1, CommitShards: 1, ApplyShards: 1, SnapshotShards: 2, CloseShards: 1},
			LogDB:            logdb,
		},
	}
	if cfg.ForceRecover {
		if err := h.forceRecover(n, nhc, self, dir); err != nil {
			return nil, err
		}
		// The recovered group has this node as its only voter.
		g.view.Store(&memberView{voters: map[uint64]string{cfg.NodeID: self}, learners: map[uint64]string{}, removed: map[uint64]bool{}})
	}
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		return nil, fmt.Errorf("raftgroups: group %d node host: %w", n, err)
	}
	g.nh = nh
	storeDir := filepath.Join(dir, "store")
	if err := storage.CheckFormat(storeDir, n, cfg.NewestFormat); err != nil {
		nh.Close()
		return nil, err // a build too old for the group: before raft opens the store and panics on it
	}
	g.store = h.newStore(n, storeDir)
	fresh := !nh.HasNodeInfo(g.shardID, cfg.NodeID)
	members := map[uint64]dragonboat.Target{}
	join := fresh && cfg.Join
	if fresh {
		if _, err := os.Stat(filepath.Join(storeDir, "CURRENT")); err == nil {
			nh.Close()
			return nil, fmt.Errorf("raftgroups: group %d has a store in %s but no raft state: the raft directory was lost; "+
				"remove this node from the cluster and rejoin it with a new node id", n, storeDir)
		}
		for id, addr := range seed.voters {
			members[id] = addr
		}
	}
	if join {
		// Dragonboat joins with no initial members; the leader sends the
		// log (or a snapshot) once this replica was added as non-voting.
		members = nil
		g.view.Store(&memberView{voters: map[uint64]string{}, learners: map[uint64]string{cfg.NodeID: self}, removed: map[uint64]bool{}})
	}
	rc := h.replicaConfig(g.shardID)
	rc.IsNonVoting = join
	var machine sm.IOnDiskStateMachine = g.store
	switch {
	case cfg.BeforeApply != nil:
		machine = heldStore{Store: g.store, before: func() { cfg.BeforeApply(n) }}
	case cfg.ApplyTestDelay > 0:
		machine = heldStore{Store: g.store, before: func() { time.Sleep(cfg.ApplyTestDelay) }}
	}
	if linkSrc != nil {
		machine = tappedStore{IOnDiskStateMachine: machine, st: g.store, tail: linkSrc.tail} // link_tail.go
	}
	create := func(shardID, replicaID uint64) sm.IOnDiskStateMachine { return machine }
	if err := nh.StartOnDiskReplica(members, join, create, rc); err != nil {
		nh.Close()
		return nil, fmt.Errorf("raftgroups: group %d start replica: %w", n, err)
	}
	g.prop = newProposer(nh, g.shardID, n, cfg, h.disk, h.clock.NowMs)
	g.prop.latency = g.metrics.proposal
	g.prop.start()
	if linkSrc != nil {
		linkSrc.ready.Store(true)
	}
	h.log.Info("boot: raft group started", "group", n, "raft", self, "listen", listen, "bootstrap", fresh && !join,
		"join", join, "members", len(members), "applied", g.store.Applied())
	return g, nil
}

// newStore is group n's state machine in storeDir (opened by dragonboat).
func (h *Host) newStore(n int, storeDir string) *storage.Store {
	cache, memtable := StoreMemory(h.cfg.MemoryBudget, h.cfg.Groups)
	return storage.New(storage.Config{Dir: storeDir, Logger: h.log.With("group", n), Group: n,
		TraceRetentionMs: h.cfg.TraceRetention.Milliseconds(), SegmentBytes: h.cfg.SegmentBytes,
		PartitionCleanupMs: h.cfg.PartitionCleanup.Milliseconds(), PartitionCache: h.cfg.PartitionCache,
		CacheBytes: cache, MemTableBytes: memtable, NewestFormat: h.cfg.NewestFormat})
}

// StoreMemory is what one group's store may hold in memory under a node
// budget shared by groups raft groups: a block cache and memtables of an
// eighth of the budget each, over the groups, within [8 MiB, 64 MiB] and
// [4 MiB, 64 MiB]: in the steady state a store holds its cache and one
// memtable, a quarter of the budget for all groups together, and the rest
// is left to the raft logs, requests in flight and the partitions' state
// (a store holds up to four memtables only while its flushes lag). No
// budget: 64 MiB each.
func StoreMemory(budget int64, groups int) (cacheBytes int64, memtableBytes int) {
	if budget <= 0 || groups <= 0 {
		return 64 << 20, 64 << 20
	}
	share := budget / 8 / int64(groups)
	return min(max(share, 8<<20), 64<<20), int(min(max(share, 4<<20), 64<<20))
}

// InFlightBytes is a group's MaxInFlightBytes for a node's memory budget
// over its groups: a thirty-second of each group's share, within [1 MiB,
// 16 MiB]; no budget, 16 MiB. Measured on one node, 2 groups, 1 GiB
// (docs/benchmarks.md, "In-flight bytes"): 16 MiB per group produced the
// most, 32 MiB filled the heap to the budget and halved throughput, 4 MiB
// left the disk idle between entries.
func InFlightBytes(budget int64, groups int) int {
	if budget <= 0 || groups <= 0 {
		return 16 << 20
	}
	return int(min(max(budget/int64(groups)/32, 1<<20), 16<<20))
}

// GoMemoryLimit is the Go runtime's share of a node's memory budget: the
// stores' block caches and memtables are allocated outside the Go heap
// (pebble's manual allocator), so the runtime gets what their steady state
// leaves, less processReserve. Leaving room for a second memtable per
// store as well (640 MiB of 1 GiB with two groups) was tried and measured
// worse: on three nodes with a million partitions the collector then ran
// nearly without pause, boots took 13-37 s instead of 11-13 and paged
// views 30-44 ms instead of 4-5, for a boot peak still at the budget.
// 0: no budget, no limit.
func GoMemoryLimit(budget int64, groups int) int64 {
	if budget <= 0 {
		return 0
	}
	cache, memtable := StoreMemory(budget, groups)
	return max(budget-int64(max(groups, 1))*(cache+int64(memtable))-processReserve, budget/4)
}

// processReserve is what a node's resident memory holds that neither the
// runtime's limit nor the stores' caches count: the executable's own pages
// (about 32 MiB of a 47 MB binary once serving). Without it a boot after a
// crash, whose walk fills the heap to the runtime's limit, peaked at 1,031
// MiB under a 1 GiB budget (ten million partitions).
const processReserve = 48 << 20

// replicaConfig is the dragonboat configuration of this node's replica of
// shard shardID.
func (h *Host) replicaConfig(shardID uint64) config.Config {
	cfg := &h.cfg
	return config.Config{
		ShardID:             shardID,
		ReplicaID:           cfg.NodeID,
		ElectionRTT:         cfg.ElectionRTT,
		HeartbeatRTT:        cfg.HeartbeatRTT,
		CheckQuorum:         true,
		PreVote:             true,
		OrderedConfigChange: true,
		SnapshotEntries:     cfg.SnapshotEntries,
		CompactionOverhead:  cfg.CompactionOverhead,
		MaxInMemLogSize:     inMemLogBytes,
		WaitReady:           true,
	}
}

// Sizes dragonboat imposes, which the entry limit and the transport's frame
// limit must agree with.
const (
	// inMemLogBytes is each replica's MaxInMemLogSize: dragonboat refuses
	// a proposal larger than it (ErrPayloadTooBig).
	inMemLogBytes = 256 << 20
	// MaxEntryLimit is the largest QUEEN_RAFT_ENTRY_MAX_BYTES accepted:
	// dragonboat's proposal bound less room for the entry's own fields.
	MaxEntryLimit = inMemLogBytes - 1<<20
	// DefaultGatherBytes is where group commit stops adding requests to
	// an entry (QUEEN_RAFT_ENTRY_GATHER_BYTES).
	DefaultGatherBytes = 4 << 20
	// dragonboatBatchBytes is dragonboat's MaxMessageBatchSize: it puts up
	// to this many bytes of entries in one message (catching up a
	// follower) and of messages in one batch, and sends a single larger
	// entry alone.
	dragonboatBatchBytes = 64 << 20
	// frameSlack covers what a frame carries besides entry bytes (message
	// and entry headers, addresses).
	frameSlack = 1 << 20
)

// frameLimit is the largest message batch the transport sends or accepts
// for an entry limit: a single entry of that size, or a full dragonboat
// batch of smaller ones, whichever is larger. With the entry limit alone a
// follower catching up on small entries (64 MiB in one message) was refused
// again and again and never caught up.
func frameLimit(entryLimit int) int64 {
	return int64(max(entryLimit, dragonboatBatchBytes) + frameSlack)
}

// addrWithOffset returns host:(port+n).
func addrWithOffset(addr string, n int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%q: %w", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p+n > 65535 {
		return "", fmt.Errorf("%q: bad port", addr)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+n)), nil
}

// Groups is the number of raft groups.
func (h *Host) Groups() int { return len(h.groups) }

// NodeID is this node's replica id in every group.
func (h *Host) NodeID() uint64 { return h.cfg.NodeID }

// HeardFrom reports whether node id sent this node a raft message, or
// answered one, in any group within the last d. This node always counts.
// A follower hears only from the leaders of its groups, so a peer that
// leads nothing may go unheard by another follower while alive.
func (h *Host) HeardFrom(id uint64, d time.Duration) bool {
	if id == h.cfg.NodeID {
		return true
	}
	since := time.Now().Add(-d)
	for _, g := range h.groups {
		if addr := g.addr(id); addr != "" && g.tf.Transport().LastContact(addr).After(since) {
			return true
		}
	}
	return false
}

// ElectionTimeout is how long a follower waits for its leader before it
// starts an election.
func (h *Host) ElectionTimeout() time.Duration {
	return time.Duration(h.cfg.RTTMillisecond*h.cfg.ElectionRTT) * time.Millisecond
}

// Store is group n's local state machine, for reads.
func (h *Host) Store(n int) *storage.Store { return h.groups[n].store }

// Transport is group n's raft transport, for its counters.
func (h *Host) Transport(n int) *transport.Transport { return h.groups[n].tf.Transport() }

// Close hands leadership of every group this node leads to a peer, then
// stops proposals, NodeHosts and stores, each exactly once.
func (h *Host) Close() {
	h.closing.Lock()
	already := h.closed.Swap(true)
	h.closing.Unlock()
	if already {
		return
	}
	close(h.stop)
	h.cancelStop()
	h.wg.Wait()
	h.HandOff(3 * time.Second)
	h.closeGroups()
	h.nodeClient.Close()
}

// goOwned runs f in a goroutine Close waits for, after it cancels
// h.stopped: f must return once h.stopped is done. It answers false, and
// runs nothing, once the host is closing.
func (h *Host) goOwned(f func()) bool {
	h.closing.Lock()
	defer h.closing.Unlock()
	if h.closed.Load() {
		return false
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		f()
	}()
	return true
}

func (h *Host) closeGroups() {
	for _, g := range h.groups {
		if g.prop != nil {
			g.prop.close()
		}
		g.nh.Close()
		if err := g.store.Close(); err != nil {
			h.log.Warn("raft: closing store", "group", g.n, "err", err)
		}
	}
}

// leaderLogger logs leadership changes and tells the engine; dragonboat
// calls it from one goroutine per NodeHost, so nothing in it may block.
type leaderLogger struct {
	log   *slog.Logger
	group *group
	host  *Host
}

func (l leaderLogger) LeaderUpdated(info raftio.LeaderInfo) {
	level, msg := slog.LevelInfo, "raft: leader changed"
	switch {
	case info.LeaderID != 0 && !l.group.hadLeader.Swap(true):
		msg = "boot: raft group has a leader" // its first since this node started
	case info.LeaderID == 0 && !l.group.hadLeader.Load():
		level = slog.LevelDebug // the boot election, not a lost leader
	}
	l.log.Log(context.Background(), level, msg, "group", l.group.n, "leader", info.LeaderID, "term", info.Term)
	if f := l.host.onLeader.Load(); f != nil {
		(*f)(l.group.n, info.LeaderID, info.Term)
	}
}
