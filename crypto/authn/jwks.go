package authn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// unknownKidInterval is the least time between two refreshes caused by
	// tokens naming an unknown kid (spec §5.2: at most once per 5 s).
	unknownKidInterval = 5 * time.Second
	// maxJWKSBytes bounds the JWKS document read from the network.
	maxJWKSBytes = 1 << 20
)

var errRateLimited = errors.New("JWKS refresh rate-limited")

// keySet is one fetched JWKS, immutable once published.
type keySet struct {
	byKid map[string]jwk
	all   []jwk
}

// flight is one JWKS fetch in progress, shared by everyone who wants it.
type flight struct {
	done chan struct{}
	err  error
}

// jwksCache holds the keys of JWT_JWKS_URL. Reads are lock-free; refreshes
// are single-flight: concurrent callers wait on the same fetch.
type jwksCache struct {
	url     string
	client  *http.Client
	timeout time.Duration
	log     *slog.Logger
	now     func() time.Time
	base    context.Context // cancelled by Verifier.Close
	wg      *sync.WaitGroup // fetch and refresh goroutines, waited for by Close

	keys  atomic.Pointer[keySet]
	joins atomic.Int64 // refresh calls that waited on another's fetch

	mu          sync.Mutex
	inflight    *flight
	lastAttempt time.Time // start of the last fetch, for the unknown-kid limit
}

func (c *jwksCache) lookup(kid string) (jwk, bool) {
	ks := c.keys.Load()
	if ks == nil {
		return jwk{}, false
	}
	k, ok := ks.byKid[kid]
	return k, ok
}

func (c *jwksCache) all() []jwk {
	if ks := c.keys.Load(); ks != nil {
		return ks.all
	}
	return nil
}

// refresh fetches the JWKS, or joins a fetch already in progress. With
// limited set (refreshes caused by an unknown kid) it fetches at most once per
// unknownKidInterval and returns errRateLimited otherwise. ctx bounds only how
// long this caller waits: the fetch itself runs under the cache's own context
// and JWT_JWKS_TIMEOUT_MS, so one impatient caller cannot abort it for others.
func (c *jwksCache) refresh(ctx context.Context, limited bool) error {
	c.mu.Lock()
	f := c.inflight
	if f == nil {
		now := c.now()
		if limited && !c.lastAttempt.IsZero() && now.Sub(c.lastAttempt) < unknownKidInterval {
			c.mu.Unlock()
			return errRateLimited
		}
		if c.base.Err() != nil {
			c.mu.Unlock()
			return fmt.Errorf("JWKS refresh: %w", c.base.Err())
		}
		f = &flight{done: make(chan struct{})}
		c.inflight = f
		c.lastAttempt = now
		c.wg.Add(1)
		go c.run(f)
	} else {
		c.joins.Add(1)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *jwksCache) run(f *flight) {
	defer c.wg.Done()
	f.err = c.fetch()
	c.mu.Lock()
	c.inflight = nil
	c.mu.Unlock()
	close(f.done)
}

// fetch downloads and parses the JWKS and publishes it. On any failure the
// keys already cached stay in use.
func (c *jwksCache) fetch() error {
	ctx, cancel := context.WithTimeout(c.base, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return fmt.Errorf("JWKS request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		// The client's error quotes the URL, query included, and a JWKS
		// URL's query often carries a token.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = RedactURL(c.url)
		}
		return fmt.Errorf("JWKS fetch: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return fmt.Errorf("JWKS read: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("JWKS fetch: HTTP status %d", resp.StatusCode)
	}
	if len(body) > maxJWKSBytes {
		return fmt.Errorf("JWKS document larger than %d bytes", maxJWKSBytes)
	}
	keys, skipped, err := parseJWKS(body)
	if err != nil {
		return err
	}
	for _, s := range skipped {
		c.log.Debug("jwt: JWKS key skipped", "reason", s)
	}
	ks := &keySet{byKid: make(map[string]jwk, len(keys)), all: keys}
	for _, k := range keys {
		if k.kid == "" {
			continue
		}
		if _, dup := ks.byKid[k.kid]; dup {
			c.log.Warn("jwt: JWKS has two keys with one kid; the first is used", "kid", k.kid)
			continue
		}
		ks.byKid[k.kid] = k
	}
	if len(keys) == 0 {
		c.log.Warn("jwt: JWKS holds no usable signing key", "skipped", len(skipped))
	}
	c.keys.Store(ks)
	return nil
}

// loop refreshes the keys every interval until the cache's context ends.
func (c *jwksCache) loop(interval time.Duration) {
	defer c.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.base.Done():
			return
		case <-t.C:
			if err := c.refresh(c.base, false); err != nil && c.base.Err() == nil {
				c.log.Warn("jwt: JWKS refresh failed; keeping cached keys", "url", RedactURL(c.url), "err", err)
			}
		}
	}
}

// close stops new fetches, cancels the running ones and waits for every
// goroutine the cache started. Cancelling under mu orders it against the
// wg.Add in refresh.
func (c *jwksCache) close(cancel context.CancelFunc) {
	c.mu.Lock()
	cancel()
	c.mu.Unlock()
	c.wg.Wait()
}
