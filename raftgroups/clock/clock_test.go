package clock

import (
	"io"
	"log/slog"
	"testing"
	"time"
)

const hour = int64(time.Hour / time.Millisecond)

// fake is a host's two clocks, moved by the test.
type fake struct {
	wall int64 // unix ms
	mono time.Duration
}

func (f *fake) read() (int64, time.Duration) { return f.wall, f.mono }

// pass lets d go by on both clocks.
func (f *fake) pass(d time.Duration) {
	f.wall += d.Milliseconds()
	f.mono += d
}

func newFake(t *testing.T, offset time.Duration) (*Clock, *fake) {
	t.Helper()
	f := &fake{wall: 1_700_000_000_000, mono: time.Second}
	c := New(Config{MaxSkew: 500 * time.Millisecond, TestOffset: offset, Read: f.read,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return c, f
}

func near(t *testing.T, what string, got, want int64) {
	t.Helper()
	if d := got - want; d < -5 || d > 5 {
		t.Fatalf("%s: %d, want %d (off by %d ms)", what, got, want, d)
	}
}

// A wall-clock jump larger than the max skew is seen against the
// monotonic clock and not followed; small adjustments are.
func TestWallClockJumpIsNotFollowed(t *testing.T) {
	c, f := newFake(t, 0)
	f.pass(time.Second)
	c.Sync(nil, 1)
	near(t, "after a second", c.NowMs(), f.wall)

	f.wall += hour // the wall clock is stepped an hour ahead
	f.pass(time.Second)
	c.Sync(nil, 1)
	near(t, "after the jump", c.NowMs(), f.wall-hour)
	if s := c.Stats(); s.Steps != 1 || s.WallOffset != -hour {
		t.Fatalf("stats after the jump: %+v", s)
	}
	f.pass(time.Second)
	c.Sync(nil, 1)
	if s := c.Stats(); s.Steps != 1 {
		t.Fatalf("the same jump counted again: %+v", s)
	}

	c2, f2 := newFake(t, 0)
	f2.wall += 200 // NTP nudges the wall clock by less than the skew
	f2.pass(time.Second)
	c2.Sync(nil, 1)
	near(t, "after a small adjustment", c2.NowMs(), f2.wall)
	if s := c2.Stats(); s.Steps != 0 {
		t.Fatalf("a small adjustment counted as a jump: %+v", s)
	}
}

// A node an hour ahead takes the cluster's time from the median of a
// majority, keeps it, and does not mistake its own wall clock, which still
// disagrees, for a jump.
func TestClockOffTheClusterTakesTheClusterTime(t *testing.T) {
	c, f := newFake(t, time.Hour)
	near(t, "at boot", c.NowMs(), f.wall+hour)
	if !c.Sync([]int64{-hour, -hour + 3}, 3) {
		t.Fatal("two answers of three voters are a majority")
	}
	near(t, "after the comparison", c.NowMs(), f.wall)
	for i := 0; i < 5; i++ {
		f.pass(time.Second)
		c.Sync([]int64{2, -1}, 3)
		near(t, "later", c.NowMs(), f.wall)
	}
	s := c.Stats()
	if s.Corrections != 1 || s.Steps != 0 || !s.Synced {
		t.Fatalf("stats: %+v", s)
	}
	near(t, "offset from the wall clock", s.WallOffset, -hour)
}

// The median is not moved by a minority: a correct node next to one node
// an hour ahead and one an hour behind stays on its own time, and so does
// one that hears a single disagreeing peer (nobody can tell which is
// wrong) or a minority of the voters.
func TestMinorityCannotMoveTheClock(t *testing.T) {
	for name, tc := range map[string]struct {
		offsets  []int64
		voters   int
		majority bool
	}{
		"one ahead, one behind": {[]int64{hour, -hour}, 3, true},
		"two ahead of five":     {[]int64{hour, hour, 0, 1}, 5, true},
		"a single peer":         {[]int64{hour}, 3, true},
		"no majority":           {[]int64{-hour}, 5, false},
		"within the skew":       {[]int64{400, 450}, 3, true},
	} {
		c, f := newFake(t, 0)
		if got := c.Sync(tc.offsets, tc.voters); got != tc.majority {
			t.Fatalf("%s: majority %v, want %v", name, got, tc.majority)
		}
		near(t, name, c.NowMs(), f.wall)
		if s := c.Stats(); s.Corrections != 0 || s.Synced != tc.majority {
			t.Fatalf("%s: stats %+v", name, s)
		}
	}
}

// Between rounds the clock runs on the monotonic clock: a jump of the wall
// clock does not show in NowMs even before a round notices it.
func TestClockRunsOnTheMonotonicClock(t *testing.T) {
	c, f := newFake(t, 0)
	f.wall -= hour
	f.pass(250 * time.Millisecond)
	near(t, "after the wall clock jumped back", c.NowMs(), f.wall+hour)
}
