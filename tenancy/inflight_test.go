package tenancy

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

func TestInflight(t *testing.T) {
	f := NewInflight(100)
	a, b := wire.ID{1}, wire.ID{2}
	releaseA, ok := f.Take(a, 250)
	if !ok {
		t.Fatal("a tenant holding nothing is refused a request over the limit")
	}
	if _, ok := f.Take(a, 1); ok {
		t.Fatal("a tenant over its limit admitted more")
	}
	var releasesB []func()
	for _, n := range []int{60, 40} {
		r, ok := f.Take(b, n)
		if !ok {
			t.Fatalf("another tenant's limit is its own: %d more refused", n)
		}
		releasesB = append(releasesB, r)
	}
	if _, ok := f.Take(b, 1); ok {
		t.Fatal("past the limit is refused")
	}
	releaseA()
	releaseA2, ok := f.Take(a, 100)
	if !ok {
		t.Fatal("released items not given back")
	}
	releaseA2()
	for _, r := range releasesB {
		r()
	}
	if len(f.used) != 0 {
		t.Fatalf("idle tenants kept: %v", f.used)
	}
}
