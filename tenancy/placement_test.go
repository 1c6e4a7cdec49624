package tenancy

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

func TestPlacementHonoursTheMapping(t *testing.T) {
	a, _ := wire.ParseID("7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c")
	p, err := NewPlacement(4, "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c=3|1")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.TenantGroups(a); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("pinned tenant's groups %v", got)
	}
	for _, q := range []string{"a", "b", "c", "orders"} {
		if h := p.Home(a, q); h != 1 && h != 3 {
			t.Fatalf("queue %q of a pinned tenant at home %d", q, h)
		}
	}
	if g := p.TenantHome(a); g != 1 && g != 3 {
		t.Fatalf("pinned tenant's KV in group %d", g)
	}
}

// One queue's partitions cover every group, a partition's group is stable,
// and the queue's home is partition 0's group.
func TestQueuePartitionsSpreadOverEveryGroup(t *testing.T) {
	p, _ := NewPlacement(4, "")
	pl := p.Queue(wire.DefaultTenant, "orders")
	seen := map[int]int{}
	for i := uint32(0); i < 8; i++ {
		seen[pl.GroupOf(i)]++
	}
	if len(seen) != 4 {
		t.Fatalf("8 partitions used groups %v", seen)
	}
	for g, n := range seen {
		if n != 2 {
			t.Fatalf("group %d holds %d of 8 partitions", g, n)
		}
	}
	if pl.Home() != p.Home(wire.DefaultTenant, "orders") || pl.GroupOf(0) != pl.Home() {
		t.Fatalf("home %d, partition 0 in %d", pl.Home(), pl.GroupOf(0))
	}
	homes := map[int]bool{}
	coords := map[int]bool{}
	for i := 0; i < 64; i++ {
		name := string(rune('a'+i%26)) + string(rune('a'+i/26))
		g := p.Home(wire.DefaultTenant, name)
		if g != p.Home(wire.DefaultTenant, name) || g < 0 || g > 3 {
			t.Fatalf("unstable or out of range: %d", g)
		}
		homes[g] = true
		coords[p.Coordinator(wire.DefaultTenant, 'g', name)] = true
	}
	if len(homes) != 4 || len(coords) != 4 {
		t.Fatalf("homes %v, coordinators %v", homes, coords)
	}
}

func TestPlacementRefusesBadSpecs(t *testing.T) {
	for _, spec := range []string{"nope", "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c=4", "zz=1", "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c=1|x"} {
		if _, err := NewPlacement(4, spec); err == nil {
			t.Fatalf("%q accepted", spec)
		}
	}
}

func TestPlacementSpecIsCanonical(t *testing.T) {
	a, _ := NewPlacement(4, "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c=3|1, 1c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c=2")
	b, _ := NewPlacement(4, "1c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c=2,7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c=1|3")
	if a.Spec() != b.Spec() {
		t.Fatalf("%q != %q", a.Spec(), b.Spec())
	}
}
