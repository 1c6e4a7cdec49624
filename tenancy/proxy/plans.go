package proxy

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"
)

// Limits are a plan's limits by name; a nil value is unlimited. A
// cluster's overrides have the same shape: a name present there replaces
// the plan's value, nil included.
type Limits map[string]*int64

// Limit names (spec §6.5).
const (
	LimitRequestsPerSec   = "requests_per_sec"
	LimitRequestsBurst    = "requests_burst"
	LimitMessagesPerSec   = "messages_per_sec"
	LimitMessagesBurst    = "messages_burst"
	LimitMaxQueues        = "max_queues"
	LimitMaxPartitions    = "max_partitions_per_queue"
	LimitMaxParkedPops    = "max_parked_pops"
	LimitMaxPayloadBytes  = "max_payload_bytes"
	LimitMaxItemsPerPush  = "max_items_per_push"
	LimitMaxRetainedBytes = "max_retained_bytes"
	LimitRetentionDays    = "retention_days"
	LimitMonthlyMsgsQuota = "monthly_msgs_quota"
)

var limitNames = []string{LimitRequestsPerSec, LimitRequestsBurst, LimitMessagesPerSec, LimitMessagesBurst,
	LimitMaxQueues, LimitMaxPartitions, LimitMaxParkedPops, LimitMaxPayloadBytes, LimitMaxItemsPerPush,
	LimitMaxRetainedBytes, LimitRetentionDays, LimitMonthlyMsgsQuota}

// Plan is a set of limits and features clusters take by code.
type Plan struct {
	Code     string    `json:"code"`
	Limits   Limits    `json:"limits"`
	Features []Feature `json:"features"`
}

func n(v int64) *int64 { return &v }

const (
	kib = 1 << 10
	gib = 1 << 30
)

// seededPlans are the four plans of spec §6.5, written at the first boot.
func seededPlans() []Plan {
	basic := []Feature{FeatureKV, FeatureTimers, FeatureEphemeral}
	full := []Feature{FeatureKV, FeatureTimers, FeatureEphemeral, FeatureStreams, FeatureTraces}
	plan := func(code string, rps, rburst, mps, mburst, queues, parts, parked, payload, items, retained, days int64, f []Feature) Plan {
		return Plan{Code: code, Features: f, Limits: Limits{
			LimitRequestsPerSec: n(rps), LimitRequestsBurst: n(rburst), LimitMessagesPerSec: n(mps), LimitMessagesBurst: n(mburst),
			LimitMaxQueues: n(queues), LimitMaxPartitions: n(parts), LimitMaxParkedPops: n(parked),
			LimitMaxPayloadBytes: n(payload), LimitMaxItemsPerPush: n(items), LimitMaxRetainedBytes: n(retained),
			LimitRetentionDays: n(days), LimitMonthlyMsgsQuota: nil,
		}}
	}
	return []Plan{
		plan("free", 5, 25, 20, 100, 20, 8, 50, 256*kib, 1000, 1*gib, 7, basic),
		plan("dev", 10, 50, 40, 200, 50, 16, 150, 512*kib, 2000, 3*gib, 14, basic),
		plan("pro", 50, 200, 200, 800, 200, 32, 1000, 1024*kib, 5000, 20*gib, 30, full),
		plan("dedicated-s", 200, 800, 600, 2000, 1000, 64, 5000, 4096*kib, 10000, 200*gib, 90, full),
	}
}

// effective is a plan's limits with a cluster's overrides applied.
func effective(p *Plan, overrides Limits) Limits {
	out := make(Limits, len(p.Limits)+len(overrides))
	for k, v := range p.Limits {
		out[k] = v
	}
	for k, v := range overrides {
		out[k] = v
	}
	return out
}

// parseOverrides reads a PUT overrides body: an object of known limit
// names to non-negative whole numbers or null, or null for none at all.
func parseOverrides(body []byte) (Limits, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("overrides must be a JSON object or null: %w", err)
	}
	if raw == nil {
		return Limits{}, nil
	}
	out := Limits{}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !slices.Contains(limitNames, k) {
			return nil, fmt.Errorf("unknown limit %q", k)
		}
		var v *float64
		if err := json.Unmarshal(raw[k], &v); err != nil || (v != nil && (*v < 0 || *v != math.Trunc(*v) || *v > math.MaxInt64/2)) {
			return nil, fmt.Errorf("limit %q must be a non-negative whole number or null", k)
		}
		if v == nil {
			out[k] = nil
		} else {
			out[k] = n(int64(*v))
		}
	}
	return out, nil
}

// bucket is a token bucket: rate tokens a second up to burst.
type bucket struct {
	tokens float64
	last   time.Time
}

