package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/queen-mq/queen/wire"
)

// Activity per cluster for POST /api/cp/activity: when it last had
// traffic, first pushed, last used a key, and what it stores. Each
// process keeps its own view and writes it with the usage
// (activity/<cluster>/<writer>); a read combines the writers' rows.

type activityRow struct {
	LastTrafficMs int64 `json:"last_traffic_ms,omitempty"`
	FirstPushMs   int64 `json:"first_push_ms,omitempty"`
	LastKeyUseMs  int64 `json:"last_key_use_ms,omitempty"`
}

// merge folds o into r: the latest last times, the earliest first push.
func (r *activityRow) merge(o activityRow) {
	r.LastTrafficMs = max(r.LastTrafficMs, o.LastTrafficMs)
	r.LastKeyUseMs = max(r.LastKeyUseMs, o.LastKeyUseMs)
	if o.FirstPushMs != 0 && (r.FirstPushMs == 0 || o.FirstPushMs < r.FirstPushMs) {
		r.FirstPushMs = o.FirstPushMs
	}
}

type activity struct {
	store  *kvStore
	writer string
	mu     sync.Mutex
	rows   map[string]*activityRow // cluster id
	dirty  map[string]bool
}

func activityPrefix(cluster string) string { return "activity/" + cluster + "/" }

// touch records an admitted request of cluster.
func (a *activity) touch(cluster string, pushed, byKey bool, now time.Time) {
	ms := now.UnixMilli()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rows == nil {
		a.rows, a.dirty = map[string]*activityRow{}, map[string]bool{}
	}
	r := a.rows[cluster]
	if r == nil {
		r = &activityRow{}
		a.rows[cluster] = r
	}
	o := activityRow{LastTrafficMs: ms}
	if pushed {
		o.FirstPushMs = ms
	}
	if byKey {
		o.LastKeyUseMs = ms
	}
	r.merge(o)
	a.dirty[cluster] = true
}

// flush writes the changed rows; on failure they stay changed. Activity
// is not spooled: the next flush after an outage writes it.
func (a *activity) flush(ctx context.Context) error {
	a.mu.Lock()
	ops := make([]wire.KVOp, 0, len(a.dirty))
	written := map[string]activityRow{}
	for c := range a.dirty {
		written[c] = *a.rows[c]
		ops = append(ops, putOp(activityPrefix(c)+a.writer, written[c], false))
	}
	a.mu.Unlock()
	for len(ops) > 0 {
		n := min(len(ops), wire.MaxKVOpsPerCall)
		if _, err := a.store.applyQuiet(ctx, ops[:n]...); err != nil {
			return err
		}
		ops = ops[n:]
	}
	a.mu.Lock()
	for c, w := range written {
		if *a.rows[c] == w {
			delete(a.dirty, c)
		}
	}
	a.mu.Unlock()
	return nil
}

// read combines every writer's row of cluster.
func (s *kvStore) activityOf(ctx context.Context, cluster string) (activityRow, error) {
	var out activityRow
	err := s.scan(ctx, activityPrefix(cluster), "", func(_ string, val []byte) bool {
		var r activityRow
		if json.Unmarshal(val, &r) == nil {
			out.merge(r)
		}
		return true
	})
	return out, err
}

func msTime(ms int64) *string {
	if ms == 0 {
		return nil
	}
	s := time.UnixMilli(ms).UTC().Format(time.RFC3339)
	return &s
}

// cpActivity is POST /api/cp/activity {"slugs":[…]} (at most 256).
func (p *Proxy) cpActivity(ctx context.Context, r *cpRequest) (int, any, error) {
	var q struct {
		Slugs []string `json:"slugs"`
	}
	if err := r.decode(&q); err != nil {
		return 0, nil, err
	}
	if len(q.Slugs) == 0 || len(q.Slugs) > 256 {
		return 0, nil, invalid("slugs must hold 1..256 cluster slugs")
	}
	out := make([]map[string]any, 0, len(q.Slugs))
	for _, slug := range q.Slugs {
		c, err := p.findCluster(ctx, slug)
		if err == errClusterUnknown || !validSlug(slug) {
			out = append(out, map[string]any{"slug": slug, "found": false})
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		a, err := p.store.activityOf(ctx, c.ID)
		if err != nil {
			return 0, nil, err
		}
		bytes, err := p.retainedBytes(ctx, c)
		if err != nil {
			return 0, nil, err
		}
		out = append(out, map[string]any{"slug": slug, "found": true, "cluster_id": c.ID, "last_traffic": msTime(a.LastTrafficMs),
			"first_push": msTime(a.FirstPushMs), "last_key_use": msTime(a.LastKeyUseMs), "retained_bytes": bytes})
	}
	return http.StatusOK, map[string]any{"clusters": out}, nil
}
