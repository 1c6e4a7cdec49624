package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queen-mq/queen/wire"
)

// Metering (spec §6.8): every proxied request is counted per cluster,
// minute and class. Each process writes its own rows, keyed by its
// writer id (node and boot), holding its running totals for that minute,
// so a write is idempotent and a retry never counts twice. Rows expire
// after QUEEN_PROXY_USAGE_KEEP_DAYS (a KV TTL). Rows the KV does not take
// are spooled to QUEEN_PROXY_SPOOL_DIR and written at the next start.

// meterRow is one writer's totals for a cluster, minute and class.
type meterRow struct {
	Reqs     int64 `json:"reqs"`
	Msgs     int64 `json:"msgs"`
	BytesIn  int64 `json:"bytes_in"`
	BytesOut int64 `json:"bytes_out"`
}

func (r *meterRow) add(o meterRow) {
	r.Reqs += o.Reqs
	r.Msgs += o.Msgs
	r.BytesIn += o.BytesIn
	r.BytesOut += o.BytesOut
}

// rowWriter writes usage rows (KV key → row) as one unit.
type rowWriter func(ctx context.Context, rows map[string]meterRow) error

type meter struct {
	write    rowWriter
	writer   string // this process's id in row keys
	spoolDir string
	log      *slog.Logger
	now      func() time.Time

	mu    sync.Mutex
	rows  map[string]*meterRow // by KV key: this process's totals
	dirty map[string]bool      // rows changed since written

	// cells count requests as they are answered, by cluster, class and
	// minute, in atomics: no lock every connection shares on the request
	// path (a Kafka produce is metered per request). collect moves them
	// into rows.
	cells sync.Map // cellKey → *meterCell
}

type cellKey struct {
	cluster, op string
	minute      int64 // Unix minutes
}

type meterCell struct {
	reqs, msgs, in, out atomic.Int64
}

func newMeter(store *kvStore, node uint64, spoolDir string, keep time.Duration, log *slog.Logger) *meter {
	ttl := uint32(min(keep/time.Second, 1<<32-1))
	write := func(ctx context.Context, rows map[string]meterRow) error {
		keys := make([]string, 0, len(rows))
		for k := range rows {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for len(keys) > 0 {
			n := min(len(keys), wire.MaxKVOpsPerCall)
			ops := make([]wire.KVOp, 0, n)
			for _, k := range keys[:n] {
				op := putOp(k, rows[k], false)
				op.TTLSec = ttl
				ops = append(ops, op)
			}
			if _, err := store.applyQuiet(ctx, ops...); err != nil {
				return err
			}
			keys = keys[n:]
		}
		return nil
	}
	var boot [4]byte
	_, _ = rand.Read(boot[:])
	return &meter{write: write, writer: fmt.Sprintf("n%d-%s", node, hex.EncodeToString(boot[:])), spoolDir: spoolDir, log: log,
		now: time.Now, rows: map[string]*meterRow{}, dirty: map[string]bool{}}
}

func minuteOf(t time.Time) string { return t.UTC().Truncate(time.Minute).Format(time.RFC3339) }

func usagePrefix(cluster string) string { return "usage/" + cluster + "/" }

// record counts one answered request. Requests the broker refused are not
// counted; a push counts the items it queued (a duplicate was counted
// when first queued, an item answered error never), a pop the messages
// it delivered.
func (m *meter) record(cluster, op string, status, bytesIn int, response []byte) {
	if status >= 400 {
		return
	}
	row := meterRow{Reqs: 1, BytesIn: int64(bytesIn), BytesOut: int64(len(response))}
	switch op {
	case "push":
		// The broker's own answer: a client's text in it (a queue name)
		// is JSON-escaped, so it cannot hold this with its quotes.
		row.Msgs = int64(bytes.Count(response, []byte(`"status":"queued"`)))
	case "delivery":
		var pop struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if json.Unmarshal(response, &pop) == nil {
			row.Msgs = int64(len(pop.Messages))
		}
	}
	m.add(cluster, op, row)
}

// add counts row for cluster and class op in this minute: THE meter of
// both doors (HTTP's record, Kafka's kafka_policy.go).
func (m *meter) add(cluster, op string, row meterRow) {
	k := cellKey{cluster: cluster, op: op, minute: m.now().Unix() / 60}
	v, ok := m.cells.Load(k)
	if !ok {
		v, _ = m.cells.LoadOrStore(k, &meterCell{})
	}
	c := v.(*meterCell)
	c.reqs.Add(row.Reqs)
	c.msgs.Add(row.Msgs)
	c.in.Add(row.BytesIn)
	c.out.Add(row.BytesOut)
}

// collect moves the cells' counts into the rows (marked changed) and
// forgets cells of minutes before the last, which nothing adds to any
// more.
func (m *meter) collect() {
	current := m.now().Unix() / 60
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cells.Range(func(key, v any) bool {
		k, c := key.(cellKey), v.(*meterCell)
		row := meterRow{Reqs: c.reqs.Swap(0), Msgs: c.msgs.Swap(0), BytesIn: c.in.Swap(0), BytesOut: c.out.Swap(0)}
		if k.minute < current-1 {
			m.cells.Delete(k)
		}
		if row == (meterRow{}) {
			return true
		}
		rk := usagePrefix(k.cluster) + minuteOf(time.Unix(k.minute*60, 0)) + "/" + k.op + "/" + m.writer
		r := m.rows[rk]
		if r == nil {
			r = &meterRow{}
			m.rows[rk] = r
		}
		r.add(row)
		m.dirty[rk] = true
		return true
	})
}

// flush writes the changed rows. On failure they stay changed, to be
// written next time, and are spooled so that a node that stops before
// then loses nothing. Rows of minutes past are forgotten once written.
func (m *meter) flush(ctx context.Context) error {
	m.collect()
	m.mu.Lock()
	batch := make(map[string]meterRow, len(m.dirty))
	for k := range m.dirty {
		batch[k] = *m.rows[k]
	}
	m.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	if err := m.write(ctx, batch); err != nil {
		m.spool(batch)
		return err
	}
	cutoff := minuteOf(m.now().Add(-2 * time.Minute))
	m.mu.Lock()
	for k, written := range batch {
		if r := m.rows[k]; r != nil && *r == written {
			delete(m.dirty, k)
		}
	}
	for k := range m.rows {
		if !m.dirty[k] && rowMinute(k) < cutoff {
			delete(m.rows, k)
		}
	}
	m.mu.Unlock()
	m.unspool()
	return nil
}

// rowMinute is the minute of a usage row key.
func rowMinute(key string) string {
	parts := strings.Split(key, "/")
	if len(parts) < 3 {
		return ""
	}
	return parts[2]
}

func (m *meter) spoolPath() string { return filepath.Join(m.spoolDir, m.writer+".json") }

// spool keeps rows the KV did not take in this process's spool file,
// replacing what it held: the rows are running totals, newest wins.
func (m *meter) spool(batch map[string]meterRow) {
	if m.spoolDir == "" {
		return
	}
	old := map[string]meterRow{}
	if b, err := os.ReadFile(m.spoolPath()); err == nil {
		_ = json.Unmarshal(b, &old)
	}
	for k, v := range batch {
		old[k] = v
	}
	b, _ := json.Marshal(old)
	if err := os.MkdirAll(m.spoolDir, 0o700); err != nil {
		m.log.Error("proxy: usage spool", "err", err, "dir", m.spoolDir)
		return
	}
	tmp := m.spoolPath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		err = os.Rename(tmp, m.spoolPath())
		if err == nil {
			m.log.Warn("proxy: usage spooled; the KV did not take it", "rows", len(batch), "file", m.spoolPath())
			return
		}
	}
	m.log.Error("proxy: usage could not be spooled", "dir", m.spoolDir)
}

