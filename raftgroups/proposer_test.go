package raftgroups

import (
	"errors"
	"testing"
	"time"

	"github.com/queen-mq/queen/wire"
)

// A proposal is retried only while the state machine still recognises its
// attempts (storage/retries.go), however long the request may wait.
func TestRetriesStayInsideTheWindowTheStoreRemembers(t *testing.T) {
	stamp := time.UnixMilli(1_700_000_000_000)
	if got := retryDeadline(stamp, 30*time.Second); !got.Equal(stamp.Add(30 * time.Second)) {
		t.Fatalf("short request: %v", got.Sub(stamp))
	}
	if got := retryDeadline(stamp, time.Hour); got.Sub(stamp) != wire.RetryWindowMs*time.Millisecond {
		t.Fatalf("long request: %v", got.Sub(stamp))
	}
	if wire.RememberRetriesMs < 2*wire.RetryWindowMs {
		t.Fatal("the store must remember retries well past the retry window")
	}
}

func sizedRequest(n int) *request {
	c := rawCmd(n)
	return &request{cmds: []wire.Command{c}, size: c.EncodedLen(), done: make(chan reply, 1)}
}

// Gathering stops before a request that would take the entry past the
// entry limit; that request leads the next entry, so order is kept and no
// entry is ever over the limit.
func TestGatherNeverBuildsAnEntryOverTheLimit(t *testing.T) {
	const limit = 10 << 20
	p := &proposer{in: make(chan *request, 16), gatherBytes: 4 << 20, entryLimit: limit}
	a, b, c, d := sizedRequest(3<<20), sizedRequest(limit), sizedRequest(1<<20), sizedRequest(1<<20)
	for _, r := range []*request{b, c, d} {
		p.in <- r
	}
	var entries [][]*request
	first := a
	for first != nil {
		batch, size := p.gather(first)
		sum := 0
		for _, r := range batch {
			sum += r.size
		}
		if sum != size || size > limit {
			t.Fatalf("entry of %d bytes (reported %d), limit %d", sum, size, limit)
		}
		entries = append(entries, batch)
		first, p.held = p.held, nil
		if first == nil {
			select {
			case first = <-p.in:
			default:
			}
		}
	}
	want := [][]*request{{a}, {b}, {c, d}}
	if len(entries) != len(want) {
		t.Fatalf("got %d entries, want %d", len(entries), len(want))
	}
	for i := range want {
		if len(entries[i]) != len(want[i]) {
			t.Fatalf("entry %d has %d requests, want %d", i, len(entries[i]), len(want[i]))
		}
		for j := range want[i] {
			if entries[i][j] != want[i][j] {
				t.Fatalf("entry %d request %d out of order", i, j)
			}
		}
	}
}

// An entry carries at most wire.MaxCommandsPerEntry commands: the state
// machine refuses an entry with more as malformed.
func TestGatherKeepsTheCommandCountInBounds(t *testing.T) {
	p := &proposer{in: make(chan *request, 4), gatherBytes: 64 << 20, entryLimit: 64 << 20}
	many := func(n int) *request {
		r := &request{cmds: make([]wire.Command, n), done: make(chan reply, 1)}
		for i := range r.cmds {
			r.cmds[i] = wire.Command{Kind: 255}
			r.size += r.cmds[i].EncodedLen()
		}
		return r
	}
	p.in <- many(wire.MaxCommandsPerEntry / 2)
	p.in <- many(wire.MaxCommandsPerEntry/2 + 1)
	batch, _ := p.gather(many(1))
	if len(batch) != 2 || p.held == nil {
		t.Fatalf("gathered %d requests (held %v), want 2 and the third held", len(batch), p.held != nil)
	}
}

// A request larger than the entry limit alone is refused before it is
// queued, whichever path proposes it.
func TestEnqueueRefusesARequestOverTheLimit(t *testing.T) {
	p := &proposer{in: make(chan *request, 1), stop: make(chan struct{}), entryLimit: 1 << 20, disk: &diskGuard{}}
	if _, err := p.enqueue([]wire.Command{rawCmd(1<<20 + 1)}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if _, err := p.enqueue([]wire.Command{rawCmd(1 << 20)}); err != nil {
		t.Fatalf("a request of exactly the limit: %v", err)
	}
}
