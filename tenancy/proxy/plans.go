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

// take takes cost tokens if there are that many and says how long until
// there would be otherwise.
func (b *bucket) take(now time.Time, rate, burst, cost float64) (ok bool, wait time.Duration) {
	if b.last.IsZero() {
		b.tokens = burst
	} else {
		b.tokens = min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	}
	b.last = now
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
// §6.6: buckets are per node).
type rates struct {
	mu      sync.Mutex
	buckets map[rateKey]*bucket
}

// rateKey names one bucket: a cluster's requests or its messages.
type rateKey struct {
	cluster  string
	messages bool
}

// takeRequest charges one request to cluster under lim.
func (r *rates) takeRequest(cluster string, lim Limits, now time.Time) (bool, time.Duration) {
	return r.take(rateKey{cluster, false}, lim[LimitRequestsPerSec], lim[LimitRequestsBurst], 1, now)
}

// takeMessages charges n messages to cluster under lim.
func (r *rates) takeMessages(cluster string, lim Limits, n int, now time.Time) (bool, time.Duration) {
	if n <= 0 {
		return true, 0
	}
	return r.take(rateKey{cluster, true}, lim[LimitMessagesPerSec], lim[LimitMessagesBurst], float64(n), now)
}

// take charges cost to one bucket (rate nil: unlimited; burst nil: the
// rate). A refused charge takes nothing; the wait says when it would
// pass.
func (r *rates) take(k rateKey, rate, burst *int64, cost float64, now time.Time) (bool, time.Duration) {
	if rate == nil {
		return true, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.buckets == nil {
		r.buckets = map[rateKey]*bucket{}
	}
	b := r.buckets[k]
	if b == nil {
		b = &bucket{}
		r.buckets[k] = b
	}
	size := float64(*rate)
	if burst != nil {
		size = float64(*burst)
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
