// Package storage owns one raft group's replicated state: queues with their
// config, partitions with their permanent indexes, the append-only message
// logs, transaction-id indexes for dedup and acks, consumer-group cursors and
// leases. Store is the group's dragonboat IOnDiskStateMachine, kept in a
// pebble database under the group's directory.
//
// The apply loop (Update) is deterministic: it reads no clock, no random
// source and parses no JSON; everything it needs, including "now", is in the
// entry it applies. Readers (Kafka fetch, HTTP pop payloads, views) read the
// store concurrently and only ever see records below the committed
// high-water mark, which never change.
//
// This package never talks to raft, the network or clients: raftgroups
// proposes commands and calls the read methods; wire defines the bytes.
package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/queen-mq/queen/wire"
)

// Config says where a group's store lives and how much memory it may use.
type Config struct {
	Dir           string // the group's store directory (holds CURRENT and sm-N/)
	CacheBytes    int64
	MemTableBytes int
	// SegmentBytes is the size at which a segment of chunk records is
	// closed and the next begun (segments.go); 256 MiB when zero.
	SegmentBytes int64
	// TraceRetentionMs is how long trace events are kept
	// (QUEEN_RAFT_TRACE_RETENTION_S; DefaultTraceRetentionMs when zero).
	TraceRetentionMs int64
	// PartitionCache is how many of its HTTP queues' partitions the
	// group keeps in memory (QUEEN_PARTITION_CACHE); the others are read
	// back from the store when needed (partcache.go). 0 keeps every one;
	// New makes a negative value DefaultPartitionCache.
	PartitionCache int
	// PartitionCleanupMs removes partitions empty and idle that long
	// (PARTITION_CLEANUP_DAYS, QUEEN_PARTITION_CLEANUP_ENABLED; 0: never).
	// Only a leader's setting counts: its ticks carry it (cleanup.go).
	PartitionCleanupMs int64
	// NewestFormat, for tests, makes the store apply formats only up to it
	// (wire.NewestFormat when zero): a build that old.
	NewestFormat uint32
	// Group is the raft group this store is the state machine of: ids it
	// hands out (partitions, dead-letter rows, producers) carry it.
	Group  int
	Logger *slog.Logger
}

// Change tells listeners which queues an applied batch touched, so long
// polls waiting on them can look again.
type Change struct {
	Tenant wire.ID
	Queue  string
}

// Store is one group's state machine.
type Store struct {
	cfg Config
	log *slog.Logger

	// dbMu guards the database handle, which RecoverFromSnapshot replaces;
	// readers hold it for reading while they iterate.
	dbMu  sync.RWMutex
	db    *pebble.DB
	dbDir string
	segs  *segments // the chunk records of db's generation (segments.go)
	// linkGate keeps db open under a standby's link copy (link_snapshot.go).
	linkGate linkGate
	// relocCursor is the last segment SparseRange measured (relocate.go).
	relocCursor atomic.Uint64
	// hasTxns: some partition has Kafka transaction bookkeeping
	// (kafka_txn_marks.go), so readers of a partition must look it up.
	hasTxns atomic.Bool

	// mu guards the in-memory model below. Update holds it for writing while
	// it applies a batch; readers hold it for reading to resolve names.
	mu         sync.RWMutex
	queues     map[queueKeyT]*queueState
	queuesByID map[uint64]*queueState
	parts      map[uint64]*partState // in memory (partcache.go)
	cache      partCache
	leases     map[wire.ID]leaseRef
	counters   counters
	clockMs    int64
	// format is the group's active format (cluster_format.go): apply
	// reads it, and readers outside the apply loop too.
	format    atomic.Uint32
	kvVersion uint64 // last KV version handed out (keyKVVersion)
	traceSeq  uint64 // last trace event sequence (keyTraceSeq)
	// timed indexes the queues whose options need time-driven work and
	// sweeps holds each sweeper's progress (sweep.go); hasTxnDone says
	// transaction results may be stored (apply_txn.go).
	timed      map[uint64]*queueState
	sweeps     map[string]*sweepState
	hasTxnDone bool
	// retried maps the ids of proposals a retry of which was applied to
	// their stamps, and hasReplies says replies may be kept (retries.go).
	retried    map[uint64]int64
	hasReplies bool
	kafka      kafkaState // Kafka producers, transactions, topic configs, nodes
	// moved holds the partitions this group sealed or gave away to
	// another group (move.go), by queue and index.
	moved     map[moveRef]*movedPart
	movedPIDs map[uint64]bool // their ids: true while sealed
	// xprep holds the prepared parts of cross-group transactions and
	// pinned what they pin (xtxn.go); xAborts says abort decisions may be
	// stored.
	xprep   map[wire.ID]*xPrepared
	pinned  pins
	xAborts bool

	applied atomic.Uint64
	closed  atomic.Bool
	// link is the group's standby link state (link_apply.go).
	link atomic.Pointer[LinkState]
	// loadedFrom says how the last load rebuilt memory: "load image" or
	// "walk" (load.go).
	loadedFrom string
	diverged   atomic.Bool   // an apply failed: memory is ahead of the store, so Close writes no load image
	recovered  atomic.Uint64 // snapshots installed from the leader

	listenMu sync.Mutex
	listener func([]Change)

	// corrupt counts chunks refused because their bytes failed their
	// checksum (segments.go).
	corrupt corruption

	// appliedBytes counts the command bytes applied since Open; syncedBytes
	// and syncedIndex are where it and the applied index stood at the last
	// Sync, so the host can ask for a snapshot by volume (SinceSync).
	appliedBytes atomic.Uint64
	syncedBytes  atomic.Uint64
	syncedIndex  atomic.Uint64

	// answered remembers the transaction ids of the leases this node's
	// pops answered lately, for their acks (ack_resolve.go).
	answered leaseTxnCache

	// viewHook is a seam for tests, called by AllQueues between the queues
	// it copies.
	viewHook func()
}

