package storage

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
)

// Chunk records live outside the LSM, in append-only segment files: pebble
// holds where each chunk is (its blob key's value is a location), so a
// record is written to the store once, by one write, instead of being
// copied into a memtable, flushed and compacted. Kafka and Queen's qlog keep
// records the same way.
//
// A segment is named by the first chunk sequence written into it and holds
// only sequences below the next segment's name, so a segment whose range
// has no blob key left holds nothing anyone can read, and is deleted.
// Locations are this replica's own business: they are not replicated state,
// and a replica recovering from a snapshot lays its segments out afresh.
//
// Durability follows the store's rule (store.go): pebble persists only
// whole flushed memtables, and a flushed memtable must never point at
// record bytes that are not on disk. So segments are fsynced when pebble
// begins a flush and in Sync, before the memtable that references them is
// written. Bytes past what the durable state references (a crash between a
// segment write and the flush) are garbage the replay does not reuse: a
// reopened store appends to a new segment, and segments named at or above
// the durable next sequence are deleted as wholly unreferenced.
//
// Every chunk's location carries the CRC-32C of its bytes, computed when
// they are appended and checked at every read from the file, so a byte the
// disk changed is refused, counted and logged rather than served (Kafka
// fetch re-encodes record batches with fresh CRCs: a consumer could not
// tell). Reads of a batch's own pending records come from memory and are
// not checked.

const (
	segmentsDir         = "segments" // inside a store generation's directory
	segmentSuffix       = ".seg"
	defaultSegmentBytes = 256 << 20
	locationLen         = 24 // segment name (8), offset (8), length (4), CRC-32C (4); then the chunk (partition, base)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is a stored chunk whose bytes no longer match their checksum.
var ErrCorrupt = errors.New("storage: stored records are corrupt")

// location is where a chunk's records are, and which chunk they are (its
// partition and base offset), so a blob key leads back to its index entry
// when the chunk is relocated (relocate.go).
type location struct {
	segment uint64 // the segment's name: its first chunk sequence
	offset  int64
	length  int
	crc     uint32 // CRC-32C (Castagnoli) of the chunk's bytes
	pid     uint64
	base    uint64
}

func (l location) encode() []byte {
	b := make([]byte, locationLen, locationLen+2*binary.MaxVarintLen64)
	binary.BigEndian.PutUint64(b, l.segment)
	binary.BigEndian.PutUint64(b[8:], uint64(l.offset))
	binary.BigEndian.PutUint32(b[16:], uint32(l.length))
	binary.BigEndian.PutUint32(b[20:], l.crc)
	b = binary.AppendUvarint(b, l.pid)
	return binary.AppendUvarint(b, l.base)
}

// encodeChunkRef is a location's chunk identity alone (for snapshots).
func (l location) encodeChunkRef() []byte {
	return binary.AppendUvarint(binary.AppendUvarint(nil, l.pid), l.base)
}

func decodeChunkRef(b []byte) (pid, base uint64, rest []byte, err error) {
	pid, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, nil, errors.New("storage: chunk reference malformed")
	}
	base, m := binary.Uvarint(b[n:])
	if m <= 0 {
		return 0, 0, nil, errors.New("storage: chunk reference malformed")
	}
	return pid, base, b[n+m:], nil
}

func decodeLocation(b []byte) (location, error) {
	if len(b) < locationLen {
		return location{}, fmt.Errorf("storage: chunk location of %d bytes", len(b))
	}
	l := location{segment: binary.BigEndian.Uint64(b), offset: int64(binary.BigEndian.Uint64(b[8:])),
		length: int(binary.BigEndian.Uint32(b[16:])), crc: binary.BigEndian.Uint32(b[20:])}
	pid, base, rest, err := decodeChunkRef(b[locationLen:])
	if err != nil || len(rest) != 0 {
		return location{}, errors.New("storage: chunk location malformed")
	}
	l.pid, l.base = pid, base
	return l, nil
}

type segment struct {
	name    uint64
	f       *os.File
	size    int64 // bytes appended, pending ones included (apply goroutine only)
	flushed int64 // bytes handed to writeback (apply goroutine only)
}

// writebackEvery is how many written bytes of a segment go to writeback at
// a time.
const writebackEvery = 1 << 20