// unspool removes this process's spool file once everything is written.
func (m *meter) unspool() {
	m.mu.Lock()
	clean := len(m.dirty) == 0
	m.mu.Unlock()
	if clean && m.spoolDir != "" {
		_ = os.Remove(m.spoolPath())
	}
}

// replay writes the rows earlier processes spooled, then removes their
// files. Those writers are gone, so their spooled totals are the newest.
func (m *meter) replay(ctx context.Context) error {
	if m.spoolDir == "" {
		return nil
	}
	files, err := filepath.Glob(filepath.Join(m.spoolDir, "*.json"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if f == m.spoolPath() {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		rows := map[string]meterRow{}
		if err := json.Unmarshal(b, &rows); err != nil {
			m.log.Error("proxy: unreadable usage spool file left in place", "file", f, "err", err)
			continue
		}
		if err := m.write(ctx, rows); err != nil {
			return err
		}
		if err := os.Remove(f); err != nil {
			return err
		}
		m.log.Info("proxy: spooled usage written", "file", f, "rows", len(rows))
	}
	return nil
}

// run replays the spool (until the KV takes it) and flushes every
// interval until ctx ends, with also (the activity rows).
func (m *meter) run(ctx context.Context, interval time.Duration, also func(context.Context) error) {
	replayed := m.replay(ctx) == nil
	every(ctx, interval, func(ctx context.Context) {
		if err := m.flush(ctx); err != nil {
			m.log.Warn("proxy: usage flush failed", "err", err)
		}
		if err := also(ctx); err != nil {
			m.log.Debug("proxy: activity flush failed", "err", err)
		}
		if !replayed {
			replayed = m.replay(ctx) == nil
		}
	})
}

// final writes what is left at shutdown, or spools it.
func (m *meter) final(ctx context.Context) {
	fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if ctx.Err() != nil {
		fctx = ctx
	}
	if err := m.flush(fctx); err != nil {
		m.log.Warn("proxy: usage not written at shutdown; spooled", "err", err)
	}
}

// usageMinute is one row of the usage route: every writer's totals for a
// minute and class added up.
type usageMinute struct {
	Minute string `json:"minute"`
	Op     string `json:"op"`
	meterRow
}

// usage reads a cluster's rows from since on, summed over writers.
func (s *kvStore) usage(ctx context.Context, cluster string, since time.Time) ([]usageMinute, error) {
	sums := map[[2]string]*meterRow{}
	prefix := usagePrefix(cluster)
	err := s.scan(ctx, prefix, prefix+minuteOf(since), func(key string, val []byte) bool {
		parts := strings.Split(strings.TrimPrefix(key, prefix), "/")
		var r meterRow
		if len(parts) != 3 || json.Unmarshal(val, &r) != nil {
			return true
		}
		k := [2]string{parts[0], parts[1]}
		if sums[k] == nil {
			sums[k] = &meterRow{}
		}
		sums[k].add(r)
		return true
	})
	if err != nil {
		return nil, err
	}
	out := make([]usageMinute, 0, len(sums))
	for k, r := range sums {
		out = append(out, usageMinute{Minute: k[0], Op: k[1], meterRow: *r})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Minute != out[j].Minute {
			return out[i].Minute < out[j].Minute
		}
		return out[i].Op < out[j].Op
	})
	return out, nil
}