// refill adds what the time since the last charge earned, up to burst; a
// new bucket starts full.
func (b *bucket) refill(now time.Time, rate, burst float64) {
	if b.last.IsZero() {
		b.tokens = burst
	} else if now.After(b.last) {
		b.tokens = min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	}
	if now.After(b.last) {
		b.last = now
	}
}

// take takes cost tokens if there are that many and says how long until
// there would be otherwise.
func (b *bucket) take(now time.Time, rate, burst, cost float64) (ok bool, wait time.Duration) {
	b.refill(now, rate, burst)
	if b.tokens >= cost {
		b.tokens -= cost
		return true, 0
	}
	if rate <= 0 {
		return false, time.Hour
	}
	return false, time.Duration((cost - b.tokens) / rate * float64(time.Second))
}

// rates holds this node's request and message buckets per cluster (spec
// §6.6: buckets are per node). Each cluster's pair has its own lock, so
// no lock is shared by every cluster's requests; both doors (HTTP and
// the Kafka logins of kafka_policy.go) charge the same pair.
type rates struct {
	by sync.Map // cluster id → *clusterRates
}

// clusterRates are one cluster's buckets.
type clusterRates struct {
	mu       sync.Mutex
	requests bucket
	messages bucket
}

// of is cluster's buckets, made at its first request.
func (r *rates) of(cluster string) *clusterRates {
	if cr, ok := r.by.Load(cluster); ok {
		return cr.(*clusterRates)
	}
	cr, _ := r.by.LoadOrStore(cluster, &clusterRates{})
	return cr.(*clusterRates)
}

// takeRequest charges one request to cluster under lim.
func (r *rates) takeRequest(cluster string, lim Limits, now time.Time) (bool, time.Duration) {
	return r.of(cluster).take(false, lim[LimitRequestsPerSec], lim[LimitRequestsBurst], 1, now)
}

// takeMessages charges n messages to cluster under lim.
func (r *rates) takeMessages(cluster string, lim Limits, n int, now time.Time) (bool, time.Duration) {
	if n <= 0 {
		return true, 0
	}
	return r.of(cluster).take(true, lim[LimitMessagesPerSec], lim[LimitMessagesBurst], float64(n), now)
}

// charge is a Kafka request's charge: as Kafka's client quotas, the
// request is served whatever the buckets hold, and the wait until they
// would have held it is the throttle its answer carries (KIP-599's token
// bucket form of Kafka's throttle, (observed − quota) / quota × window).
// A bucket goes into debt by at most one burst, so the throttle is at
// most burst / rate.
func (cr *clusterRates) charge(lim Limits, msgs int, now time.Time) time.Duration {
	rr, mr := lim[LimitRequestsPerSec], lim[LimitMessagesPerSec]
	if msgs <= 0 {
		mr = nil
	}
	if rr == nil && mr == nil {
		return 0
	}
	cr.mu.Lock() // once for both buckets: this runs for every Kafka request
	defer cr.mu.Unlock()
	var wait time.Duration
	if rr != nil {
		wait = cr.requests.charge(now, float64(*rr), bucketSize(rr, lim[LimitRequestsBurst]), 1)
	}
	if mr != nil {
		wait = max(wait, cr.messages.charge(now, float64(*mr), bucketSize(mr, lim[LimitMessagesBurst]), float64(msgs)))
	}
	return wait
}

// bucketSize is a bucket's size: its burst, or its rate without one.
func bucketSize(rate, burst *int64) float64 {
	if burst != nil {
		return float64(*burst)
	}
	return float64(*rate)
}

// take charges cost to one of the buckets (rate nil: unlimited; burst
// nil: the rate), as HTTP does: refused when the bucket is short, taking
// nothing then; the wait says when it would pass. Kafka's charge draws on
// the same buckets with the same refill (bucket.refill), into debt.
func (cr *clusterRates) take(messages bool, rate, burst *int64, cost float64, now time.Time) (bool, time.Duration) {
	if rate == nil {
		return true, 0
	}
	size := bucketSize(rate, burst)
	cr.mu.Lock()
	defer cr.mu.Unlock()
	b := &cr.requests
	if messages {
		b = &cr.messages
	}
	saved := *b
	// A push larger than the burst could never pass; it empties the
	// bucket instead.
	ok, wait := b.take(now, float64(*rate), size, min(cost, size))
	if !ok {
		*b = saved
	}
	return ok, wait
}

// charge takes cost tokens whatever there are, down to -burst, and says
// how long until the bucket is back at zero.
func (b *bucket) charge(now time.Time, rate, burst, cost float64) time.Duration {
	b.refill(now, rate, burst)
	b.tokens = max(b.tokens-cost, -burst)
	if b.tokens >= 0 {
		return 0
	}
	if rate <= 0 {
		return time.Hour
	}
	return time.Duration(-b.tokens / rate * float64(time.Second))
}