// segments is one store generation's segment files. Appends come from one
// goroutine at a time (the apply loop, or a snapshot being installed);
// reads come from anywhere. No record is read or written under mu, which
// guards the list of files: a reader never waits for a write.
type segments struct {
	dir      string
	maxBytes int64
	log      *slog.Logger

	// syncMu is held for a whole sync, fsyncs included.
	syncMu sync.Mutex

	mu       sync.RWMutex
	files    []*segment // ascending by name; the last one is appended to
	unsynced []*segment // written since the last fsync
	pins     int        // snapshots being streamed: no segment is deleted
	retired  []*os.File // deleted segments, closed at the next collection

	// pending holds the records of the batch being applied, from offset
	// pendingAt of the last segment: flush writes them in one call before
	// the batch that points at them commits. Only the appending goroutine
	// touches them, and only it can hold a location inside them.
	pending   []byte
	pendingAt int64

	// decoded are kept Kafka batches recently decoded (kafka_batch.go).
	decoded decodedBatches

	// fsync and syncWait are seams for tests: fsync makes a file durable
	// (os.File.Sync when nil); syncWait is called when a sync is about to
	// wait for another one in flight.
	fsync    func(*os.File) error
	syncWait func()

	// corrupt counts and reports chunks refused for a checksum mismatch
	// (the store's, so the count survives a new generation); nil while a
	// snapshot is being installed.
	corrupt *corruption
}

// corruption counts chunks whose bytes failed their checksum and logs
// them, at most one line a second (a consumer retrying a corrupt chunk
// must not flood the log).
type corruption struct {
	n         atomic.Uint64
	lastLogNs atomic.Int64
}

func (c *corruption) report(log *slog.Logger, dir string, loc location, got uint32) {
	if c == nil {
		return
	}
	n := c.n.Add(1)
	now := time.Now().UnixNano()
	if last := c.lastLogNs.Load(); now-last >= int64(time.Second) && c.lastLogNs.CompareAndSwap(last, now) {
		log.Error("storage: corrupt records refused: the disk under this replica changed stored bytes",
			"segment", filepath.Join(dir, segmentFileName(loc.segment)), "offset", loc.offset, "length", loc.length,
			"crc", fmt.Sprintf("%08x", got), "want", fmt.Sprintf("%08x", loc.crc), "refused_total", n)
	}
}

func (sg *segments) fsyncFile(f *os.File) error {
	if sg.fsync != nil {
		return sg.fsync(f)
	}
	return f.Sync()
}

// openSegments opens dir's segments for a store whose durable state says
// the next chunk sequence is next, and starts a new segment named next.
func openSegments(dir string, next uint64, maxBytes int64, log *slog.Logger) (*segments, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage: segments dir: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("storage: segments dir: %w", err)
	}
	if maxBytes <= 0 {
		maxBytes = defaultSegmentBytes
	}
	sg := &segments{dir: dir, maxBytes: maxBytes, log: log}
	for _, e := range entries {
		name, ok := parseSegmentName(e.Name())
		if !ok {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if name >= next {
			// Written after the durable state: nothing references it.
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("storage: remove unreferenced segment: %w", err)
			}
			continue
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			sg.close()
			return nil, fmt.Errorf("storage: open segment: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			sg.close()
			return nil, fmt.Errorf("storage: stat segment: %w", err)
		}
		sg.files = append(sg.files, &segment{name: name, f: f, size: fi.Size()})
	}
	slices.SortFunc(sg.files, func(a, b *segment) int { return cmp.Compare(a.name, b.name) })
	if err := sg.create(next); err != nil {
		sg.close()
		return nil, err
	}
	return sg, nil
}

// searchSegments finds the segment named name in files (sorted by name),
// or where it would be.
func searchSegments(files []*segment, name uint64) (int, bool) {
	return slices.BinarySearchFunc(files, name, func(s *segment, name uint64) int { return cmp.Compare(s.name, name) })
}

func segmentFileName(name uint64) string { return fmt.Sprintf("%016x%s", name, segmentSuffix) }

func parseSegmentName(file string) (uint64, bool) {
	hex, ok := strings.CutSuffix(file, segmentSuffix)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(hex, 16, 64)
	return n, err == nil
}

// create starts a new last segment named name and makes its directory
// entry durable.
func (sg *segments) create(name uint64) error {
	path := filepath.Join(sg.dir, segmentFileName(name))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("storage: create segment: %w", err)
	}
	if err := syncDir(sg.dir); err != nil {
		f.Close()
		return err
	}
	sg.mu.Lock()
	sg.files = append(sg.files, &segment{name: name, f: f})
	sg.mu.Unlock()
	return nil
}

// last is the segment being appended to.
func (sg *segments) last() *segment {
	sg.mu.RLock()
	defer sg.mu.RUnlock()
	return sg.files[len(sg.files)-1]
}

