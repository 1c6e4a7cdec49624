package broker

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// Enforcing producer_byte_rate on Produce and consumer_byte_rate on Fetch,
// per node as Kafka does (each broker meters what it serves). The quotas
// are cached per node from the replicated KV (refreshQuotas: on a change
// made through this node, else at most once a second), and a request
// looks at the cache only when some byte rate is set anywhere: without
// one, a produce costs one atomic load. A client over its rate is served
// and answered with throttle_time_ms, the time until its overage drains
// at the quota rate (a token bucket holding one second of quota), and the
// next Produce or Fetch of the same quota entity waits that long first,
// as Kafka mutes a throttled channel (KIP-219). No error is answered.

// quotaRefreshEvery is how stale a node's quota cache may be after a
// change made through another node.
const quotaRefreshEvery = time.Second

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

// quotaTable is a snapshot of every tenant's byte-rate quotas.
type quotaTable struct {
	rates map[quotaEntityKey]map[string]float64
}

// quotaCache is a node's view of the quotas and its buckets.
type quotaCache struct {
	// on is whether any byte rate is set: the only thing a request reads
	// when none is.
	on    atomic.Bool
	table atomic.Pointer[quotaTable]
	// changed wakes the refresher after a change made through this node.
	changed chan struct{}

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

// tableOf builds the byte-rate table from stored quota values.
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
		for _, k := range []string{quotaProducerByteRate, quotaConsumerByteRate} {
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

// quotaBucket meters one entity's bytes of one kind.
type quotaBucket struct {
	mu     sync.Mutex
	credit float64 // bytes; negative: overage still draining
	last   time.Time
	// mutedUntil (unix nanos) is when the last throttle ends: the
	// entity's next request waits until then.
	mutedUntil atomic.Int64
}

// charge takes n bytes at rate bytes/s and returns the throttle: how long
// until the overage drains at the rate (0: within quota).
func (bk *quotaBucket) charge(now time.Time, rate float64, n int) time.Duration {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	burst := rate * quotaBurst.Seconds()
	if bk.last.IsZero() {
		bk.credit = burst
	} else if el := now.Sub(bk.last); el > 0 {
		bk.credit = min(burst, bk.credit+rate*el.Seconds())
	}
	bk.last = now
	bk.credit -= float64(n)
	if bk.credit >= 0 {
		return 0
	}
	throttle := time.Duration(-bk.credit / rate * float64(time.Second))
	bk.mutedUntil.Store(now.Add(throttle).UnixNano())
	return throttle
}

// bucketKind keys a bucket by entity and quota kind.
type bucketKind struct {
	quotaEntityKey
	kind string
}

// bucket is the bucket of (k, kind), made on first use full at rate (and
// stamped now, so a sweep does not take it before its first charge); nil
// past quotaMaxBuckets.
func (q *quotaCache) bucket(k quotaEntityKey, kind string, rate float64, now time.Time) *quotaBucket {
	kk := bucketKind{k, kind}
	if b, ok := q.buckets.Load(kk); ok {
		return b.(*quotaBucket)
	}
	if q.nBuckets.Load() >= quotaMaxBuckets {
		return nil
	}
	b, loaded := q.buckets.LoadOrStore(kk, &quotaBucket{credit: rate * quotaBurst.Seconds(), last: now})
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
// closes: at once after a change made here, else once a second, each time
// on the KV replica caught up with its leader.
func (b *Broker) refreshQuotas() {
	defer b.wg.Done()
	t := time.NewTicker(quotaRefreshEvery)
	defer t.Stop()
	for {
		_ = b.catchUpKV(b.ctx, wire.DefaultTenant)
		if err := b.reloadQuotas(); err != nil && b.ctx.Err() == nil {
			b.log.Warn("kafka: reading client quotas", "err", err)
		}
		b.quotas.sweep(time.Now())
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		case <-b.quotas.changed:
		}
	}
}

// reloadQuotas reads every tenant's quotas from this node's KV replica.
func (b *Broker) reloadQuotas() error {
	var all []storedQuota
	err := b.engine.KVStore(wire.DefaultTenant).KVEach(wire.DefaultTenant, quotaNS, nil, func(it wire.KVItem) error {
		var q storedQuota
		if json.Unmarshal(it.Value, &q) == nil {
			all = append(all, q)
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.quotas.load(tableOf(all))
	return nil
}

// quotaUserOf is the user a connection's quotas are looked up by.
func quotaUserOf(c *kafka.Conn) string {
	if p, ok := c.Principal(); ok && p.User != "" {
		return p.User
	}
	return quotaAnonymous
}

// quotaKindOf is the byte rate a request key is metered against.
func quotaKindOf(key int16) string {
	switch kmsg.Key(key) {
	case kmsg.Produce:
		return quotaProducerByteRate
	case kmsg.Fetch:
		return quotaConsumerByteRate
	}
	return ""
}

// quoted meters Produce and Fetch against the byte-rate quotas. Nothing
// but q.on is read while no byte rate is set.
func (b *Broker) quoted(key int16, h kafka.Handler) kafka.Handler {
	kind := quotaKindOf(key)
	if kind == "" {
		return h
	}
	return func(ctx context.Context, c *kafka.Conn, req kmsg.Request) (kmsg.Response, error) {
		q := b.quotas
		if !q.on.Load() {
			return h(ctx, c, req)
		}
		t := q.table.Load()
		client := ""
		if hdr, ok := kafka.RequestHeaderFromContext(ctx); ok {
			client = hdr.ClientID
		}
		rate, bk, ok := t.resolve(b.tenantOf(c), kind, quotaUserOf(c), client)
		if !ok {
			return h(ctx, c, req)
		}
		bucket := q.bucket(bk, kind, rate, time.Now())
		if bucket == nil {
			return h(ctx, c, req)
		}
		holdUntil(ctx, bucket.mutedUntil.Load())
		resp, err := h(ctx, c, req)
		if err != nil || resp == nil {
			return resp, err
		}
		u := usageOf(key, req, resp)
		throttle := bucket.charge(time.Now(), rate, u.BytesIn+u.BytesOut)
		if throttle > 0 {
			setThrottle(ctx, resp, throttle)
		}
		return resp, nil
	}
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
