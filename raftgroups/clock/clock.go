// Package clock is a node's source of time for everything that reaches the
// replicated state: the stamp on every raft entry this node proposes (the
// state machine's only notion of "now", see wire.AppendEntry), and the
// "now" the node compares with replicated times (lease expiries, timers,
// transaction deadlines).
//
// The replicated clock is the largest stamp applied, so one node whose
// wall clock runs ahead would move its groups' time forward for good:
// leases expire early, dedup windows lapse, retention deletes early.
// Dragonboat forwards a follower's proposal to the leader with the
// follower's stamp, so every node's clock matters. A Clock therefore:
//
//   - runs on the monotonic clock between corrections, so a step of the
//     wall clock (an operator, a VM resumed, a bad NTP answer) does not
//     move it: Sync compares the wall clock with it every round and
//     follows the wall only while the two agree within the max skew; a
//     jump larger than that is reported and not followed;
//   - is compared with its peers' clocks every round (NTP-style: the
//     peer's answer against this clock at the middle of the round trip):
//     when this node is off the median of the cluster, itself included, by
//     more than the max skew, it takes the cluster's time. The median of a
//     majority cannot be moved by a minority of wrong clocks.
//
// Nothing here is replicated or deterministic: each node keeps its own
// Clock, and the bound holds because every stamp comes from one.
package clock

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a node's clock.
type Config struct {
	// MaxSkew is how far this node's time may be from the cluster's before
	// it takes the cluster's, and how large a wall-clock jump it follows
	// (QUEEN_RAFT_MAX_CLOCK_SKEW_MS).
	MaxSkew time.Duration
	// TestOffset is added to every wall-clock reading, so a test can run
	// a node whose wall clock is wrong (QUEEN_TEST_CLOCK_OFFSET_MS).
	TestOffset time.Duration
	Logger     *slog.Logger
	// Read returns the local clocks: the wall clock in unix milliseconds
	// and a monotonic reading. Tests replace it; nil reads time.Now.
	Read func() (wallMs int64, mono time.Duration)
}

// Clock is one node's time. NowMs is safe for concurrent use; Sync is
// called by one goroutine at a time.
type Clock struct {
	cfg    Config
	log    *slog.Logger
	anchor atomic.Pointer[anchor]

	mu       sync.Mutex
	lastDiff int64 // wall - clock at the last Sync

	synced        atomic.Bool
	clusterOffset atomic.Int64 // median of the peers' clocks minus this one at the last Sync with a majority
	wallOffset    atomic.Int64 // this clock minus the wall clock at the last Sync
	steps         atomic.Uint64
	corrections   atomic.Uint64
}

// anchor pins the clock: at monotonic reading mono it read ms.
type anchor struct {
	mono time.Duration
	ms   int64
}

// New starts a clock on the local wall clock.
func New(cfg Config) *Clock {
	if cfg.Read == nil {
		start := time.Now()
		cfg.Read = func() (int64, time.Duration) {
			now := time.Now()
			return now.UnixMilli(), now.Sub(start) // Sub uses the monotonic readings
		}
	}
	if cfg.MaxSkew <= 0 {
		cfg.MaxSkew = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Clock{cfg: cfg, log: cfg.Logger}
	wall, mono := c.read()
	c.anchor.Store(&anchor{mono: mono, ms: wall})
	return c
}

// read is the local wall clock (with the test offset) and the monotonic
// reading.
func (c *Clock) read() (int64, time.Duration) {
	wall, mono := c.cfg.Read()
	return wall + c.cfg.TestOffset.Milliseconds(), mono
}

// NowMs is this node's time in unix milliseconds.
func (c *Clock) NowMs() int64 {
	_, mono := c.cfg.Read()
	return c.at(mono)
}

func (c *Clock) at(mono time.Duration) int64 {
	a := c.anchor.Load()
	return a.ms + (mono - a.mono).Milliseconds()
}

// MaxSkew is the bound this clock keeps.
func (c *Clock) MaxSkew() time.Duration { return c.cfg.MaxSkew }

// Sync runs one round: offsets are the peers' clocks minus this clock
// (each measured at the middle of its round trip) from the peers that
// answered, out of voters members, this node included. With answers from
// a majority it corrects the clock to the median when that is further
// than the max skew; then it looks at the wall clock. It reports whether a
// majority answered.
func (c *Clock) Sync(offsets []int64, voters int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	majority := 2*(len(offsets)+1) > voters
	if majority {
		m := median(append(offsets, 0))
		c.clusterOffset.Store(m)
		if abs(m) > c.cfg.MaxSkew.Milliseconds() {
			c.shift(m)
			c.lastDiff -= m // the wall did not move: the clock did
			c.corrections.Add(1)
			c.log.Warn("clock: this node's clock is off the cluster's by more than QUEEN_RAFT_MAX_CLOCK_SKEW_MS; using the cluster's time (check this host's time sync)",
				"offset_ms", m, "max_skew_ms", c.cfg.MaxSkew.Milliseconds(), "peers", len(offsets))
		}
		c.synced.Store(true)
	}
	c.checkWall()
	return majority
}

// checkWall follows the wall clock while it agrees with this clock within
// the max skew (the small adjustments NTP makes) and ignores a jump larger
// than that: the clock keeps running on the monotonic clock.
func (c *Clock) checkWall() {
	wall, mono := c.read()
	diff := wall - c.at(mono)
	step := diff - c.lastDiff
	c.lastDiff = diff
	skew := c.cfg.MaxSkew.Milliseconds()
	switch {
	case abs(step) > skew:
		c.steps.Add(1)
		c.log.Warn("clock: the wall clock jumped by more than QUEEN_RAFT_MAX_CLOCK_SKEW_MS; not followed, this node keeps time on its monotonic clock",
			"jump_ms", step, "wall_minus_clock_ms", diff, "max_skew_ms", skew)
	case diff != 0 && abs(diff) <= skew:
		c.shift(diff)
		c.lastDiff = 0
		diff = 0
	}
	c.wallOffset.Store(-diff)
}

// shift moves the clock by d milliseconds from now on.
func (c *Clock) shift(d int64) {
	_, mono := c.cfg.Read()
	c.anchor.Store(&anchor{mono: mono, ms: c.at(mono) + d})
}

// Stats is what the node reports about its clock.
type Stats struct {
	Synced        bool  // compared with a majority of the cluster at least once
	ClusterOffset int64 // ms: the cluster's median minus this clock, at the last comparison
	WallOffset    int64 // ms: this clock minus the local wall clock
	Steps         uint64
	Corrections   uint64
}

// Stats reports the clock's state.
func (c *Clock) Stats() Stats {
	return Stats{Synced: c.synced.Load(), ClusterOffset: c.clusterOffset.Load(), WallOffset: c.wallOffset.Load(),
		Steps: c.steps.Load(), Corrections: c.corrections.Load()}
}

// median of vs (which it sorts). With an even count the middle value
// nearer zero is taken: with two clocks that disagree nobody can tell which
// is wrong, and the least correction is the safest.
func median(vs []int64) int64 {
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	a, b := vs[n/2-1], vs[n/2]
	if abs(a) <= abs(b) {
		return a
	}
	return b
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