// append adds one chunk's records, the concatenation of parts, for chunk
// sequence seq to the pending batch and returns where they will be. A full
// segment is written, synced and followed by a new one named seq.
func (sg *segments) append(seq uint64, parts ...[]byte) (location, error) {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	cur := sg.last()
	if cur.size > 0 && cur.size+int64(n) > sg.maxBytes {
		if err := sg.flush(); err != nil {
			return location{}, err
		}
		if err := sg.fsyncFile(cur.f); err != nil {
			return location{}, fmt.Errorf("storage: sync segment %016x: %w", cur.name, err)
		}
		if err := sg.create(seq); err != nil {
			return location{}, err
		}
		cur = sg.last()
	}
	if len(sg.pending) == 0 {
		sg.pendingAt = cur.size
	}
	loc := location{segment: cur.name, offset: cur.size, length: n}
	for _, p := range parts {
		sg.pending = append(sg.pending, p...)
		loc.crc = crc32.Update(loc.crc, castagnoli, p)
	}
	cur.size += int64(n)
	if len(sg.pending) >= maxPendingBytes {
		return loc, sg.flush()
	}
	return loc, nil
}

// maxPendingBytes bounds what waits in memory for one write.
const maxPendingBytes = 8 << 20

// flush writes the pending records to the last segment. The apply loop
// calls it before committing the batch that points at them.
func (sg *segments) flush() error {
	if len(sg.pending) == 0 {
		return nil
	}
	cur := sg.last()
	if _, err := cur.f.WriteAt(sg.pending, sg.pendingAt); err != nil {
		return fmt.Errorf("storage: write segment %016x: %w", cur.name, err)
	}
	if end := sg.pendingAt + int64(len(sg.pending)); end-cur.flushed >= writebackEvery {
		if err := startWriteback(cur.f, end); err != nil {
			return fmt.Errorf("storage: writeback segment %016x: %w", cur.name, err)
		}
		cur.flushed = end
	}
	sg.mu.Lock()
	if len(sg.unsynced) == 0 || sg.unsynced[len(sg.unsynced)-1] != cur {
		sg.unsynced = append(sg.unsynced, cur)
	}
	sg.mu.Unlock()
	sg.pendingAt += int64(len(sg.pending))
	if cap(sg.pending) > 4*maxPendingBytes {
		sg.pending = nil // one huge batch does not pin its buffer
	} else {
		sg.pending = sg.pending[:0]
	}
	return nil
}

// isPending reports whether loc is in records of the batch being applied
// (for the appending goroutine only).
func (sg *segments) isPending(loc location) bool {
	return len(sg.pending) > 0 && loc.offset >= sg.pendingAt && loc.segment == sg.last().name
}

// readAs reads a chunk's bytes as read does or, for the appending
// goroutine (own), as readOwn does.
func (sg *segments) readAs(loc location, buf []byte, own bool) ([]byte, error) {
	if own {
		return sg.readOwn(loc)
	}
	return sg.read(loc, buf)
}

// readOwn is read for the appending goroutine, which may hold locations
// of records still pending.
func (sg *segments) readOwn(loc location) ([]byte, error) {
	if sg.isPending(loc) {
		start := loc.offset - sg.pendingAt
		if start+int64(loc.length) > int64(len(sg.pending)) {
			return nil, fmt.Errorf("%w: segment %016x at %d", errChunkMissing, loc.segment, loc.offset)
		}
		return append([]byte(nil), sg.pending[start:start+int64(loc.length)]...), nil
	}
	return sg.read(loc, nil)
}

// read returns a chunk's records, in buf when it is large enough, after
// checking them against their checksum. Only records of committed batches
// are read here: they are in the file.
func (sg *segments) read(loc location, buf []byte) ([]byte, error) {
	sg.mu.RLock()
	i, found := searchSegments(sg.files, loc.segment)
	var f *os.File
	if found {
		f = sg.files[i].f
	}
	sg.mu.RUnlock()
	if f == nil {
		return nil, fmt.Errorf("%w: segment %016x", errChunkMissing, loc.segment)
	}
	if cap(buf) < loc.length {
		buf = make([]byte, loc.length)
	}
	buf = buf[:loc.length]
	if _, err := f.ReadAt(buf, loc.offset); err != nil {
		return nil, fmt.Errorf("storage: read segment %016x at %d: %w", loc.segment, loc.offset, err)
	}
	if got := crc32.Checksum(buf, castagnoli); got != loc.crc {
		sg.corrupt.report(sg.log, sg.dir, loc, got)
		return nil, fmt.Errorf("%w: segment %016x at %d, %d bytes: CRC-32C %08x, stored %08x",
			ErrCorrupt, loc.segment, loc.offset, loc.length, got, loc.crc)
	}
	return buf, nil
}

