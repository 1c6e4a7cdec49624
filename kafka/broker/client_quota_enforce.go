package broker

import (
	"context"
	"encoding/json"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// The node's cache of the client quotas and their token buckets, per node
// as Kafka meters per broker. The quotas are cached from the replicated
// KV, reloaded only when their generation counter moved (refreshQuotas:
// at once after a change made through this node, else within
// quotaRefreshEvery of a change through another), and a request looks at
// the cache only when some quota is set anywhere: without one, a request
// costs one atomic load. How each
// key is charged and the throttle answered is client_quota_throttle.go:
// a client over a quota is served and answered with throttle_time_ms, and
// its next request meeting that quota waits the throttle out first, as
// Kafka mutes a throttled channel (KIP-219).

// quotaRefreshEvery is how often a node reads the quotas' generation
// (one local key read): about how stale its cache may be after a change
// made through another node, plus the time its replica takes to apply
// the change.
const quotaRefreshEvery = 200 * time.Millisecond

// quotaReloadAnyway is how often a node reloads the quotas whether the
// generation moved or not: a build before the generation writes quotas
// without bumping it, so in a rolling upgrade its changes reach upgraded
// nodes this way.
const quotaReloadAnyway = time.Minute

// quotaSweepEvery is how often idle buckets are looked for, while any
// bucket exists.
const quotaSweepEvery = time.Second

// quotaGenKey is the key of the quotas' generation in quotaNS: '~' sorts
// after every tenant id, and no entity key lacks a '/'.
const quotaGenKey = "~gen"

// quotaBurst is how much traffic a bucket holds: one second of quota.
const quotaBurst = time.Second

// quotaIdle is how long an unused bucket is kept; quotaMaxBuckets bounds
// them (past it, new entities are not metered until idle ones go).
const (
	quotaIdle       = time.Minute
	quotaMaxBuckets = 1 << 16
)

// quotaAnonymous is the user of a connection that did not log in, as
// Kafka names it.
const quotaAnonymous = "ANONYMOUS"

// quotaPartKey is one part of an entity as the cache keys it.
type quotaPartKey struct {
	has, def bool
	name     string
}

// quotaEntityKey is an entity of one tenant, comparable.
type quotaEntityKey struct {
	tenant       wire.ID
	user, client quotaPartKey
}

// quotaTable is a snapshot of every tenant's enforced quotas.
type quotaTable struct {
	rates map[quotaEntityKey]map[string]float64
}

// quotaCache is a node's view of the quotas and its buckets.
type quotaCache struct {
	// on is whether any quota is set: the only thing a request without a
	// plan reads when none is.
	on    atomic.Bool
	table atomic.Pointer[quotaTable]
	// changed wakes the refresher after a change made through this node.
	changed chan struct{}
	// loadMu serialises loads, so an older read never replaces a newer
	// one; gen is the generation the table was read at.
	loadMu sync.Mutex
	gen    uint64
	// polls and reloads count the refresher's generation reads and the
	// loads (a test's window on the work done when nothing changes).
	polls, reloads atomic.Int64

	// buckets holds a *quotaBucket per bucketKind: a sync.Map, so the
	// connections of different entities share no lock; nBuckets bounds it.
	buckets  sync.Map
	nBuckets atomic.Int64
}

func newQuotaCache() *quotaCache {
	return &quotaCache{changed: make(chan struct{}, 1)}
}

// invalidate asks for a refresh now (a change was committed here).
func (q *quotaCache) invalidate() {
	if q == nil {
		return
	}
	select {
	case q.changed <- struct{}{}:
	default:
	}
}

// load installs a table read from the KV.
func (q *quotaCache) load(t *quotaTable) {
	q.table.Store(t)
	q.on.Store(len(t.rates) > 0)
}

// tableOf builds the quota table from stored quota values.
func tableOf(all []storedQuota) *quotaTable {
	t := &quotaTable{rates: map[quotaEntityKey]map[string]float64{}}
	part := func(has bool, name *string) quotaPartKey {
		if !has {
			return quotaPartKey{}
		}
		if name == nil {
			return quotaPartKey{has: true, def: true}
		}
		return quotaPartKey{has: true, name: *name}
	}
	for _, s := range all {
		rates := map[string]float64{}
		for k := range quotaKeys {
			if v, ok := s.Values[k]; ok && v > 0 {
				rates[k] = v
			}
		}
		if len(rates) > 0 {
			t.rates[quotaEntityKey{tenant: s.Tenant, user: part(s.Entity.HasUser, s.Entity.User), client: part(s.Entity.HasClient, s.Entity.Client)}] = rates
		}
	}
	return t
}

// resolve finds the quota of kind for (user, client) of tenant with
// Kafka's precedence, most specific first, and the bucket key it meters
// on: the matched entity with its defaults replaced by the connection's
// names (a default quota holds for each user or client id on its own).
func (t *quotaTable) resolve(tenant wire.ID, kind, user, client string) (float64, quotaEntityKey, bool) {
	named := func(n string) quotaPartKey { return quotaPartKey{has: true, name: n} }
	def := quotaPartKey{has: true, def: true}
	none := quotaPartKey{}
	order := [...][2]quotaPartKey{
		{named(user), named(client)},
		{named(user), def},
		{named(user), none},
		{def, named(client)},
		{def, def},
		{def, none},
		{none, named(client)},
		{none, def},
	}
	for _, o := range order {
		k := quotaEntityKey{tenant: tenant, user: o[0], client: o[1]}
		if v, ok := t.rates[k][kind]; ok {
			b := quotaEntityKey{tenant: tenant}
			if o[0].has {
				b.user = named(user)
			}
			if o[1].has {
				b.client = named(client)
			}
			return v, b, true
		}
	}
	return 0, quotaEntityKey{}, false
}

// quotaBucket meters one entity's use of one kind: bytes, seconds of
// handler time, or partitions mutated.
type quotaBucket struct {
	mu     sync.Mutex
	credit float64 // units; negative: overage still draining
	last   time.Time
	// mutedUntil (unix nanos) is when the last throttle ends: the
	// entity's next request waits until then.
	mutedUntil atomic.Int64
}

// charge takes n units at rate units/s from a bucket holding one second
// of quota and returns the throttle: how long until the overage drains
// at the rate (0: within quota).
func (bk *quotaBucket) charge(now time.Time, rate, n float64) time.Duration {
	return bk.chargeBurst(now, rate, quotaBurst, n)
}

// chargeBurst is charge on a bucket holding burst's worth of quota.
func (bk *quotaBucket) chargeBurst(now time.Time, rate float64, burst time.Duration, n float64) time.Duration {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	bk.refill(now, rate, burst)
	bk.credit -= n
	return bk.overage(now, rate)
}

// refill adds what the time since the last charge earned at rate, up to
// burst's worth; a bucket never charged starts full. Caller holds mu.
func (bk *quotaBucket) refill(now time.Time, rate float64, burst time.Duration) {
	full := rate * burst.Seconds()
	if bk.last.IsZero() {
		bk.credit = full
	} else if el := now.Sub(bk.last); el > 0 {
		bk.credit = min(full, bk.credit+rate*el.Seconds())
	}
	if now.After(bk.last) {
		bk.last = now
	}
}

// overage is the throttle of a bucket in debt, the time until it is back
// at zero at rate, and mutes the entity for it. Caller holds mu.
func (bk *quotaBucket) overage(now time.Time, rate float64) time.Duration {
	if bk.credit >= 0 || rate <= 0 {
		return 0
	}
	throttle := time.Duration(-bk.credit / rate * float64(time.Second))
	bk.mute(now.Add(throttle))
	return throttle
}

// mute makes the entity's next request wait until until, unless it
// already waits longer.
func (bk *quotaBucket) mute(until time.Time) {
	for {
		cur := bk.mutedUntil.Load()
		if cur >= until.UnixNano() || bk.mutedUntil.CompareAndSwap(cur, until.UnixNano()) {
			return
		}
	}
}

// bucketKind keys a bucket by entity and quota kind.
type bucketKind struct {
	quotaEntityKey
	kind string
}

// bucket is the bucket of (k, kind), made on first use full (and
// stamped now, so a sweep does not take it before its first charge); nil
// past quotaMaxBuckets.
func (q *quotaCache) bucket(k quotaEntityKey, kind string, now time.Time) *quotaBucket {
	kk := bucketKind{k, kind}
	if b, ok := q.buckets.Load(kk); ok {
		return b.(*quotaBucket)
	}
	if q.nBuckets.Load() >= quotaMaxBuckets {
		return nil
	}
	// A new bucket is full: stamped now with a credit refill takes as
	// it finds it (burst differs by kind), so only last is set here.
	b, loaded := q.buckets.LoadOrStore(kk, &quotaBucket{last: now, credit: math.Inf(1)})
	if !loaded {
		q.nBuckets.Add(1)
	}
	return b.(*quotaBucket)
}

// sweep forgets buckets unused for quotaIdle (their credit is full again
// by then, so forgetting them changes nothing).
func (q *quotaCache) sweep(now time.Time) {
	q.buckets.Range(func(k, v any) bool {
		b := v.(*quotaBucket)
		b.mu.Lock()
		idle := now.Sub(b.last) > quotaIdle
		b.mu.Unlock()
		if idle {
			q.buckets.Delete(k)
			q.nBuckets.Add(-1)
		}
		return true
	})
}

// refreshQuotas keeps this node's quota cache current until the broker
// closes: loaded at start and at once after a change made here (on the
// KV replica caught up with its leader), else whenever the generation on
// this node's replica moved, read every quotaRefreshEvery, and every
// quotaReloadAnyway regardless.
func (b *Broker) refreshQuotas() {
	defer b.wg.Done()
	t := time.NewTicker(quotaRefreshEvery)
	defer t.Stop()
	gen := b.engine.KVGeneration(quotaNS, quotaGenKey)
	var loadedAt, sweptAt time.Time
	load := true
	for {
		if load {
			_ = b.catchUpKV(b.ctx, wire.DefaultTenant)
			if err := b.reloadQuotas(); err != nil && b.ctx.Err() == nil {
				b.log.Warn("kafka: reading client quotas", "err", err)
			}
			loadedAt = time.Now()
		}
		if now := time.Now(); b.quotas.nBuckets.Load() > 0 && now.Sub(sweptAt) >= quotaSweepEvery {
			b.quotas.sweep(now)
			sweptAt = now
		}
		select {
		case <-b.ctx.Done():
			return
		case <-b.quotas.changed:
			load = true
			continue
		case <-t.C:
		}
		b.quotas.polls.Add(1)
		g, err := gen.Local()
		if err != nil && b.ctx.Err() == nil {
			b.log.Warn("kafka: reading the client quotas' generation", "err", err)
		}
		b.quotas.loadMu.Lock()
		moved := err == nil && g != b.quotas.gen
		b.quotas.loadMu.Unlock()
		load = moved || time.Since(loadedAt) >= quotaReloadAnyway
	}
}

// reloadQuotas reads every tenant's quotas from this node's KV replica.
// The generation is read before them: a change landing between the two
// leaves it behind, and the next poll loads again.
func (b *Broker) reloadQuotas() error {
	b.quotas.loadMu.Lock()
	defer b.quotas.loadMu.Unlock()
	b.quotas.reloads.Add(1)
	gen, err := b.engine.KVGeneration(quotaNS, quotaGenKey).Local()
	if err != nil {
		return err
	}
	var all []storedQuota
	err = b.engine.KVStore(wire.DefaultTenant).KVEach(wire.DefaultTenant, quotaNS, nil, func(it wire.KVItem) error {
		var q storedQuota
		if string(it.Key) != quotaGenKey && json.Unmarshal(it.Value, &q) == nil {
			all = append(all, q)
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.quotas.load(tableOf(all))
	b.quotas.gen = gen
	return nil
}

// quotaUserOf is the user a connection's quotas are looked up by.
func quotaUserOf(c *kafka.Conn) string {
	if p, ok := c.Principal(); ok && p.User != "" {
		return p.User
	}
	return quotaAnonymous
}

// holdUntil waits until the unix-nanos instant until (a throttle's end),
// or ctx ends.
func holdUntil(ctx context.Context, until int64) {
	d := time.Duration(until - time.Now().UnixNano())
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// setThrottle puts throttle in resp's throttle_time_ms unless it already
// carries a longer one; versions before KIP-219 are held for it instead,
// as the client does not wait on its own.
func setThrottle(ctx context.Context, resp kmsg.Response, throttle time.Duration) {
	tr, ok := resp.(kmsg.ThrottleResponse)
	if !ok {
		return
	}
	ms := int32(min(throttle.Milliseconds()+1, 1<<30))
	cur, after := tr.Throttle()
	if cur >= ms {
		return
	}
	resp.(kmsg.SetThrottleResponse).SetThrottle(ms)
	if !after {
		holdUntil(ctx, time.Now().Add(time.Duration(ms)*time.Millisecond).UnixNano())
	}
}
