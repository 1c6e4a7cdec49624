package tenancy

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

func TestPlacementIsStableAndHonoursTheMapping(t *testing.T) {
	a, _ := wire.ParseID("7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c")
	p, err := NewPlacement(4, "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c=3")
	if err != nil {
		t.Fatal(err)
	}
	if p.GroupOf(a) != 3 {
		t.Fatalf("mapped tenant in group %d", p.GroupOf(a))
	}
	q, _ := NewPlacement(4, "")
	seen := map[int]bool{}
	for i := 0; i < 64; i++ {
		id := wire.ID{0: byte(i), 15: 1}
		g := q.GroupOf(id)
		if g != q.GroupOf(id) || g < 0 || g > 3 {
			t.Fatalf("unstable or out of range: %d", g)
		}
		seen[g] = true
	}
	if len(seen) != 4 {
		t.Fatalf("hash used only groups %v", seen)
	}
}

func TestPlacementRefusesBadSpecs(t *testing.T) {
	for _, spec := range []string{"nope", "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c=4", "zz=1"} {
		if _, err := NewPlacement(4, spec); err == nil {
			t.Fatalf("%q accepted", spec)
		}
	}
}
