package storage

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/queen-mq/queen/wire"
)

func segmentNames(t testing.TB, dir string) []uint64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, e := range entries {
		if n, ok := parseSegmentName(e.Name()); ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// A segment rolls when full and is named by the first sequence written to
// it; collect deletes a closed segment once no blob key of its range is
// left in a view, never the one being written, and nothing while pinned.
func TestSegmentsRollReadAndCollect(t *testing.T) {
	dir := t.TempDir()
	sg, err := openSegments(dir, 1, 100, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer sg.close()
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	locs := map[uint64]location{}
	for seq := uint64(1); seq <= 10; seq++ {
		payload := []byte{byte(seq), byte(seq), byte(seq)}
		loc, err := sg.append(seq, payload[:1], payload[1:]) // parts are joined
		if err != nil {
			t.Fatal(err)
		}
		locs[seq] = loc
		if err := db.Set(blobKey(seq), loc.encode(), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		sg.maxBytes = 3 * 3 // three chunks a segment from here on
	}
	if b, err := sg.readOwn(locs[10]); err != nil || b[0] != 10 {
		t.Fatalf("pending records read by their writer: %v %v", b, err)
	}
	if err := sg.flush(); err != nil {
		t.Fatal(err)
	}
	if got := segmentNames(t, dir); !slices.Equal(got, []uint64{1, 4, 7, 10}) {
		t.Fatalf("segments %v", got)
	}
	for seq, loc := range locs {
		b, err := sg.read(loc, nil)
		if err != nil || len(b) != 3 || b[0] != byte(seq) || b[2] != byte(seq) {
			t.Fatalf("seq %d at %+v: %v %v", seq, loc, b, err)
		}
	}

	// Chunks 4..6 (segment 4) and 10 (the active segment) are gone.
	for _, seq := range []uint64{4, 5, 6, 10} {
		_ = db.Delete(blobKey(seq), pebble.NoSync)
	}
	sg.pin()
	if err := sg.collect(db); err != nil {
		t.Fatal(err)
	}
	if got := segmentNames(t, dir); len(got) != 4 {
		t.Fatalf("a pinned collection deleted segments: %v", got)
	}
	sg.unpin()
	if err := sg.collect(db); err != nil {
		t.Fatal(err)
	}
	if got := segmentNames(t, dir); !slices.Equal(got, []uint64{1, 7, 10}) {
		t.Fatalf("after collection %v", got)
	}
	if b, err := sg.read(locs[8], nil); err != nil || b[0] != 8 {
		t.Fatalf("a kept segment reads: %v %v", b, err)
	}
	if _, err := sg.read(locs[5], nil); err == nil {
		t.Fatal("a collected segment still reads")
	}
	if err := sg.sync(); err != nil {
		t.Fatal(err)
	}
}

// Reopening for a durable next sequence keeps the segments below it, drops
// those at or above it (written after the state that survived) and starts
// a new segment named next.
func TestOpenSegmentsStartsAfterTheDurableState(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	sg, err := openSegments(dir, 1, 10, log)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := sg.append(1, []byte("0123456789"))
	if err := sg.flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := sg.append(2, []byte("lost")); err != nil { // rolls to segment 2
		t.Fatal(err)
	}
	sg.close()
	sg, err = openSegments(dir, 2, 10, log)
	if err != nil {
		t.Fatal(err)
	}
	defer sg.close()
	if got := segmentNames(t, dir); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("segments %v", got)
	}
	if fi, err := os.Stat(filepath.Join(dir, segmentFileName(2))); err != nil || fi.Size() != 0 {
		t.Fatalf("segment 2 must start empty: %v %v", fi, err)
	}
	if b, err := sg.read(old, nil); err != nil || string(b) != "0123456789" {
		t.Fatalf("segment 1 reads %q %v", b, err)
	}
}

// Deleting a queue frees its records' segments at the next Sync, and what
// other queues stored still reads after a reopen.
func TestSyncDeletesSegmentsNoChunkUses(t *testing.T) {
	h := newHarness(t)
	h.s.Close()
	h.s = New(Config{Dir: h.dir, SegmentBytes: 64})
	if _, err := h.s.Open(make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		h.push("doomed", "p", `{"filler":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)
	}
	h.push("kept", "p", `{"k":1}`)
	segDir := filepath.Join(h.s.dbDir, segmentsDir)
	before := len(segmentNames(t, segDir))
	if before < 20 {
		t.Fatalf("%d segments for 21 chunks of over 64 bytes", before)
	}
	del := wire.DeleteQueueCmd{Tenant: wire.DefaultTenant, Queue: "doomed"}
	if c := h.code(wire.KindDeleteQueue, del.Encode(nil)); c != wire.CodeOK {
		t.Fatalf("delete: %v", c)
	}
	if err := h.s.Sync(); err != nil {
		t.Fatal(err)
	}
	if after := len(segmentNames(t, segDir)); after > 2 {
		t.Fatalf("%d segments left after the queue went (want kept's and the active one)", after)
	}
	h.s.Close()
	h.s = New(Config{Dir: h.dir, SegmentBytes: 64})
	if _, err := h.s.Open(make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	p, ok := h.s.PartitionByName(wire.DefaultTenant, "kept", "p")
	if !ok || readPayloads(t, h.s, p) != `{"k":1}` {
		t.Fatal("the kept queue's record after reopen")
	}
}

// openSmallSegments reopens h's store with segments of size bytes.
func openSmallSegments(t *testing.T, h *harness, size int64) {
	t.Helper()
	h.s.Close()
	h.s = New(Config{Dir: h.dir, SegmentBytes: size})
	idx, err := h.s.Open(make(chan struct{}))
	if err != nil {
		t.Fatal(err)
	}
	h.index = idx
}

// Segments shared by a deleted queue and a live one are half dead: the
// leader's SparseRange finds one, relocation moves the live chunks to new
// sequences, the next Sync frees the range, and every record still reads,
// also after a reopen.
func TestRelocationFreesSparseSegments(t *testing.T) {
	h := newHarness(t)
	openSmallSegments(t, h, 300)
	filler := `{"filler":"` + strings.Repeat("x", 100) + `"}`
	var kept []string
	for i := 0; i < 30; i++ {
		h.push("doomed", "p", filler)
		v := fmt.Sprintf(`{"kept":%d}`, i)
		h.push("kept", "p", v)
		kept = append(kept, v)
	}
	segDir := filepath.Join(h.s.dbDir, segmentsDir)
	before := len(segmentNames(t, segDir))
	del := wire.DeleteQueueCmd{Tenant: wire.DefaultTenant, Queue: "doomed"}
	if c := h.code(wire.KindDeleteQueue, del.Encode(nil)); c != wire.CodeOK {
		t.Fatalf("delete: %v", c)
	}
	if err := h.s.Sync(); err != nil {
		t.Fatal(err)
	}
	if after := len(segmentNames(t, segDir)); after < before-1 {
		t.Fatalf("segments shared with a live queue were freed: %d → %d", before, after)
	}
	moved, misses := 0, 0
	for round := 0; misses < 5; round++ { // a few calls cover every segment
		from, to, ok := h.s.SparseRange()
		if !ok {
			misses++
			continue
		}
		misses = 0
		if round > 200 {
			t.Fatal("relocation does not converge")
		}
		for from < to {
			c := wire.RelocateChunksCmd{From: from, To: to, MaxBytes: 1 << 20}
			r, err := wire.DecodeRelocateChunksResult(h.apply(wire.KindRelocateChunks, c.Encode(nil)))
			if err != nil || r.Code != wire.CodeOK || r.Next <= from {
				t.Fatalf("relocate [%d,%d): %v %+v", from, to, err, r)
			}
			moved += int(r.Moved)
			from = r.Next
		}
		if err := h.s.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	after := len(segmentNames(t, segDir))
	if moved == 0 || after*10 > before*7 {
		t.Fatalf("relocation moved %d chunks and left %d of %d segments", moved, after, before)
	}
	p, ok := h.s.PartitionByName(wire.DefaultTenant, "kept", "p")
	if !ok || readPayloads(t, h.s, p) != strings.Join(kept, ",") {
		t.Fatalf("kept records after relocation: %q", readPayloads(t, h.s, p))
	}
	openSmallSegments(t, h, 300)
	p, _ = h.s.PartitionByName(wire.DefaultTenant, "kept", "p")
	if got := readPayloads(t, h.s, p); got != strings.Join(kept, ",") {
		t.Fatalf("kept records after reopen: %q", got)
	}
}

// A data directory from before segment files is refused with a line that
// says what to do, not read as garbage.
func TestStoreWithRecordsInsidePebbleIsRefused(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", `{"a":1}`)
	dir := h.s.dbDir
	h.s.Close()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(blobKey(1), []byte("raw records"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(keyFormat, pebble.Sync); err != nil { // it predates the mark
		t.Fatal(err)
	}
	db.Close()
	h.s = New(Config{Dir: h.dir})
	if _, err := h.s.Open(make(chan struct{})); err == nil || !strings.Contains(err.Error(), "empty QUEEN_RAFT_DIR") {
		t.Fatalf("open: %v", err)
	}
	h.s = New(Config{Dir: t.TempDir()}) // the harness closes this one
	if _, err := h.s.Open(make(chan struct{})); err != nil {
		t.Fatal(err)
	}
}

// A crash loses the store's unflushed memtable but not the segment bytes
// written after it; the reopened store starts a fresh segment at its
// durable next sequence, dragonboat replays the lost entries, and every
// record reads once, in order, with nothing left pointing at garbage.
func TestCrashThenReplayRewritesRecordsOnce(t *testing.T) {
	h := newHarness(t)
	openSmallSegments(t, h, 512)
	base := h.index // entries[i] gets index base+i+1
	var entries [][]byte
	var want []string
	alloc := wire.AllocCmd{Tenant: wire.DefaultTenant, Queue: "q", Flags: wire.AllocCreate, Place: testPlace, Names: []string{"p"}}
	entries = append(entries, wire.AppendEntry(nil, h.now, []wire.Command{{Kind: wire.KindAlloc, Body: alloc.Encode(nil)}}))
	h.applyEntry(entries[0])
	pushEntry := func(i int) {
		v := fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("p", 50))
		rec := wire.Record{Flags: wire.FlagJSON, MsgID: wire.ID{0: 0xCC, 14: byte(i >> 8), 15: byte(i)}, Payload: []byte(v)}
		c := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "q", Partition: "p", PartitionIndex: -1, Count: 1,
			Records: wire.AppendRecord(nil, &rec)}
		e := wire.AppendEntry(nil, h.now, []wire.Command{{Kind: wire.KindPush, Body: c.Encode(nil)}})
		entries = append(entries, e)
		want = append(want, v)
		h.applyEntry(e)
	}
	for i := 0; i < 20; i++ {
		pushEntry(i)
	}
	if err := h.s.Sync(); err != nil {
		t.Fatal(err)
	}
	durable := h.index
	for i := 20; i < 50; i++ { // applied, written to segments, never flushed
		pushEntry(i)
	}
	// The crash: the memtable is dropped, the files stay as they are.
	if err := h.s.db.Close(); err != nil {
		t.Fatal(err)
	}
	h.s.segs.close()
	h.s = New(Config{Dir: h.dir, SegmentBytes: 512})
	idx, err := h.s.Open(make(chan struct{}))
	if err != nil {
		t.Fatal(err)
	}
	if idx != durable {
		t.Fatalf("reopened at %d, durable was %d", idx, durable)
	}
	h.index = idx
	for _, e := range entries[durable-base:] {
		h.applyEntry(e)
	}
	p, ok := h.s.PartitionByName(wire.DefaultTenant, "q", "p")
	if !ok || p.HighWatermark() != 50 {
		t.Fatalf("after replay: %v %+v", ok, p)
	}
	if got := readPayloads(t, h.s, p); got != strings.Join(want, ",") {
		t.Fatalf("records after crash and replay:\n%s", got)
	}
	openSmallSegments(t, h, 512)
	p, _ = h.s.PartitionByName(wire.DefaultTenant, "q", "p")
	if got := readPayloads(t, h.s, p); got != strings.Join(want, ",") {
		t.Fatal("records after a clean reopen differ")
	}
}

// A sync returns only once every byte written before it is durable, also
// when another sync (pebble's flush and dragonboat's Sync run on different
// goroutines) has already taken those bytes and is still in its fsync:
// otherwise pebble may persist a memtable pointing at bytes a power loss
// would take.
func TestSegmentSyncWaitsForAnInFlightFsync(t *testing.T) {
	sg, err := openSegments(t.TempDir(), 1, 1<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer sg.close()
	if _, err := sg.append(1, []byte("records")); err != nil {
		t.Fatal(err)
	}
	if err := sg.flush(); err != nil {
		t.Fatal(err)
	}
	entered, release, waiting := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	sg.fsync = func(f *os.File) error {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		return f.Sync()
	}
	sg.syncWait = func() { close(waiting) }
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- sg.sync() }()
	<-entered
	go func() { second <- sg.sync() }()
	select {
	case err := <-second:
		t.Fatalf("a sync returned (err %v) while the fsync of the bytes it covers was still running", err)
	case <-waiting:
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}

// BenchmarkSegments writes and reads chunks of 64 KiB: the cost per byte
// of storing and loading records outside pebble.
func BenchmarkSegments(b *testing.B) {
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	sg, err := openSegments(b.TempDir(), 1, 1<<30, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer sg.close()
	locs := make([]location, 0, 256)
	b.Run("append", func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		for i := 0; i < b.N; i++ {
			loc, err := sg.append(uint64(i+1), chunk)
			if err != nil {
				b.Fatal(err)
			}
			if len(locs) < cap(locs) {
				locs = append(locs, loc)
			}
			if i%16 == 15 {
				if err := sg.flush(); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := sg.flush(); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("read", func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		var buf []byte
		for i := 0; i < b.N; i++ {
			if buf, err = sg.read(locs[i%len(locs)], buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
