package api

import (
	"net/http"
	"sync"
	"time"
)

// ephRate limits the messages each tenant pushes through this node
// (QUEEN_EPHEMERAL_RATE per second, QUEEN_EPHEMERAL_BURST at once). It is
// counted where the client's request lands, never again on a relay, so a
// cluster of n nodes admits up to n times the rate: the limit protects a
// node's memory and CPU, not a cluster-wide budget, which would need
// coordination on every push.
type ephRate struct {
	rate, burst float64
	mu          sync.Mutex
	buckets     map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// maxBuckets bounds the map: past it, full buckets are forgotten (a
// forgotten bucket starts full, which is what it was).
const maxBuckets = 10000

func newEphRate(rate, burst int) *ephRate {
	if rate <= 0 {
		return nil
	}
	return &ephRate{rate: float64(rate), burst: float64(max(burst, 1)), buckets: map[string]*bucket{}}
}

// allow takes n tokens for tenant, or none and says no. A push larger
// than the burst needs a full bucket.
func (r *ephRate) allow(tenant string, n int, now time.Time) bool {
	if r == nil {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[tenant]
	if b == nil {
		if len(r.buckets) >= maxBuckets {
			r.forgetFull(now)
		}
		b = &bucket{tokens: r.burst, at: now}
		r.buckets[tenant] = b
	}
	b.tokens = min(r.burst, b.tokens+now.Sub(b.at).Seconds()*r.rate)
	b.at = now
	need := min(float64(n), r.burst)
	if b.tokens < need {
		return false
	}
	b.tokens -= need
	return true
}

func (r *ephRate) forgetFull(now time.Time) {
	for t, b := range r.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*r.rate >= r.burst {
			delete(r.buckets, t)
		}
	}
}

var errEphRate = &apiError{http.StatusTooManyRequests, "rate_limited",
	"this tenant pushes ephemeral messages faster than QUEEN_EPHEMERAL_RATE allows"}
