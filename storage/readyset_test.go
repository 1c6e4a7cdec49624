package storage

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestReadySetMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s readySet
	ref := map[uint32]bool{}
	for step := 0; step < 20000; step++ {
		i := uint32(rng.IntN(5000))
		if rng.IntN(3) == 0 {
			s.clear(i)
			delete(ref, i)
		} else {
			s.set(i)
			ref[i] = true
		}
		if step%500 != 0 {
			continue
		}
		start := uint32(rng.IntN(5000))
		var got []uint32
		s.forEachFrom(start, func(i uint32) bool { got = append(got, i); return true })
		var want []uint32
		for k := range ref {
			want = append(want, k)
		}
		slices.Sort(want)
		// Rotate want so it starts at the first member >= start.
		cut, _ := slices.BinarySearch(want, start)
		want = append(want[cut:], want[:cut]...)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d from %d: got %v want %v", step, start, got, want)
		}
		for k := range ref {
			if !s.has(k) {
				t.Fatalf("missing %d", k)
			}
		}
	}
}

func TestReadySetClearDuringIteration(t *testing.T) {
	var s readySet
	for _, i := range []uint32{1, 64, 65, 4095, 4096, 70000} {
		s.set(i)
	}
	var seen []uint32
	s.forEachFrom(65, func(i uint32) bool { seen = append(seen, i); s.clear(i); return true })
	if want := []uint32{65, 4095, 4096, 70000, 1, 64}; !slices.Equal(seen, want) {
		t.Fatalf("got %v want %v", seen, want)
	}
	if s.next(0) != -1 {
		t.Fatal("set should be empty")
	}
}