type leaseRef struct {
	part  *partState
	group string
	more  []leaseRef // further holders of a shared lease (lease_index.go)
}

type counters struct {
	nextQueueID uint64
	nextPartID  uint64
	nextDLQID   uint64
	// nextChunkSeq numbers stored chunks group-wide (chunks.go).
	nextChunkSeq uint64
}

var _ sm.IOnDiskStateMachine = (*Store)(nil)

// New returns a Store that opens its database when dragonboat calls Open.
func New(cfg Config) *Store {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = 64 << 20
	}
	if cfg.MemTableBytes <= 0 {
		cfg.MemTableBytes = 64 << 20
	}
	if cfg.PartitionCache < 0 {
		cfg.PartitionCache = DefaultPartitionCache
	}
	if cfg.TraceRetentionMs <= 0 {
		cfg.TraceRetentionMs = DefaultTraceRetentionMs
	}
	return &Store{cfg: cfg, log: cfg.Logger}
}

// OnChange registers the function called (outside every lock) after each
// applied batch with the queues it touched.
func (s *Store) OnChange(f func([]Change)) {
	s.listenMu.Lock()
	s.listener = f
	s.listenMu.Unlock()
}

// SnapshotsRecovered counts snapshots this store was rebuilt from.
func (s *Store) SnapshotsRecovered() uint64 { return s.recovered.Load() }

// Applied is the raft index of the last applied entry.
func (s *Store) Applied() uint64 { return s.applied.Load() }

// Open opens (or creates) the database and loads the in-memory model. It
// returns the raft index whose effects are in the store, so dragonboat
// replays only what came after.
func (s *Store) Open(stopc <-chan struct{}) (uint64, error) {
	if err := os.MkdirAll(s.cfg.Dir, 0o755); err != nil {
		return 0, fmt.Errorf("storage: create %s: %w", s.cfg.Dir, err)
	}
	name, err := readCurrent(s.cfg.Dir)
	if err != nil {
		return 0, err
	}
	if name == "" {
		name = "sm-1"
		if err := writeCurrent(s.cfg.Dir, name); err != nil {
			return 0, err
		}
	}
	s.removeStaleGenerations(name)
	if err := s.openDB(filepath.Join(s.cfg.Dir, name)); err != nil {
		return 0, err
	}
	select {
	case <-stopc:
		return 0, sm.ErrOpenStopped
	default:
	}
	s.syncedIndex.Store(s.applied.Load())
	return s.applied.Load(), nil
}

