package proc

import (
	"os"
	"testing"
)

// CPUTime reads this very process's CPU time, which only grows.
func TestCPUTimeReadsProcStat(t *testing.T) {
	a, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 50_000_000 {
		x += i
	}
	_ = x
	b, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if b < a {
		t.Fatalf("CPU time went from %v to %v", a, b)
	}
	if _, err := CPUTime(1 << 30); err == nil {
		t.Fatal("a pid that does not exist gave a CPU time")
	}
}
