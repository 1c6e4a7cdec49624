package storage

import (
	"fmt"
	"testing"
)

func TestNameIndexFindsEveryNameAndNoOther(t *testing.T) {
	var names []string
	var idx nameIndex
	at := func(i uint32) string { return names[i] }
	for i := range 100_000 {
		names = append(names, fmt.Sprintf("customer-%d", i*7))
		idx.put(names[i], uint32(i))
	}
	for i, n := range names {
		if got, ok := idx.get(n, at); !ok || got != uint32(i) {
			t.Fatalf("get(%q) = %d, %v; want %d", n, got, ok, i)
		}
	}
	for i := range 1000 {
		if got, ok := idx.get(fmt.Sprintf("customer-%d", i*7+1), at); ok {
			t.Fatalf("a name never put was found at %d", got)
		}
	}
	if _, ok := new(nameIndex).get("x", at); ok {
		t.Fatal("an empty index found a name")
	}
	if len(idx.slots) > 4*len(names) {
		t.Fatalf("%d slots for %d names", len(idx.slots), len(names))
	}
}

// Removing entries from long probe runs must leave every other entry
// reachable and the removed ones gone, however the runs wrap.
func TestNameIndexDeleteKeepsTheOthersReachable(t *testing.T) {
	var names []string
	var idx nameIndex
	live := map[uint32]bool{}
	at := func(i uint32) string { return names[i] }
	for i := range 50_000 {
		names = append(names, fmt.Sprintf("device-%d", i))
		idx.put(names[i], uint32(i))
		live[uint32(i)] = true
	}
	for round := range 3 {
		for i := round; i < len(names); i += 3 { // a name put back in an earlier round may go again
			if live[uint32(i)] {
				idx.del(names[i], uint32(i))
				delete(live, uint32(i))
			}
		}
		idx.del("never-put", 7) // a miss changes nothing
		for i, n := range names {
			got, ok := idx.get(n, at)
			if (live[uint32(i)] && got != uint32(i)) || (ok && !live[got]) || (!ok && live[uint32(i)]) {
				t.Fatalf("round %d: get(%q) = %d, %v; live %v", round, n, got, ok, live[uint32(i)])
			}
		}
		if idx.len() != len(live) {
			t.Fatalf("round %d: len %d, want %d", round, idx.len(), len(live))
		}
		// Names come back at new indexes, as a removed partition does.
		for i, end := round, len(names); i < end; i += 6 {
			names = append(names, names[i])
			idx.put(names[i], uint32(len(names)-1))
			live[uint32(len(names)-1)] = true
		}
	}
}
