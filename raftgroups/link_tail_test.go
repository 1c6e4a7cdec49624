package raftgroups

import (
	"bytes"
	"fmt"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/queen-mq/queen/raftgroups/link"
	"github.com/queen-mq/queen/storage"
)

// The tail serves what the state machine applied, the indexes between as
// skips, never an index it has not seen, and forgets the oldest entries
// past its bound (those are then read from the log).
func TestLinkTailServesAppliedEntries(t *testing.T) {
	st := storage.New(storage.Config{Dir: t.TempDir()})
	tail := &linkTail{limit: 10}
	if _, ok := tail.read(1, 2, 100); ok {
		t.Fatal("an empty tail served an entry")
	}
	woken := tail.changed()
	tail.record(st, []sm.Entry{{Index: 5, Cmd: []byte("aaa")}, {Index: 7, Cmd: []byte("bbb")}})
	select {
	case <-woken:
	default:
		t.Fatal("a record did not wake the waiters")
	}
	select {
	case <-tail.changed():
		t.Fatal("a fresh wait is already woken")
	default:
	}
	ents, ok := tail.read(5, 8, 100)
	if !ok || len(ents) != 3 || string(ents[0].Cmd) != "aaa" || len(ents[1].Cmd) != 0 || string(ents[2].Cmd) != "bbb" {
		t.Fatalf("%v %+v", ok, ents)
	}
	if !ents[0].IsSessionManaged() || ents[1].IsSessionManaged() {
		t.Fatal("held entries must read as proposals, the gaps as empty entries")
	}
	if _, ok := tail.read(4, 8, 100); ok {
		t.Fatal("served an index before the tail")
	}
	if _, ok := tail.read(8, 9, 100); ok {
		t.Fatal("served an index not applied yet")
	}
	if ents, _ := tail.read(5, 8, 1); len(ents) != 1 {
		t.Fatalf("maxSize: %d entries", len(ents))
	}
	// 3+3+6 bytes is over the bound of 10: entry 5 goes, 6 and on stay.
	tail.record(st, []sm.Entry{{Index: 8, Cmd: []byte("cccccc")}})
	if _, ok := tail.read(5, 9, 100); ok {
		t.Fatal("an evicted entry was served")
	}
	if ents, ok := tail.read(6, 9, 100); !ok || len(ents) != 3 || !bytes.Equal(ents[2].Cmd, []byte("cccccc")) {
		t.Fatalf("after eviction: %v %+v", ok, ents)
	}
	// A replay from an earlier index restarts it.
	tail.record(st, []sm.Entry{{Index: 3, Cmd: []byte("x")}})
	if _, ok := tail.read(6, 7, 100); ok {
		t.Fatal("entries kept across a restart of the tail")
	}
	// What the link makes of it.
	var _ link.Source = (*linkServed)(nil)
}

// What the tail costs the apply path per entry on a node serving the
// link: one copy of the entry.
func BenchmarkLinkTailRecord(b *testing.B) {
	for _, size := range []int{450, 16 << 10} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			st := storage.New(storage.Config{Dir: b.TempDir()})
			tail := &linkTail{limit: 16 << 20}
			ents := []sm.Entry{{Cmd: make([]byte, size)}}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				ents[0].Index = uint64(i + 1)
				tail.record(st, ents)
			}
		})
	}
}
