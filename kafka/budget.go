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
