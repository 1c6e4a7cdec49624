package broker

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// The one throttling path of the Kafka door. Every quota a request meets
// is charged here after the handler answers, and the answer carries the
// longest throttle of them all, as Kafka answers max(byte-rate throttle,
// request throttle, mutation throttle):
//
//   - producer_byte_rate / consumer_byte_rate on Produce / Fetch (bytes);
//   - request_percentage on every request: the share of one handler's
//     time (KIP-124), see requestSeconds;
//   - controller_mutation_rate on CreateTopics, CreatePartitions and
//     DeleteTopics (KIP-599), charged by the handlers per topic through
//     chargeMutation, which refuses a topic with THROTTLING_QUOTA_EXCEEDED
//     when the versions that know it meet a bucket already in debt; and
//     on the topics Metadata and Produce create automatically
//     (chargeAutoCreate), as Kafka's controller charges the CreateTopics
//     a broker forwards for them: strict, and throttling nothing;
//   - the embedded proxy's plan of an API-key login (proxy_hooks.go): its
//     requests_per_sec and messages_per_sec buckets are the cluster's
//     (shared with its HTTP requests) and charged by Policy.After, and
//     their throttle is applied here as any client quota's.
//
// A throttled entity's next request that meets the same quota waits out
// the throttle first (Kafka mutes the throttled channel, KIP-219), and an
// answer of a version before KIP-219 is held for it (setThrottle). No
// quota answers an error except the strict mutation quota, as Kafka.

// quotaPlan is the bucket kind that holds a plan's mute: the plan's own
// buckets are the proxy's, this one only remembers until when the
// login's user is throttled.
const quotaPlan = "plan"

// mutationBurst is how much a controller_mutation_rate bucket holds:
// Kafka's TokenBucket holds (controller.quota.window.num − 1) ×
// controller.quota.window.size.seconds of quota, 10 s by default.
const mutationBurst = 10 * time.Second

// mutationStrictFrom is, per topic-mutating key, the first version that
// knows THROTTLING_QUOTA_EXCEEDED (KIP-599): from it a topic over the
// quota is refused; older versions are served and throttled.
var mutationStrictFrom = map[kmsg.Key]int16{
	kmsg.CreateTopics:     6,
	kmsg.CreatePartitions: 3,
	kmsg.DeleteTopics:     5,
}

// autoCreates are the keys that create topics automatically (autoCreate).
// Kafka's broker forwards such a creation to its controller as a
// CreateTopics in an envelope carrying the client's principal and client
// id, at the newest version, so the controller charges it to the
// client's controller_mutation_rate strictly, and throttles nothing, as
// it throttles no forwarded request (ControllerApis.handleCreateTopics,
// DefaultAutoTopicCreationManager.sendCreateTopicRequest).
var autoCreates = map[kmsg.Key]bool{kmsg.Metadata: true, kmsg.Produce: true}

// requestQuota is one request's quota state, made by the first wrapper
// that needs it (policed or quoted) and carried in its context.
type requestQuota struct {
	// parked is how long (nanos) the handler waited in a long poll, not
	// counted as handler time (parkedSince).
	parked atomic.Int64
	// planParked is the plan's throttle of a fetch answered at once for
	// want of a parked slot (proxy_hooks.go).
	planParked time.Duration
	// mutation is the controller_mutation_rate the handler charges its
	// topics to; nil: none.
	mutation *mutationQuota
}

type requestQuotaKey struct{}

func requestQuotaOf(ctx context.Context) *requestQuota {
	rq, _ := ctx.Value(requestQuotaKey{}).(*requestQuota)
	return rq
}

// parkedSince adds the time since start to the request's parked time.
// The long polls (waitAny) call it: Kafka parks such a request in
// purgatory, off its handler thread, so request_percentage counts the
// work and not the wait.
func parkedSince(ctx context.Context, start time.Time) {
	if rq := requestQuotaOf(ctx); rq != nil {
		rq.parked.Add(int64(time.Since(start)))
	}
}

// requestSeconds is the handler time a request is charged for
// request_percentage. Kafka meters the time its request-handler and
// network threads spend on the request; queen has no request threads
// (each connection's requests run on its own goroutine), so the charge
// is the handler's wall time from the first byte of work to the answer,
// less the time parked in a long poll (Kafka's purgatory). The wait for
// raft to commit a produce or a create is in it: queen's handler waits
// for the quorum where Kafka's acks=all waits in purgatory, so a
// replicated write costs more of a queen quota than of a Kafka one.
func requestSeconds(start, end time.Time, parked time.Duration) float64 {
	return max(end.Sub(start)-parked, 0).Seconds()
}

