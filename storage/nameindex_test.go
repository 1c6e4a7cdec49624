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
