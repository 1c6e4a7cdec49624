package proxy

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/http/api"
)

// The plan limits the data plane applies. Size caps hold in both modes;
// the rates, the queue and partition caps and the parked-pop cap are
// logged with would_block=true in shadow mode and refused only with
// QUEEN_PROXY_ENFORCE=true (spec §6.6).

// checkPush applies the size caps to a push's items.
func checkPush(items []api.PushItem, lim Limits) error {
	if tooManyItems(lim, len(items)) {
		return newError(http.StatusRequestEntityTooLarge, "payload_too_large", "the push has more items than the plan allows")
	}
	if lim[LimitMaxPayloadBytes] != nil {
		for _, it := range items {
			if payloadTooLarge(lim, it.PayloadBytes) {
				return newError(http.StatusRequestEntityTooLarge, "payload_too_large", "a payload is larger than the plan allows")
			}
		}
	}
	return nil
}

// The size caps' decisions, THE ones of both doors: an HTTP push's items
// and payloads, a Kafka produce's batches and records (kafka_policy.go).

// itemsCap is the most items one push may carry; false: no cap.
func itemsCap(lim Limits) (int64, bool) {
	m := lim[LimitMaxItemsPerPush]
	if m == nil {
		return 0, false
	}
	return *m, true
}

// payloadCap is the largest payload one item may carry; false: no cap.
func payloadCap(lim Limits) (int64, bool) {
	m := lim[LimitMaxPayloadBytes]
	if m == nil {
		return 0, false
	}
	return *m, true
}

// tooManyItems says whether n items are more than one push may carry.
func tooManyItems(lim Limits, n int) bool {
	c, ok := itemsCap(lim)
	return ok && int64(n) > c
}

// payloadTooLarge says whether a payload of size bytes is over the cap.
func payloadTooLarge(lim Limits, size int) bool {
	c, ok := payloadCap(lim)
	return ok && int64(size) > c
}

// pushBlocked is why a cluster's pushes are refused whatever they carry,
// nil when they are not: its status, its storage quota, its monthly
// quota. THE decision of both doors (dataplane.go, kafka_policy.go).
func (p *Proxy) pushBlocked(v *clusterView, now time.Time) error {
	switch {
	case v.rank >= statusRank(StatusSuspended):
		return errSuspended
	case v.rank >= 1:
		return errPushBlocked
	case p.overQuota(v.cluster, v.limits, now):
		return errStorageQuota
	case p.overMonthly(v.cluster, v.limits, now):
		return errMonthlyQuota
	}
	return nil
}

// pushCheck is what the broker runs on a proxied push's items once it has
// read them: the size caps, the message rate and the queue caps.
func (p *Proxy) pushCheck(ctx *fasthttp.RequestCtx, c *Cluster, lim Limits) api.PushCheck {
	return func(items []api.PushItem) *api.PushRefusal {
		if err := checkPush(items, lim); err != nil {
			return refusal(err)
		}
		if ok, wait := p.rates.takeMessages(c.ID, lim, len(items), time.Now()); !ok && p.overLimit(c, "/api/v1/push", "messages_per_sec") {
			ctx.Response.Header.Set("Retry-After", retryAfter(wait))
			return refusal(errRateLimited)
		}
		if err := p.capsRefusal(c, "/api/v1/push", lim, pushTargets(items)); err != nil {
			return refusal(err)
		}
		return nil
	}
}

func refusal(err error) *api.PushRefusal {
	he := status(err)
	return &api.PushRefusal{Status: he.status, Code: he.code, Message: he.msg}
}

var errRateLimited = newError(http.StatusTooManyRequests, "rate_limited", "the cluster's request or message rate is over its plan")

func retryAfter(wait time.Duration) string {
	return strconv.Itoa(max(1, int((wait+time.Second-1)/time.Second)))
}