// mutationQuota is one request's controller_mutation_rate.
type mutationQuota struct {
	bucket *quotaBucket
	rate   float64 // partitions per second
	strict bool
	// auto: the request only creates topics automatically
	// (chargeAutoCreate), so the quota neither holds nor throttles it.
	auto bool
	// throttle is the longest throttle its topics met; the handler's
	// goroutine alone charges it, and quoted reads it after.
	throttle time.Duration
}

// chargeMutation charges n partitions created or deleted for one topic to
// the request's controller_mutation_rate. Within it, or without one, it
// is nil. A strict quota meeting a bucket already in debt refuses the
// topic with THROTTLING_QUOTA_EXCEEDED (nothing charged); otherwise the
// topic is charged, into debt if need be, and an older version's answer
// carries the throttle.
func chargeMutation(ctx context.Context, n int) error {
	rq := requestQuotaOf(ctx)
	if rq == nil || rq.mutation == nil || n <= 0 {
		return nil
	}
	m := rq.mutation
	d, refused := m.bucket.mutate(time.Now(), m.rate, float64(n), m.strict)
	m.throttle = max(m.throttle, d)
	if refused {
		return &PolicyError{Code: kerr.ThrottlingQuotaExceeded.Code,
			Msg: fmt.Sprintf("controller_mutation_rate of %g partitions/s exceeded: retry in %d ms", m.rate, d.Milliseconds()+1)}
	}
	return nil
}

// errAutoCreateThrottled refuses an automatic creation while the client's
// controller_mutation_rate is in debt: UNKNOWN_TOPIC_OR_PARTITION, what
// Kafka's client hears while its topic is not created, and asks again.
var errAutoCreateThrottled = fmt.Errorf("%w: controller_mutation_rate exceeded, not created yet", wire.ErrQueueNotFound)

// chargeAutoCreate charges n partitions a topic created automatically
// makes to the request's controller_mutation_rate (autoCreates): refused
// while the bucket is in debt, else taken, into debt if need be, with no
// throttle and no mute.
func chargeAutoCreate(ctx context.Context, n int) error {
	rq := requestQuotaOf(ctx)
	if rq == nil || rq.mutation == nil || n <= 0 {
		return nil
	}
	if !rq.mutation.bucket.take(time.Now(), rq.mutation.rate, float64(n)) {
		return errAutoCreateThrottled
	}
	return nil
}

// take is mutate's strict charge without a throttle: false, nothing
// taken, while the bucket is in debt.
func (bk *quotaBucket) take(now time.Time, rate, n float64) bool {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	bk.refill(now, rate, mutationBurst)
	if bk.credit < 0 {
		return false
	}
	bk.credit -= n
	return true
}

// mutate is KIP-599's token bucket: strict, a bucket in debt refuses n
// (and says how long until it is not); otherwise n is taken, into debt if
// need be. Only a permissive charge or a refusal throttles, as Kafka's
// Strict and Permissive ControllerMutationQuota do.
func (bk *quotaBucket) mutate(now time.Time, rate, n float64, strict bool) (time.Duration, bool) {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	bk.refill(now, rate, mutationBurst)
	if strict {
		if bk.credit < 0 {
			return bk.overage(now, rate), true
		}
		bk.credit -= n
		return 0, false
	}
	bk.credit -= n
	return bk.overage(now, rate), false
}

// admit charges n units at rate as a request is admitted: it returns
// when the request may be served (unix nanos: the end of the debt of those
// admitted before it) and when its own debt ends (zero time: none).
func (bk *quotaBucket) admit(now time.Time, rate, n float64) (int64, time.Time) {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	wait := bk.mutedUntil.Load()
	bk.refill(now, rate, quotaBurst)
	bk.credit -= n
	if d := bk.overage(now, rate); d > 0 {
		return wait, now.Add(d)
	}
	return wait, time.Time{}
}

