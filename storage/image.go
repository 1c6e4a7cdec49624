package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// The load image (docs/decisions.md, "Boot reads a load image after a
// clean stop"). Load derives a queue's totals, lags, ready sets, partition
// and name tables and, at a home, its directory by walking every stored
// partition, cursor and directory entry: at ten million partitions that
// walk was most of a node's boot. A store that closes cleanly writes what
// the walk would give (and what the running store knew exactly, such as
// its ready sets) to one file beside its database, with the applied index
// it describes; the next open at that same index reads the file instead of
// walking, then reads back only the partitions that cannot live outside
// memory (leases, Kafka queues and producers, pinned cursors). Any doubt
// (another index, another format, a checksum or shape that does not match
// the store) falls back to the walk, which is always right; so does a
// crash, which writes no image.
//
// This file owns the image's format, writing it and installing it; it
// never decides what a command does.

const (
	imageFile    = "load-image"
	imageVersion = 1
	// imageRun is how many values of a table are written or read at once:
	// 64 KiB, well within the 1 MiB buffers.
	imageRun = 8192
)

var imageMagic = []byte("QUEENIMG")

// errImageStale is an image that does not describe the store as it is;
// load walks the store instead.
var errImageStale = errors.New("storage: load image does not match the store")

func imagePath(dbDir string) string { return filepath.Join(dbDir, imageFile) }

// writeImage writes the load image of the store as it is now, which Close
// has just flushed. The caller holds s.mu; no batch is being applied.
func (s *Store) writeImage() error {
	path := imagePath(s.dbDir)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("storage: create load image: %w", err)
	}
	w := newImageWriter(f)
	w.raw(imageMagic)
	w.u64(imageVersion)
	w.u64(s.applied.Load())
	ids := make([]uint64, 0, len(s.queuesByID))
	for id := range s.queuesByID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	w.u64(uint64(len(ids)))
	for _, id := range ids {
		s.writeQueueImage(w, s.queuesByID[id])
	}
	err = w.finish()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(s.dbDir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("storage: write load image: %w", err)
	}
	return nil
}

