package proxy

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// cache holds the rows the request path reads (keys, clusters, tenants,
// plans) on this node. Every change to the proxy's state bumps the
// replicated invalidation feed (kvStore.apply); each node polls it every
// QUEEN_PROXY_INVAL_POLL_MS and drops everything when it moved, so a
// revocation is seen everywhere within about one poll.
//
// When the feed cannot be read (the KV has no majority), what was cached
// keeps serving for QUEEN_PROXY_STALE_GRACE_MS after the last good poll,
// then is dropped: a key never checked is refused all along, since its
// row cannot be read.
type cache struct {
	store      *kvStore
	poll       time.Duration
	staleGrace time.Duration
	log        *slog.Logger

	mu       sync.Mutex
	epoch    uint64 // bumped at every drop; a load started before one is not kept
	gen      uint64
	lastGood time.Time
	rows     map[string]cached // by KV key
}

// cached is one row as read: found false remembers an absent row, so a
// flood of unknown keys costs one read each per generation.
type cached struct {
	found bool
	value any
}

// maxCachedRows bounds the cache; past it everything is dropped and
// reread, which only costs reads.
const maxCachedRows = 200000

func newCache(store *kvStore, poll, staleGrace time.Duration, log *slog.Logger) *cache {
	return &cache{store: store, poll: poll, staleGrace: staleGrace, log: log, rows: map[string]cached{}, lastGood: time.Now()}
}

// load returns the row at key decoded into a fresh value of new(), from
// the cache or the KV.
func load[T any](ctx context.Context, c *cache, key string) (*T, bool, error) {
	c.mu.Lock()
	if r, ok := c.rows[key]; ok {
		c.mu.Unlock()
		if !r.found {
			return nil, false, nil
		}
		return r.value.(*T), true, nil
	}
	epoch := c.epoch
	c.mu.Unlock()
	v := new(T)
	found, err := c.store.get(ctx, key, v)
	if err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	if c.epoch == epoch {
		if len(c.rows) >= maxCachedRows {
			c.rows = map[string]cached{}
		}
		c.rows[key] = cached{found: found, value: v}
	}
	c.mu.Unlock()
	if !found {
		return nil, false, nil
	}
	return v, true, nil
}

// drop forgets every cached row.
func (c *cache) drop() {
	c.mu.Lock()
	c.rows = map[string]cached{}
	c.epoch++
	c.mu.Unlock()
}

// refresh polls the feed once: a moved generation drops the cache; a
// failed read past the stale grace drops it too.
func (c *cache) refresh(ctx context.Context) {
	gen, err := c.store.generation(ctx)
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if now.Sub(c.lastGood) > c.staleGrace && len(c.rows) > 0 {
			c.log.Warn("proxy: the invalidation feed is unreadable past QUEEN_PROXY_STALE_GRACE_MS; dropping cached credentials",
				"err", err, "since", c.lastGood)
			c.rows = map[string]cached{}
			c.epoch++
		}
		return
	}
	c.lastGood = now
	if gen != c.gen {
		c.gen = gen
		c.rows = map[string]cached{}
		c.epoch++
	}
}

// run polls the feed until ctx ends.
func (c *cache) run(ctx context.Context) {
	every(ctx, c.poll, func(ctx context.Context) {
		pctx, cancel := context.WithTimeout(ctx, max(c.poll, time.Second))
		defer cancel()
		c.refresh(pctx)
	})
}