func (s *Store) openDB(dir string) error {
	cache := pebble.NewCache(s.cfg.CacheBytes)
	defer cache.Unref()
	// Bloom filters let a lookup that misses (a new transaction id, the
	// common case of dedup) skip reading data blocks.
	levels := make([]pebble.LevelOptions, 7)
	for i := range levels {
		levels[i] = pebble.LevelOptions{FilterPolicy: bloom.FilterPolicy(10), FilterType: pebble.TableFilter}
	}
	opts := &pebble.Options{
		Levels:                      levels,
		Cache:                       cache,
		MemTableSize:                s.cfg.MemTableBytes,
		MemTableStopWritesThreshold: 4,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       32,
		LBaseMaxBytes:               256 << 20,
		MaxConcurrentCompactions:    func() int { return 2 },
		BytesPerSync:                1 << 20,
		Logger:                      pebbleLogger{s.log},
		// No WAL: the raft log is this store's write-ahead log. After a
		// crash the store is its last flushed memtable, a prefix of the
		// applied entries that carries its own applied index, and
		// dragonboat replays the rest from the raft log, which it never
		// compacts past an index Sync (a flush) made durable here.
		DisableWAL: true,
	}
	// A memtable about to be flushed may point at segment bytes still in
	// the page cache: they go to disk first (segments.go).
	var flushing atomic.Pointer[segments]
	opts.EventListener = pebble.EventListener{FlushBegin: func(pebble.FlushInfo) {
		if sg := flushing.Load(); sg != nil {
			if err := sg.sync(); err != nil {
				// A memtable must not outlive the records it points at;
				// crash and replay from what is durable instead.
				s.log.Error("storage: segment fsync failed before a flush", "err", err)
				panic(err)
			}
		}
	}}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return fmt.Errorf("storage: open %s: %w", dir, err)
	}
	if err := checkFormat(db, dir); err != nil {
		_ = db.Close()
		return err
	}
	// Earlier builds wrote a record per lease (id -> partition, group)
	// that nothing read: a lease lives in its cursor's record, and load
	// finds leases there. Writing it and its tombstone on every pop and
	// ack cost the leased path two store writes a partition for nothing.
	if err := db.DeleteRange([]byte{tagLease}, []byte{tagLease + 1}, pebble.NoSync); err != nil {
		_ = db.Close()
		return fmt.Errorf("storage: drop the lease records of %s: %w", dir, err)
	}
	s.db, s.dbDir = db, dir
	began := time.Now()
	if err := s.load(); err != nil {
		_ = db.Close()
		s.db = nil
		return err
	}
	s.log.Info("boot: store loaded", "from", s.loadedFrom, "queues", len(s.queuesByID),
		"in_memory", len(s.parts), "ms", time.Since(began).Milliseconds())
	segs, err := openSegments(filepath.Join(dir, segmentsDir), s.counters.nextChunkSeq, s.cfg.SegmentBytes, s.log)
	if err != nil {
		_ = db.Close()
		s.db = nil
		return err
	}
	segs.corrupt = &s.corrupt
	s.segs = segs
	flushing.Store(segs)
	return nil
}

// storeFormat is the on-disk format this build writes and reads, kept
// under keyFormat. 2: chunk locations carry their bytes' CRC-32C. Stores
// of earlier builds (records inside pebble, then segments without
// checksums) have no format key; nothing was released that wrote them, so
// they are refused rather than converted.
const storeFormat = 2

func formatValue() []byte { return binary.BigEndian.AppendUint64(nil, storeFormat) }

// checkFormat refuses a store of another format, and marks a new (empty)
// one with this build's. The mark needs no sync: it reaches disk with the
// first flushed memtable, before any state that could depend on it.
func checkFormat(db *pebble.DB, dir string) error {
	v, closer, err := db.Get(keyFormat)
	if err == nil {
		ok := len(v) == 8 && binary.BigEndian.Uint64(v) == storeFormat
		got := fmt.Sprintf("%x", v)
		closer.Close()
		if ok {
			return nil
		}
		return fmt.Errorf("storage: %s has store format %s, this build reads %d only; start it with an empty QUEEN_RAFT_DIR", dir, got, storeFormat)
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("storage: read the store format of %s: %w", dir, err)
	}
	it := db.NewIter(nil)
	empty := !it.First()
	if err := it.Close(); err != nil {
		return fmt.Errorf("storage: read %s: %w", dir, err)
	}
	if !empty {
		return fmt.Errorf("storage: %s was written by an earlier build whose stored records carry no checksums; start this build with an empty QUEEN_RAFT_DIR", dir)
	}
	if err := db.Set(keyFormat, formatValue(), pebble.NoSync); err != nil {
		return fmt.Errorf("storage: mark the store format of %s: %w", dir, err)
	}
	return nil
}

