package logbound

import (
	"strings"
	"testing"
	"time"
)

func TestClip(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"alice", "alice"},
		{strings.Repeat("a", 70), strings.Repeat("a", 64) + "...(70 bytes)"},
		{strings.Repeat("é", 40), strings.Repeat("é", 32) + "...(80 bytes)"}, // cut on a rune boundary
	} {
		if got := Clip(tc.in, 64); got != tc.want {
			t.Errorf("Clip(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestLogGate(t *testing.T) {
	g := Gate{Interval: time.Second}
	t0 := time.Unix(1_900_000_000, 0)
	if ok, held := g.Pass(t0); !ok || held != 0 {
		t.Fatalf("first line: %v %d", ok, held)
	}
	for i := range 3 {
		if ok, _ := g.Pass(t0.Add(time.Duration(i+1) * 100 * time.Millisecond)); ok {
			t.Fatalf("line %d within the interval passed", i)
		}
	}
	if ok, held := g.Pass(t0.Add(time.Second)); !ok || held != 3 {
		t.Fatalf("after the interval: %v, held %d, want 3", ok, held)
	}
}