func (s *Store) writeQueueImage(w *imageWriter, q *queueState) {
	w.u64(q.id)
	w.u64(q.inc)
	w.bool(q.home)
	if q.home {
		writeRun(w, q.dir, func(b []byte, d dirSlot) []byte { return binary.LittleEndian.AppendUint16(b, uint16(d)) })
		w.names(&q.dirNames)
		w.u64(q.groups)
		w.u32s(q.dirInGroup)
	}
	w.u64s(q.pids)
	w.names(&q.partNames)
	w.set(&q.stored)
	w.set(&q.gone)
	w.u32s(q.dropsPending)
	w.counts(q.totals)
	w.u64(q.appended)
	groups := make([]string, 0, len(q.lags))
	for g := range q.lags {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	w.u64(uint64(len(groups)))
	for _, g := range groups {
		w.str(g)
		w.u64(uint64(q.lags[g].Cursors))
		w.u64(q.lags[g].Lag)
	}
	w.u64(uint64(q.dlqRows))
	subs := make([]string, 0, len(q.subs))
	for g := range q.subs {
		subs = append(subs, g)
	}
	slices.Sort(subs)
	w.u64(uint64(len(subs)))
	for _, g := range subs {
		w.str(g)
		w.set(&q.subs[g].ready)
	}
	// The partitions a restart must hold in memory: those that cannot
	// leave it. The others are all in the store, counted as stored.
	var keep []uint64
	for _, p := range q.parts {
		if !p.deleted.Load() && !s.evictable(p) {
			keep = append(keep, p.id)
		}
	}
	slices.Sort(keep)
	w.u64s(keep)
}

// queueImage is one queue's part of a load image, read but not installed.
type queueImage struct {
	q            *queueState
	dir          []dirSlot
	dirNames     nameIndex
	groups       uint64
	dirInGroup   []uint32
	pids         []uint64
	partNames    nameIndex
	stored, gone readySet
	dropsPending []uint32
	totals       Counts
	appended     uint64
	lags         map[string]*GroupLag
	dlqRows      int
	ready        map[string]readySet
	keep         []uint64
}

// readImage reads the load image of the store's database, if there is one
// describing it at its applied index; nil when there is none. The file is
// removed once read: it describes the store only until the next batch.
// Queues and subscriptions must be loaded.
func (s *Store) readImage() ([]queueImage, error) {
	path := imagePath(s.dbDir)
	_ = os.Remove(path + ".tmp") // a stop that died writing one
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("storage: open load image: %w", err)
	}
	defer func() {
		f.Close()
		if err := os.Remove(path); err != nil {
			s.log.Warn("storage: remove the load image", "err", err)
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("storage: load image: %w", err)
	}
	r := newImageReader(f, st.Size())
	magic, version := r.raw(len(imageMagic)), r.u64()
	if r.err != nil {
		return nil, r.err
	}
	if string(magic) != string(imageMagic) || version != imageVersion {
		return nil, fmt.Errorf("%w: another format", errImageStale)
	}
	if at := r.u64(); r.err == nil && at != s.applied.Load() {
		return nil, fmt.Errorf("%w: it describes index %d, the store is at %d", errImageStale, at, s.applied.Load())
	}
	n := r.count(8 * 3)
	if r.err == nil && n != len(s.queuesByID) {
		return nil, fmt.Errorf("%w: %d queues, the store holds %d", errImageStale, n, len(s.queuesByID))
	}
	out := make([]queueImage, 0, n)
	for range n {
		qi, err := s.readQueueImage(r)
		if err != nil {
			return nil, err
		}
		out = append(out, qi)
	}
	if err := r.finish(); err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Store) readQueueImage(r *imageReader) (queueImage, error) {
	id, inc, home := r.u64(), r.u64(), r.bool()
	if r.err != nil {
		return queueImage{}, r.err
	}
	q := s.queuesByID[id]
	if q == nil || q.inc != inc || q.home != home {
		return queueImage{}, fmt.Errorf("%w: queue %d", errImageStale, id)
	}
	qi := queueImage{q: q}
	if home {
		qi.dir = readRun(r, 2, func(b []byte) dirSlot { return dirSlot(binary.LittleEndian.Uint16(b)) })
		r.names(&qi.dirNames)
		qi.groups = r.u64()
		qi.dirInGroup = r.u32s()
	}
	qi.pids = r.u64s()
	r.names(&qi.partNames)
	qi.stored = r.set()
	qi.gone = r.set()
	qi.dropsPending = r.u32s()
	qi.totals = r.counts()
	qi.appended = r.u64()
	if n := r.count(8 * 3); n > 0 {
		qi.lags = make(map[string]*GroupLag, n)
		for range n {
			g := r.str()
			qi.lags[g] = &GroupLag{Cursors: int(r.u64()), Lag: r.u64()}
		}
	}
	qi.dlqRows = int(r.u64())
	n := r.count(8 * 2)
	if r.err == nil && n != len(q.subs) {
		return queueImage{}, fmt.Errorf("%w: queue %d has %d subscriptions, the image %d", errImageStale, id, len(q.subs), n)
	}
	qi.ready = make(map[string]readySet, n)
	for range n {
		g := r.str()
		qi.ready[g] = r.set()
		if r.err == nil && q.subs[g] == nil {
			return queueImage{}, fmt.Errorf("%w: queue %d has no subscription %q", errImageStale, id, g)
		}
	}
	qi.keep = r.u64s()
	return qi, r.err
}

// installImage gives every queue what the image holds and reads back the
// partitions it lists as unable to leave memory. On an error the model is
// half built: load starts over without the image.
func (s *Store) installImage(img []queueImage) error {
	type loaded struct {
		q *queueState
		p *partState
	}
	var parts []loaded
	src := s.peekSource()
	defer src.close()
	for i := range img {
		qi := &img[i]
		q := qi.q
		q.pids = qi.pids // storedPart checks a partition against its queue's table
		for _, pid := range qi.keep {
			p, err := s.loadPart(src, pid)
			if err != nil {
				return err
			}
			if p.q != q {
				return fmt.Errorf("%w: partition %d is not in queue %d", errImageStale, pid, q.id)
			}
			parts = append(parts, loaded{q, p})
		}
	}
	for i := range img {
		qi := &img[i]
		q := qi.q
		q.dir, q.dirNames, q.groups, q.dirInGroup = qi.dir, qi.dirNames, qi.groups, qi.dirInGroup
		q.partNames, q.stored, q.gone, q.dropsPending = qi.partNames, qi.stored, qi.gone, qi.dropsPending
		q.dlqRows = qi.dlqRows
		for g, ready := range qi.ready {
			q.subs[g].ready = ready
		}
	}
	for _, l := range parts {
		l.q.keep(l.p)
		s.parts[l.p.id] = l.p
		recount(l.p) // its own part; the queue's totals are the image's, set below
		s.cache.add(l.p)
	}
	for i := range img {
		qi := &img[i]
		qi.q.totals, qi.q.appended, qi.q.lags = qi.totals, qi.appended, qi.lags
	}
	return nil
}

// loadPart reads partition pid back with its cursors, leases included, as
// load's walk does.
func (s *Store) loadPart(src *partSource, pid uint64) (*partState, error) {
	p, err := s.readPartWith(src, pid, true)
	if err != nil {
		return nil, fmt.Errorf("%w: partition %d: %w", errImageStale, pid, err)
	}
	for _, c := range p.cursors {
		if c.lease != nil {
			s.indexLease(c.lease.id, p, c.group)
		}
	}
	return p, nil
}

// imageWriter writes an image through a buffer, with a CRC-32C of every
// byte written after it.
type imageWriter struct {
	w   *bufio.Writer
	crc hash.Hash32
	buf [8]byte
	err error
}

func newImageWriter(f io.Writer) *imageWriter {
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	return &imageWriter{w: bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<20), crc: crc}
}

