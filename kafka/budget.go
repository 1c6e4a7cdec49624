package kafka

import (
	"context"
	"sync"
)

// byteBudget bounds the request bytes held by all connections together.
// A reader acquires a frame's size before allocating it and the handler
// releases it once the response is built. One frame larger than the whole
// budget is admitted when nothing else is held, so no request can starve.
type byteBudget struct {
	mu      sync.Mutex
	max     int
	used    int
	waiters int
	freed   chan struct{} // closed and replaced when bytes are released to waiters
}

func newByteBudget(max int) *byteBudget {
	return &byteBudget{max: max, freed: make(chan struct{})}
}

// acquire waits until n bytes fit, or ctx ends.
func (b *byteBudget) acquire(ctx context.Context, n int) error {
	b.mu.Lock()
	for b.used != 0 && b.used+n > b.max {
		freed := b.freed
		b.waiters++
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			b.mu.Lock()
			b.waiters--
			b.mu.Unlock()
			return ctx.Err()
		}
		b.mu.Lock()
		b.waiters--
	}
	b.used += n
	b.mu.Unlock()
	return nil
}

func (b *byteBudget) release(n int) {
	b.mu.Lock()
	b.used -= n
	if b.waiters > 0 {
		close(b.freed)
		b.freed = make(chan struct{})
	}
	b.mu.Unlock()
}

// inUse reports the bytes currently held (for tests and metrics).
func (b *byteBudget) inUse() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// shareBudgets hands out one byteBudget per share (Config.ShareOf), held
// by the connections logged in with it; a share no connection holds is
// forgotten. A frame keeps the budget it was read under until released,
// so a share forgotten and made again meanwhile costs at most one
// generation's frames over the bound.
type shareBudgets struct {
	max int
	mu  sync.Mutex
	m   map[string]*shareBudget
}

type shareBudget struct {
	*byteBudget
	key  string
	refs int
}

// hold returns key's budget with one more holder; nil when shares are off
// or key is "".
func (s *shareBudgets) hold(key string) *shareBudget {
	if s.max <= 0 || key == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*shareBudget{}
	}
	b := s.m[key]
	if b == nil {
		b = &shareBudget{byteBudget: newByteBudget(s.max), key: key}
		s.m[key] = b
	}
	b.refs++
	return b
}

// drop gives a holder's place back (b may be nil).
func (s *shareBudgets) drop(b *shareBudget) {
	if b == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.refs--; b.refs == 0 && s.m[b.key] == b {
		delete(s.m, b.key)
	}
}

// frameBudget is what a frame's bytes are taken from (readFrameBody): the
// node-wide budget and, for a logged-in connection with a share, its
// share's; release gives a whole frame's bytes back to both.
type frameBudget struct {
	node  *byteBudget
	share *shareBudget
}

func (f frameBudget) release(n int) {
	f.node.release(n)
	if f.share != nil {
		f.share.release(n)
	}
}