// appendAt reads a chunk's bytes into dst from position at (at most
// len(dst)), growing dst as needed, and checks them against their
// checksum; it returns dst extended to the chunk's end. Bytes of dst from
// at on are overwritten: a caller that wants part of a chunk read it over
// bytes it saves and puts back (StoredChunk.AppendKafkaBatch).
func (sg *segments) appendAt(loc location, dst []byte, at int) ([]byte, error) {
	end := at + loc.length
	if cap(dst) < end {
		grown := make([]byte, len(dst), max(end, 2*cap(dst)))
		copy(grown, dst)
		dst = grown
	}
	if _, err := sg.read(loc, dst[at:end:end]); err != nil {
		return nil, err
	}
	return dst[:end], nil
}

// sync makes every segment byte written so far durable: every record of
// a committed batch (a batch's records are written before it commits).
// Pending records belong to a batch not yet committed, which nothing
// durable can point at.
//
// Syncs run one at a time. A sync that took the unsynced list owns the
// fsyncs of those bytes, so a second sync started meanwhile (pebble's
// flush and dragonboat's Sync run on different goroutines) must wait for
// them to finish, not return because the list it finds is empty. Waiting
// costs little: the fsyncs it waits for are the ones it needs.
func (sg *segments) sync() error {
	if !sg.syncMu.TryLock() {
		if sg.syncWait != nil {
			sg.syncWait()
		}
		sg.syncMu.Lock()
	}
	defer sg.syncMu.Unlock()
	sg.mu.Lock()
	todo := sg.unsynced
	sg.unsynced = nil
	sg.mu.Unlock()
	for i, s := range todo {
		if err := sg.fsyncFile(s.f); err != nil {
			if errors.Is(err, os.ErrClosed) {
				continue // collected since: nothing durable points into it
			}
			sg.mu.Lock()
			sg.unsynced = append(todo[i:], sg.unsynced...)
			sg.mu.Unlock()
			return fmt.Errorf("storage: sync segment %016x: %w", s.name, err)
		}
	}
	return nil
}

func (sg *segments) pin() {
	sg.mu.Lock()
	sg.pins++
	sg.mu.Unlock()
}

func (sg *segments) unpin() {
	sg.mu.Lock()
	sg.pins--
	sg.mu.Unlock()
}

// collect deletes the segments (but the one being written) whose range
// holds no blob key in view. view must be durable: a state that a crash
// could still roll back to might reference the segment again. Files
// deleted by the previous collection are closed now, so a reader that
// found one just before it went finishes its read.
func (sg *segments) collect(view iterSource) error {
	sg.mu.Lock()
	defer sg.mu.Unlock()
	for _, f := range sg.retired {
		_ = f.Close()
	}
	sg.retired = sg.retired[:0]
	if sg.pins > 0 {
		return nil
	}
	lower := []byte{tagBlob}
	it := view.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	defer it.Close()
	keep := sg.files[:0:0]
	last := len(sg.files) - 1
	for i, s := range sg.files {
		if i == last {
			keep = append(keep, s)
			break
		}
		next := sg.files[i+1].name
		if it.SeekGE(blobKey(s.name)) && binary.BigEndian.Uint64(it.Key()[1:]) < next {
			keep = append(keep, s)
			continue
		}
		if err := os.Remove(filepath.Join(sg.dir, segmentFileName(s.name))); err != nil && !errors.Is(err, os.ErrNotExist) {
			keep = append(keep, s)
			sg.log.Warn("storage: cannot delete segment", "segment", segmentFileName(s.name), "err", err)
			continue
		}
		sg.retired = append(sg.retired, s.f)
	}
	sg.files = keep
	return it.Error()
}

func (sg *segments) close() {
	if err := sg.flush(); err != nil {
		sg.log.Warn("storage: closing segments", "err", err)
	}
	sg.mu.Lock()
	defer sg.mu.Unlock()
	for _, s := range sg.files {
		_ = s.f.Close()
	}
	for _, f := range sg.retired {
		_ = f.Close()
	}
	sg.files, sg.retired = nil, nil
}

// SegmentStats is how many segment files the store has and their bytes.
func (s *Store) SegmentStats() (files int, bytes int64) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.segs == nil {
		return 0, 0
	}
	s.segs.mu.RLock()
	defer s.segs.mu.RUnlock()
	for _, f := range s.segs.files {
		if fi, err := f.f.Stat(); err == nil {
			bytes += fi.Size()
		}
	}
	return len(s.segs.files), bytes
}