// overLimit logs a limit a request passes and says whether it is refused
// for it (enforce mode).
func (p *Proxy) overLimit(c *Cluster, path, limit string) bool {
	p.log.Info("proxy: over a plan limit", "target", "limits", "would_block", true, "cluster", c.Slug, "path", path,
		"limit", limit, "enforced", p.cfg.Enforce)
	return p.cfg.Enforce
}

// withinLimits applies the request rate (and, for a DLQ replay, the
// message rate); false when it answered 429.
func (p *Proxy) withinLimits(ctx *fasthttp.RequestCtx, r Route, grows bool, path string, c *Cluster, lim Limits, msgs int) bool {
	if r.Class == ClassGated && (r.Op == OpRead || r.Op == OpOpen || r.Op == OpDelete || (r.Op == OpMixed && !grows)) {
		return true // never blocked (spec §6.6)
	}
	now := time.Now()
	ok, wait := p.rates.takeRequest(c.ID, lim, now)
	if ok {
		ok, wait = p.rates.takeMessages(c.ID, lim, msgs, now)
	}
	if ok || !p.overLimit(c, path, "rate") {
		return true
	}
	ctx.Response.Header.Set("Retry-After", retryAfter(wait))
	writeError(ctx, errRateLimited)
	return false
}

// withinCaps applies the queue and partition caps to a configure; false
// when it answered 403.
func (p *Proxy) withinCaps(ctx *fasthttp.RequestCtx, path string, c *Cluster, lim Limits, targets []queueTarget) bool {
	if err := p.capsRefusal(c, path, lim, targets); err != nil {
		writeError(ctx, err)
		return false
	}
	return true
}

// capsRefusal is the cap targets pass, when it is enforced.
func (p *Proxy) capsRefusal(c *Cluster, path string, lim Limits, targets []queueTarget) error {
	if len(targets) == 0 {
		return nil
	}
	tenant, err := p.tenantOf(c)
	if err != nil {
		return nil
	}
	over := p.census.overCaps(tenant, targets, lim, time.Now())
	if over == nil || !p.overLimit(c, path, status(over).code) {
		return nil
	}
	return over
}

// isParkedPop reports whether a request is a long-poll pop, which holds a
// parked slot while it waits.
func isParkedPop(ctx *fasthttp.RequestCtx, path string) bool {
	if path != "/api/v1/ephemeral/pop" && !bytes.HasPrefix([]byte(path), []byte("/api/v1/pop/queue/")) {
		return false
	}
	w := ctx.QueryArgs().Peek("wait")
	return bytes.Equal(w, []byte("true")) || bytes.Equal(w, []byte("1"))
}

// parkedPops counts long-poll pops (and Kafka fetches waiting for
// records) parked per cluster on this node, an atomic per cluster.
type parkedPops struct {
	by sync.Map // cluster id → *atomic.Int64
}

func (pp *parkedPops) of(cluster string) *atomic.Int64 {
	if n, ok := pp.by.Load(cluster); ok {
		return n.(*atomic.Int64)
	}
	n, _ := pp.by.LoadOrStore(cluster, new(atomic.Int64))
	return n.(*atomic.Int64)
}

// enter takes a slot unless the cluster holds limit already (nil: no
// cap): THE parked-cap decision of both doors.
func (pp *parkedPops) enter(cluster string, limit *int64) bool {
	n := pp.of(cluster)
	if v := n.Add(1); limit != nil && v > *limit {
		n.Add(-1)
		return false
	}
	return true
}

// enterParked takes a slot; over the cap it logs would_block and,
// enforced, refuses (in shadow mode the slot is taken anyway).
func (p *Proxy) enterParked(c *Cluster, limit *int64) bool {
	if p.parked.enter(c.ID, limit) {
		return true
	}
	if p.overLimit(c, "pop", "max_parked_pops") {
		return false
	}
	p.parked.of(c.ID).Add(1)
	return true
}

func (pp *parkedPops) leave(cluster string) {
	pp.of(cluster).Add(-1)
}