// produceBytes is the record batches' bytes a produce carries, as sent.
func produceBytes(req kmsg.Request) int {
	pr, ok := req.(*kmsg.ProduceRequest)
	if !ok {
		return 0
	}
	n := 0
	for ti := range pr.Topics {
		for pi := range pr.Topics[ti].Partitions {
			n += len(pr.Topics[ti].Partitions[pi].Records)
		}
	}
	return n
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

// meter is one quota a request met: its bucket and rate.
type meter struct {
	bucket *quotaBucket
	rate   float64
}

// meterOf resolves kind for the connection and finds its bucket; the
// zero meter when no quota of kind holds (or past quotaMaxBuckets).
func (q *quotaCache) meterOf(t *quotaTable, tenant quotaTenant, kind string, now time.Time) meter {
	if kind == "" || t == nil {
		return meter{}
	}
	rate, k, ok := t.resolve(tenant.id, kind, tenant.user, tenant.client)
	if !ok {
		return meter{}
	}
	return meter{bucket: q.bucket(k, kind, now), rate: rate}
}

// quoted runs every quota and the plan's throttle around a handler.
// Nothing but q.on and the context's policy are read while no quota is
// set and the login has no plan.
func (b *Broker) quoted(key int16, h kafka.Handler) kafka.Handler {
	byteKind := quotaKindOf(key)
	strictFrom, mutates := mutationStrictFrom[kmsg.Key(key)]
	auto := autoCreates[kmsg.Key(key)]
	return func(ctx context.Context, c *kafka.Conn, req kmsg.Request) (kmsg.Response, error) {
		q := b.quotas
		pol := policyOf(ctx)
		on := q.on.Load()
		if !on && pol == nil {
			return h(ctx, c, req)
		}
		now := time.Now()
		who := quotaTenant{id: b.tenantOf(c), user: quotaUserOf(c)}
		var bytes, request, mutation, plan meter
		if on {
			if hdr, ok := kafka.RequestHeaderFromContext(ctx); ok {
				who.client = hdr.ClientID
			}
			t := q.table.Load()
			bytes = q.meterOf(t, who, byteKind, now)
			request = q.meterOf(t, who, quotaRequestPercentage, now)
			if mutates || auto {
				mutation = q.meterOf(t, who, quotaControllerMutationRate, now)
			}
		}
		if pol != nil {
			plan.bucket = q.bucket(quotaEntityKey{tenant: who.id, user: quotaPartKey{has: true, name: who.user}}, quotaPlan, now)
		}
		if bytes.bucket == nil && request.bucket == nil && mutation.bucket == nil && pol == nil {
			return h(ctx, c, req)
		}
		rq := requestQuotaOf(ctx)
		if rq == nil {
			rq = &requestQuota{}
			ctx = context.WithValue(ctx, requestQuotaKey{}, rq)
		}
		if mutation.bucket != nil {
			rq.mutation = &mutationQuota{bucket: mutation.bucket, rate: mutation.rate, strict: auto || req.GetVersion() >= strictFrom, auto: auto}
			if auto { // charged by chargeAutoCreate only: no hold
				mutation = meter{}
			}
		}
		var until int64
		for _, m := range [...]meter{request, mutation, plan} {
			if m.bucket != nil {
				until = max(until, m.bucket.mutedUntil.Load())
			}
		}
		// A produce is charged as it is admitted, with the bytes it
		// carries (Kafka meters the request's size): the handlers of one
		// connection run concurrently, so a client pipelining produces
		// would pass a mute its earlier requests had not set yet. Each
		// waits for the debt of those admitted before it.
		var admitted time.Time // the end of the produce's own debt; zero: none
		chargedIn := bytes.bucket != nil && byteKind == quotaProducerByteRate
		if chargedIn {
			var wait int64
			wait, admitted = bytes.bucket.admit(now, bytes.rate, float64(produceBytes(req)))
			until = max(until, wait)
		} else if bytes.bucket != nil {
			until = max(until, bytes.bucket.mutedUntil.Load())
		}
		holdUntil(ctx, until)

		start := time.Now()
		resp, err := h(ctx, c, req)
		if err != nil || resp == nil {
			return resp, err
		}
		end := time.Now()
		var throttle time.Duration
		var u Usage
		if (bytes.bucket != nil && !chargedIn) || pol != nil {
			u = usageOf(key, req, resp)
		}
		switch {
		case chargedIn: // what is left of the produce's own debt
			if !admitted.IsZero() {
				throttle = max(admitted.Sub(end), 0)
			}
		case bytes.bucket != nil:
			throttle = bytes.bucket.charge(end, bytes.rate, float64(u.BytesIn+u.BytesOut))
		}
		if request.bucket != nil {
			used := requestSeconds(start, end, time.Duration(rq.parked.Load()))
			throttle = max(throttle, request.bucket.charge(end, request.rate/100, used))
		}
		if rq.mutation != nil && !rq.mutation.auto {
			throttle = max(throttle, rq.mutation.throttle)
		}
		if pol != nil {
			pt := max(rq.planParked, pol.After(u))
			if pt > 0 && plan.bucket != nil {
				plan.bucket.mute(end.Add(pt))
			}
			throttle = max(throttle, pt)
		}
		if throttle > 0 {
			setThrottle(ctx, resp, throttle)
		}
		return resp, nil
	}
}

// quotaTenant is who a connection's quotas are looked up for.
type quotaTenant struct {
	id           wire.ID
	user, client string
}