func (w *imageWriter) raw(b []byte) {
	if w.err == nil {
		_, w.err = w.w.Write(b)
	}
}

func (w *imageWriter) u64(v uint64) {
	binary.LittleEndian.PutUint64(w.buf[:], v)
	w.raw(w.buf[:8])
}

func (w *imageWriter) u32(v uint32) {
	binary.LittleEndian.PutUint32(w.buf[:], v)
	w.raw(w.buf[:4])
}

func (w *imageWriter) bool(v bool) {
	if v {
		w.raw([]byte{1})
	} else {
		w.raw([]byte{0})
	}
}

func (w *imageWriter) str(v string) {
	w.u64(uint64(len(v)))
	if w.err == nil {
		_, w.err = w.w.WriteString(v)
	}
}

// writeRun writes a length, then the values, a buffer's worth at a time:
// the tables of a queue of millions of partitions are most of an image.
func writeRun[T ~uint16 | ~uint32 | ~uint64](w *imageWriter, v []T, put func([]byte, T) []byte) {
	w.u64(uint64(len(v)))
	for len(v) > 0 && w.err == nil {
		k := min(len(v), imageRun)
		b := w.w.AvailableBuffer()
		for _, x := range v[:k] {
			b = put(b, x)
		}
		_, w.err = w.w.Write(b)
		v = v[k:]
	}
}

func (w *imageWriter) u64s(v []uint64) { writeRun(w, v, binary.LittleEndian.AppendUint64) }

func (w *imageWriter) u32s(v []uint32) { writeRun(w, v, binary.LittleEndian.AppendUint32) }

func (w *imageWriter) names(t *nameIndex) {
	w.u64(t.key[0])
	w.u64(t.key[1])
	w.u64(uint64(t.n))
	w.u64s(t.slots)
}

// set writes a ready set's words; its summary follows from them.
func (w *imageWriter) set(s *readySet) { w.u64s(s.words) }

func (w *imageWriter) counts(c Counts) {
	for _, v := range []uint64{uint64(c.Partitions), c.Total, c.Pending, c.Processing, c.Completed, c.HeadFailures} {
		w.u64(v)
	}
}

// finish flushes what is buffered, then appends the checksum.
func (w *imageWriter) finish() error {
	if w.err == nil {
		w.err = w.w.Flush()
	}
	sum := w.crc.Sum32()
	w.u32(sum) // through the buffer: the CRC sees it too, and the reader stops before it
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

// imageReader reads an image of size bytes, checking its CRC-32C. Every
// length it reads is checked against the bytes left before anything is
// allocated for it, so a damaged file costs an error, not memory.
type imageReader struct {
	r    *bufio.Reader
	crc  hash.Hash32
	left int64 // bytes left before the checksum
	f    io.Reader
	err  error
}

func newImageReader(f io.Reader, size int64) *imageReader {
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	r := &imageReader{crc: crc, left: size - 4, f: f}
	if r.left < 0 {
		r.err = fmt.Errorf("%w: too short", errImageStale)
		r.left = 0
	}
	r.r = bufio.NewReaderSize(io.TeeReader(io.LimitReader(f, r.left), crc), 1<<20)
	return r
}

func (r *imageReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errImageStale, what)
	}
}

