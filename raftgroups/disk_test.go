package raftgroups

import (
	"log/slog"
	"testing"

	"github.com/queen-mq/queen/wire"
)

func TestDiskGuardHysteresis(t *testing.T) {
	var pct float64
	d := &diskGuard{dir: "x", high: 85, low: 80, usage: func(string) (float64, error) { return pct, nil }, log: slog.New(slog.DiscardHandler)}
	push := []wire.Command{{Kind: wire.KindPush}}
	drain := []wire.Command{{Kind: wire.KindAck}, {Kind: wire.KindPop}, {Kind: wire.KindDeleteQueue}, {Kind: wire.KindTick}}
	steps := []struct {
		pct  float64
		full bool
	}{{50, false}, {84.9, false}, {85, true}, {82, true}, {80, true}, {79.9, false}, {84, false}, {99, true}}
	for _, s := range steps {
		pct = s.pct
		d.check()
		if d.full.Load() != s.full || d.refuses(push) != s.full {
			t.Fatalf("at %v%%: full=%v refuses=%v, want %v", s.pct, d.full.Load(), d.refuses(push), s.full)
		}
		if d.refuses(drain) {
			t.Fatalf("at %v%%: commands that free space are refused", s.pct)
		}
	}
	for _, k := range []wire.Kind{wire.KindTransaction, wire.KindKafkaProduce, wire.KindKV, wire.KindTimers, wire.KindTrace, wire.KindDLQReplay} {
		if !d.refuses([]wire.Command{{Kind: wire.KindAck}, {Kind: k}}) {
			t.Fatalf("kind %d adds data and is not refused", k)
		}
	}
	off := &diskGuard{high: 100, low: 80, usage: func(string) (float64, error) { return 100, nil }, log: slog.New(slog.DiscardHandler)}
	off.check()
	if off.refuses(push) {
		t.Fatal("a high mark of 100 turns the check off")
	}
	if (*diskGuard)(nil).refuses(push) {
		t.Fatal("no guard refuses nothing")
	}
}

func TestStatfsUsageIsAPercentage(t *testing.T) {
	pct, err := statfsUsage(t.TempDir())
	if err != nil || pct < 0 || pct > 100 {
		t.Fatalf("usage %v %v", pct, err)
	}
}
