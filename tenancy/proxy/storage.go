package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// The storage quota (max_retained_bytes): once a cluster's queues hold
// that many bytes, its pushes answer 403 storage_quota_exceeded, in shadow
// mode too. The bytes are the broker's own measurement (each queue's
// /sizes), which every node shares, taken in the background at most every
// retainedTTL per cluster with a quota, so a push never waits for it; a
// cluster is therefore stopped up to that long after it crossed the line.

const retainedTTL = 15 * time.Second

var errStorageQuota = newError(http.StatusForbidden, "storage_quota_exceeded", "the cluster's queues hold as many bytes as its plan allows")

// retained is one measurement: bytes, or messages for the monthly quota.
// Its fields are atomics: every push of the cluster, through either door,
// reads it, and no lock is shared by all of them.
type retained struct {
	bytes     atomic.Uint64
	at        atomic.Int64 // unix nanos of the measurement; 0: none yet
	measuring atomic.Bool
}

type retainedGauge struct {
	by sync.Map // retainedKey → *retained
}

type retainedKey struct{ kind, cluster string }

// of is the measurement of kind for cluster.
func (g *retainedGauge) of(kind, cluster string) *retained {
	k := retainedKey{kind, cluster}
	if r, ok := g.by.Load(k); ok {
		return r.(*retained)
	}
	r, _ := g.by.LoadOrStore(k, &retained{})
	return r.(*retained)
}

// overQuota reports whether cluster c's last storage measurement is at or
// over its quota.
func (p *Proxy) overQuota(c *Cluster, lim Limits, now time.Time) bool {
	return p.overMeasured("storage", c, lim[LimitMaxRetainedBytes], retainedTTL, now, p.retainedBytes)
}

// overMeasured reports whether the last measurement of kind for cluster c
// is at or over quota (nil: no quota), starting a new measurement in the
// background when that one is older than ttl.
func (p *Proxy) overMeasured(kind string, c *Cluster, quota *int64, ttl time.Duration, now time.Time,
	measure func(context.Context, *Cluster) (uint64, error)) bool {
	if quota == nil {
		return false
	}
	r := p.retained.of(kind, c.ID)
	at := r.at.Load()
	if now.UnixNano()-at >= int64(ttl) && r.measuring.CompareAndSwap(false, true) {
		p.goLoop(func(ctx context.Context) {
			defer r.measuring.Store(false)
			v, err := measure(ctx, c)
			if err != nil {
				p.log.Warn("proxy: quota measurement failed", "quota", kind, "cluster", c.Slug, "err", err)
				return
			}
			r.bytes.Store(v)
			r.at.Store(time.Now().UnixNano())
		})
	}
	return at != 0 && r.bytes.Load() >= uint64(*quota)
}

func (p *Proxy) retainedBytes(ctx context.Context, c *Cluster) (uint64, error) {
	tenant, err := p.tenantOf(c)
	if err != nil {
		return 0, err
	}
	var total uint64
	for _, q := range p.engine.Queues(tenant, storage.QueueFilter{}, p.engine.NowMs()) {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		n, err := p.queueBytes(tenant, q.Name)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// queueBytes is one queue's bytes from the broker's sizes route, every
// page of it added up by the route itself (totals).
func (p *Proxy) queueBytes(tenant wire.ID, queue string) (uint64, error) {
	status, body := p.brokerCall("GET", "/api/v1/resources/queues/"+url.PathEscape(queue)+"/sizes", tenant, nil)
	if status == http.StatusNotFound {
		return 0, nil // deleted meanwhile
	}
	var sizes struct {
		Totals struct {
			Bytes uint64 `json:"bytes"`
		} `json:"totals"`
	}
	if status != http.StatusOK {
		return 0, newError(status, "unavailable", "queue sizes: "+string(body))
	}
	if err := json.Unmarshal(body, &sizes); err != nil {
		return 0, err
	}
	return sizes.Totals.Bytes, nil
}