// Update applies a batch of committed entries in one database write. The
// write is not synced and not logged: the raft log is the durable record,
// and the store only ever persists whole flushed memtables, so after a
// crash it is a prefix of the applied entries, which is what dragonboat
// needs from an on-disk state machine. Sync makes it durable.
func (s *Store) Update(ents []sm.Entry) ([]sm.Entry, error) {
	// A standby's source snapshot install (KindLinkSnapshotDone) ends a
	// run: it replaces the state, and what follows applies to the new one
	// (link_snapshot.go).
	for rest := ents; len(rest) > 0; {
		n, err := s.updateRun(rest)
		if err != nil {
			return nil, err
		}
		if n < len(rest) {
			if err := s.installLinkSnapshot(&rest[n]); err != nil {
				return nil, err
			}
			n++
		}
		rest = rest[n:]
	}
	return ents, nil
}

// updateRun applies ents, up to the first that installs a link snapshot,
// in one database write and says how many it applied.
func (s *Store) updateRun(ents []sm.Entry) (int, error) {
	s.mu.Lock()
	ctx := s.newApplyCtx()
	var size uint64
	for i := range ents {
		if s.linkInstallsAt(ents[i].Cmd) {
			ents = ents[:i]
			break
		}
		size += uint64(len(ents[i].Cmd))
		ents[i].Result = sm.Result{Value: ents[i].Index, Data: s.applyEntry(ctx, ents[i].Cmd)}
	}
	ctx.fail(ctx.back.close())
	if len(ents) == 0 {
		s.mu.Unlock()
		_ = ctx.b.Close()
		return 0, ctx.err
	}
	s.appliedBytes.Add(size)
	last := ents[len(ents)-1].Index
	if ctx.err == nil {
		ctx.finish(last)
	}
	s.mu.Unlock()
	// The batch's records are written to their segment, then the batch
	// that points at them is committed, both outside the lock so readers
	// resolving names do not wait for them. Nothing a reader can get to
	// reads uncommitted records: the high-water marks readers use move
	// only in publish, after the commit.
	if ctx.err == nil {
		ctx.fail(s.segs.flush())
	}
	if ctx.err != nil {
		// The in-memory model is ahead of the store now, so the node must
		// restart from what is durable; records written for this batch
		// are garbage no key points at. Dragonboat stops on the error.
		_ = ctx.b.Close()
		s.diverged.Store(true)
		s.log.Error("storage: cannot apply: stopping this replica rather than diverge from its peers",
			"index", ents[0].Index, "err", ctx.err)
		return 0, fmt.Errorf("storage: apply: %w", ctx.err)
	}
	err := ctx.b.Commit(pebble.NoSync)
	_ = ctx.b.Close()
	if err == nil {
		ctx.publish()
		s.applied.Store(last)
		if s.cache.over() { // only the apply loop changes the cache: no lock to read it
			s.mu.Lock()
			s.trimCache()
			s.mu.Unlock()
		}
		if verifyTotals {
			s.checkTotals()
		}
	}
	if err != nil {
		s.diverged.Store(true)
		// A failed write leaves the store behind the log; dragonboat treats
		// the error as fatal and the node restarts from what is durable.
		return 0, fmt.Errorf("storage: commit apply batch: %w", err)
	}
	s.notify(ctx.changes)
	return len(ents), nil
}

func (s *Store) notify(changes []Change) {
	if len(changes) == 0 {
		return
	}
	s.listenMu.Lock()
	f := s.listener
	s.listenMu.Unlock()
	if f != nil {
		f(changes)
	}
}

// Sync makes everything applied so far durable by flushing the memtable:
// dragonboat calls it, holding the lock that applies wait on, before
// recording a snapshot that lets it compact the raft log. Segment bytes are
// already on their way to disk (startWriteback), so the fsync here is
// short. Doing this work ahead in the background was measured and made
// produce p99 worse, not better: each early fsync or flush is one more
// journal commit the raft log's fsyncs queue behind (docs/placement.md).
func (s *Store) Sync() error {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return ErrClosed
	}
	// Dragonboat holds the apply lock: applied and appliedBytes stand still.
	bytes, index := s.appliedBytes.Load(), s.applied.Load()
	if err := s.segs.sync(); err != nil {
		return fmt.Errorf("storage: sync: %w", err)
	}
	// Everything the snapshot sees is durable once the flush returns, so
	// segments it no longer references can go.
	snap := s.db.NewSnapshot()
	defer snap.Close()
	if err := s.db.Flush(); err != nil {
		return fmt.Errorf("storage: sync: %w", err)
	}
	s.syncedBytes.Store(bytes)
	s.syncedIndex.Store(index)
	if err := s.segs.collect(snap); err != nil {
		s.log.Warn("storage: segment collection", "err", err)
	}
	return nil
}