func (r *imageReader) raw(n int) []byte {
	if r.err != nil {
		return nil
	}
	if int64(n) > r.left {
		r.fail("truncated")
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.r, b); err != nil {
		r.fail("truncated")
		return nil
	}
	r.left -= int64(n)
	return b
}

func (r *imageReader) fixed(n int) []byte {
	if r.err != nil {
		return nil
	}
	if int64(n) > r.left {
		r.fail("truncated")
		return nil
	}
	b, err := r.r.Peek(n)
	if err != nil {
		r.fail("truncated")
		return nil
	}
	_, _ = r.r.Discard(n)
	r.left -= int64(n)
	return b
}

func (r *imageReader) u64() uint64 {
	if b := r.fixed(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *imageReader) bool() bool {
	if b := r.fixed(1); b != nil {
		return b[0] == 1
	}
	return false
}

// count reads a length of items of at least each bytes.
func (r *imageReader) count(each int) int {
	n := r.u64()
	if r.err != nil {
		return 0
	}
	if n > uint64(r.left)/uint64(each) {
		r.fail("a length beyond the file")
		return 0
	}
	return int(n)
}

func (r *imageReader) str() string { return string(r.raw(r.count(1))) }

// readRun reads a length, then that many values of size bytes each, a
// buffer's worth at a time.
func readRun[T any](r *imageReader, size int, get func([]byte) T) []T {
	n := r.count(size)
	if n == 0 {
		return nil
	}
	out := make([]T, n)
	for i := 0; i < n; {
		k := min(n-i, imageRun)
		b := r.fixed(size * k)
		if b == nil {
			return nil
		}
		for j := range out[i : i+k] {
			out[i+j] = get(b[size*j:])
		}
		i += k
	}
	return out
}

func (r *imageReader) u64s() []uint64 { return readRun(r, 8, binary.LittleEndian.Uint64) }

func (r *imageReader) u32s() []uint32 { return readRun(r, 4, binary.LittleEndian.Uint32) }

func (r *imageReader) names(t *nameIndex) {
	t.key = [2]uint64{r.u64(), r.u64()}
	n := r.u64()
	t.slots = r.u64s()
	if r.err != nil {
		return
	}
	// The table's invariants: a power of two, at most three quarters full,
	// as many entries as it says.
	used := 0
	for _, s := range t.slots {
		if s != 0 {
			used++
		}
	}
	if l := len(t.slots); l&(l-1) != 0 || uint64(used) != n || used*4 > l*3 {
		r.fail("a name table out of shape")
		return
	}
	t.n = used
}

// set reads a ready set's words and rebuilds its summary.
func (r *imageReader) set() readySet {
	var s readySet
	s.words = r.u64s()
	if len(s.words) > 0 {
		s.summary = make([]uint64, (len(s.words)+63)/64)
		for w, word := range s.words {
			if word != 0 {
				s.summary[w/64] |= 1 << (w % 64)
			}
		}
	}
	return s
}

func (r *imageReader) counts() Counts {
	return Counts{Partitions: int(r.u64()), Total: r.u64(), Pending: r.u64(), Processing: r.u64(), Completed: r.u64(), HeadFailures: r.u64()}
}

// finish checks that the image ends where its checksum says.
func (r *imageReader) finish() error {
	if r.err != nil {
		return r.err
	}
	if r.left != 0 {
		return fmt.Errorf("%w: %d bytes after its last queue", errImageStale, r.left)
	}
	if _, err := r.r.Peek(1); err != io.EOF {
		return fmt.Errorf("%w: unread bytes", errImageStale)
	}
	var sum [4]byte
	if _, err := io.ReadFull(r.f, sum[:]); err != nil {
		return fmt.Errorf("%w: no checksum", errImageStale)
	}
	if binary.LittleEndian.Uint32(sum[:]) != r.crc.Sum32() {
		return fmt.Errorf("%w: checksum mismatch", errImageStale)
	}
	return nil
}
