package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/queen-mq/queen/wire"
)

// corruptByte flips one byte of the first stored copy of needle in the
// store's segment files, as a bad disk would.
func (h *harness) corruptByte(needle string) {
	h.t.Helper()
	dir := filepath.Join(h.s.dbDir, segmentsDir)
	for _, name := range segmentNames(h.t, dir) {
		path := filepath.Join(dir, segmentFileName(name))
		b, err := os.ReadFile(path)
		if err != nil {
			h.t.Fatal(err)
		}
		if i := bytes.Index(b, []byte(needle)); i >= 0 {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				h.t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{b[i] ^ 0x20}, int64(i)); err != nil {
				h.t.Fatal(err)
			}
			return
		}
	}
	h.t.Fatalf("%q is in no segment", needle)
}

// A byte changed on disk after a chunk was stored is detected when the
// chunk is read: the read fails and the reader never sees the bytes.
func TestCorruptRecordsAreRefused(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", `{"greeting":"hello"}`, `{"greeting":"world"}`)
	p, _ := h.s.PartitionByName(wire.DefaultTenant, "q", "p")
	h.corruptByte("hello")
	var served []string
	_, err := h.s.Read(p, 0, func(_ uint64, _ int64, body []byte) bool {
		served = append(served, string(body))
		return true
	})
	if err == nil || len(served) > 0 {
		t.Fatalf("a corrupted chunk was served: err %v, records %q", err, served)
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "CRC-32C") {
		t.Fatalf("the error does not say the records are corrupt: %v", err)
	}
	if _, err := h.s.ReadChunks(p, 0, func(*StoredChunk) bool {
		t.Fatal("Kafka fetch got a corrupted chunk")
		return false
	}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Kafka read: %v", err)
	}
	if n := h.s.CorruptChunks(); n != 2 {
		t.Fatalf("%d corrupt reads counted, want 2", n)
	}
	// Other chunks still read.
	h.push("q", "p", `{"greeting":"again"}`)
	var got []uint64
	if err := h.s.ReadRange(p, 2, 3, func(off uint64, _ int64, _ []byte) bool { got = append(got, off); return true }); err != nil || len(got) != 1 {
		t.Fatalf("an intact chunk: %v %v", got, err)
	}
	// The apply loop reading the corrupt chunk (an ack looks up its
	// lease's records) stops rather than act on the bytes.
	cl := h.pop("q", wire.QueueModeGroup, 1, 60_000).Claims[0]
	ack := wire.AckCmd{Tenant: wire.DefaultTenant, Group: wire.QueueModeGroup, Items: []wire.AckItem{{
		PartitionID: cl.PartitionID, TxnID: []byte("x"), LeaseID: cl.LeaseID, Status: wire.AckCompleted}}}
	h.index++
	if _, err := h.s.Update([]sm.Entry{{Index: h.index, Cmd: entryOf(h.now, wire.KindAck, ack.Encode(nil))}}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("apply over a corrupt chunk: %v", err)
	}
}

// A data directory of an earlier build (no format mark: its records
// carry no checksums) or of another format is refused with a line that
// says what to do; a new one is marked and reopens.
func TestStoreOfAnotherFormatIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value []byte // nil: no mark
	}{{"earlier build", nil}, {"other format", []byte{0, 0, 0, 0, 0, 0, 0, 9}}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.push("q", "p", `{"a":1}`)
			dir := h.s.dbDir
			h.s.Close()
			db, err := pebble.Open(dir, &pebble.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.value == nil {
				err = db.Delete(keyFormat, pebble.Sync)
			} else {
				err = db.Set(keyFormat, tc.value, pebble.Sync)
			}
			if err != nil {
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
		})
	}
}