// CorruptChunks counts the chunk reads refused since Open because the
// bytes on disk no longer matched their checksum.
func (s *Store) CorruptChunks() uint64 { return s.corrupt.n.Load() }

// SinceSync is how many command bytes and entries were applied after the
// last Sync: the raft log a restart would replay, and what a snapshot
// (which syncs) would let dragonboat compact.
func (s *Store) SinceSync() (bytes, entries uint64) {
	return s.appliedBytes.Load() - s.syncedBytes.Load(), s.applied.Load() - s.syncedIndex.Load()
}

// Lookup answers dragonboat's read queries. The engine reads through the
// typed methods in read.go instead; this only reports the applied index.
func (s *Store) Lookup(q interface{}) (interface{}, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	return s.applied.Load(), nil
}

// ErrClosed is returned by reads after Close.
var ErrClosed = errors.New("storage: closed")

// Close flushes and closes the database. Dragonboat may not call it and a
// crash skips it; the flush only saves replaying the raft log at the next
// start.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	defer s.linkGate.exclude()()
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if s.db == nil {
		return nil
	}
	err := s.segs.sync()
	if err == nil {
		err = s.db.Flush()
	}
	if err == nil && !s.diverged.Load() {
		// What load would derive from the store as flushed, so the next
		// open reads it instead of walking every partition (image.go).
		s.mu.Lock()
		began := time.Now()
		if ierr := s.writeImage(); ierr != nil {
			s.log.Warn("storage: no load image, the next start reads every partition", "err", ierr)
		} else {
			s.log.Debug("storage: load image written", "ms", time.Since(began).Milliseconds())
		}
		s.mu.Unlock()
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	s.segs.close()
	s.db, s.segs = nil, nil
	return err
}

// removeStaleGenerations deletes the store generations other than
// current, and a CURRENT.tmp. RecoverFromSnapshot builds the next
// generation beside the live one, switches CURRENT and then deletes the
// old one, so a crash leaves the new one (before the switch) or the old
// one (after it) behind, holding a whole store's records. Nothing reads
// them: only CURRENT's generation is ever opened. A failure to delete is
// logged, not fatal: the store is intact.
func (s *Store) removeStaleGenerations(current string) {
	entries, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		s.log.Warn("storage: list store directory", "dir", s.cfg.Dir, "err", err)
		return
	}
	for _, e := range entries {
		name := e.Name()
		stale := name == "CURRENT.tmp"
		if gen, ok := strings.CutPrefix(name, "sm-"); ok && e.IsDir() && name != current {
			_, err := strconv.ParseUint(gen, 10, 64)
			stale = err == nil
		}
		if !stale {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.cfg.Dir, name)); err != nil {
			s.log.Warn("storage: remove a store generation left by a crash", "dir", filepath.Join(s.cfg.Dir, name), "err", err)
			continue
		}
		s.log.Info("storage: removed a store generation left by a crash", "dir", filepath.Join(s.cfg.Dir, name))
	}
}

// readCurrent returns the name of the live database directory, or "".
func readCurrent(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "CURRENT"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("storage: read CURRENT: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// writeCurrent atomically points CURRENT at the named database directory.
func writeCurrent(dir, name string) error {
	tmp := filepath.Join(dir, "CURRENT.tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("storage: write CURRENT: %w", err)
	}
	if _, err := io.WriteString(f, name+"\n"); err != nil {
		f.Close()
		return fmt.Errorf("storage: write CURRENT: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("storage: sync CURRENT: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("storage: close CURRENT: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "CURRENT")); err != nil {
		return fmt.Errorf("storage: rename CURRENT: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("storage: open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("storage: sync dir %s: %w", dir, err)
	}
	return nil
}

// pebbleLogger routes pebble's chatter to slog at debug level; its fatal
// errors stay fatal.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...interface{}) {
	l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Fatalf(format string, args ...interface{}) {
	l.log.Error("pebble: " + fmt.Sprintf(format, args...))
	panic(fmt.Sprintf(format, args...))
}
