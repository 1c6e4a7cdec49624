package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sync"
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

type retained struct {
	bytes     uint64
	at        time.Time
	measuring bool
}

type retainedGauge struct {
	mu sync.Mutex
	by map[string]*retained // cluster id
}

// overQuota reports whether cluster c's last measurement is at or over
// its quota, starting a new measurement when that one is old.
func (p *Proxy) overQuota(c *Cluster, lim Limits, now time.Time) bool {
	quota := lim[LimitMaxRetainedBytes]
	if quota == nil {
		return false
	}
	g := &p.retained
	g.mu.Lock()
	if g.by == nil {
		g.by = map[string]*retained{}
	}
	r := g.by[c.ID]
	if r == nil {
		r = &retained{}
		g.by[c.ID] = r
	}
	over := !r.at.IsZero() && r.bytes >= uint64(*quota)
	if !r.measuring && now.Sub(r.at) >= retainedTTL {
		r.measuring = true
		p.goLoop(func(ctx context.Context) { p.measure(ctx, c) })
	}
	g.mu.Unlock()
	return over
}

// measure adds up the bytes of c's queues, as the broker measures them.
func (p *Proxy) measure(ctx context.Context, c *Cluster) {
	total, err := p.retainedBytes(ctx, c)
	g := &p.retained
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.by[c.ID]
	r.measuring = false
	if err != nil {
		p.log.Warn("proxy: storage measurement failed", "cluster", c.Slug, "err", err)
		return
	}
	r.bytes, r.at = total, time.Now()
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
