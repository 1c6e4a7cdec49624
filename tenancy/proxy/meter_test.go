package proxy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

func TestMeterCountsQueuedItemsAndDeliveries(t *testing.T) {
	m := &meter{writer: "w", now: time.Now, rows: map[string]*meterRow{}, dirty: map[string]bool{}}
	m.record("c", "push", 201, 70, []byte(`[{"status":"queued"},{"status":"duplicate"},{"status":"error"}]`))
	m.record("c", "delivery", 200, 0, []byte(`{"messages":[{},{}]}`))
	m.record("c", "push", 400, 10, []byte(`{"error":"x"}`))
	m.collect()
	var push, delivery *meterRow
	for k, r := range m.rows {
		switch k[len(k)-len("push/w"):] {
		case "push/w":
			push = r
		}
		if k[len(k)-len("delivery/w"):] == "delivery/w" {
			delivery = r
		}
	}
	if push == nil || *push != (meterRow{Reqs: 1, Msgs: 1, BytesIn: 70, BytesOut: int64(len(`[{"status":"queued"},{"status":"duplicate"},{"status":"error"}]`))}) {
		t.Fatalf("push row %+v", push)
	}
	if delivery == nil || delivery.Msgs != 2 || delivery.Reqs != 1 {
		t.Fatalf("delivery row %+v", delivery)
	}
}

// TestMeterSpoolsAndReplays: rows the KV refuses go to the spool; the
// next process writes them and removes the file.
func TestMeterSpoolsAndReplays(t *testing.T) {
	dir := t.TempDir()
	down := errors.New("no majority")
	written := map[string]meterRow{}
	var fail bool
	write := func(_ context.Context, rows map[string]meterRow) error {
		if fail {
			return down
		}
		for k, v := range rows {
			written[k] = v
		}
		return nil
	}
	first := &meter{write: write, writer: "n1-a", spoolDir: dir, log: raftgroupstest.Quiet, now: time.Now,
		rows: map[string]*meterRow{}, dirty: map[string]bool{}}
	fail = true
	first.record("c", "push", 201, 10, []byte(`[{"status":"queued"}]`))
	first.final(context.Background())
	if _, err := os.Stat(filepath.Join(dir, "n1-a.json")); err != nil {
		t.Fatalf("nothing spooled: %v", err)
	}
	fail = false
	next := &meter{write: write, writer: "n1-b", spoolDir: dir, log: raftgroupstest.Quiet, now: time.Now,
		rows: map[string]*meterRow{}, dirty: map[string]bool{}}
	if err := next.replay(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(written) != 1 {
		t.Fatalf("replayed rows %v", written)
	}
	for _, r := range written {
		if r.Msgs != 1 || r.Reqs != 1 {
			t.Fatalf("replayed row %+v", r)
		}
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(files) != 0 {
		t.Fatalf("spool files left: %v", files)
	}
}

// TestUsageSumsWritersOverTheKV writes two writers' rows and reads them
// summed, as the usage route does.
func TestUsageSumsWritersOverTheKV(t *testing.T) {
	p, _ := testProxy(t, Config{})
	ctx := context.Background()
	now := time.Now()
	for _, w := range []string{"n1-a", "n2-b"} {
		m := newMeter(p.store, 1, "", time.Hour, raftgroupstest.Quiet)
		m.writer = w
		m.record("c1", "push", 201, 70, []byte(`[{"status":"queued"}]`))
		m.record("c2", "push", 201, 70, []byte(`[{"status":"queued"}]`))
		if err := m.flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := p.store.usage(ctx, "c1", now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Op != "push" || rows[0].Msgs != 2 || rows[0].Reqs != 2 || rows[0].BytesIn != 140 ||
		rows[0].Minute != minuteOf(now) {
		t.Fatalf("usage %+v", rows)
	}
}

func TestUsageRollsIntoDays(t *testing.T) {
	p, _ := testProxy(t, Config{})
	ctx := context.Background()
	tn, _, _ := p.store.ensureTenant(ctx, "acme", "")
	c, _, _ := p.store.ensureCluster(ctx, tn, "acme", "dev", nil)
	now := time.Now().UTC()
	for i, at := range []time.Time{now.Add(-24 * time.Hour), now, now} {
		m := newMeter(p.store, uint64(i), "", time.Hour, raftgroupstest.Quiet)
		m.now = func() time.Time { return at }
		m.record(c.ID, "push", 201, 10, []byte(`[{"status":"queued"}]`))
		if err := m.flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // a repeat counts nothing twice
		if err := p.rollup(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	days, err := p.store.usageDays(ctx, c.ID, now.AddDate(0, 0, -3))
	if err != nil || len(days) != 2 || days[0].Msgs != 1 || days[1].Msgs != 2 || days[1].Day != now.Format(time.DateOnly) || days[1].Op != "push" {
		t.Fatalf("days %+v %v", days, err)
	}
}

// TestMeterCountsWhileFlushing: requests counted from many goroutines
// while flushes collect them are all written once.
func TestMeterCountsWhileFlushing(t *testing.T) {
	var mu sync.Mutex
	written := map[string]meterRow{}
	write := func(_ context.Context, rows map[string]meterRow) error {
		mu.Lock()
		defer mu.Unlock()
		for k, v := range rows {
			written[k] = v // running totals: the newest wins
		}
		return nil
	}
	m := &meter{write: write, writer: "w", log: raftgroupstest.Quiet, now: time.Now, rows: map[string]*meterRow{}, dirty: map[string]bool{}}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				m.add("c", "push", meterRow{Reqs: 1, Msgs: 2})
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			_ = m.flush(context.Background())
		}
	}()
	wg.Wait()
	<-done
	if err := m.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var total meterRow
	mu.Lock()
	for _, r := range written {
		total.add(r)
	}
	mu.Unlock()
	if total.Reqs != 8000 || total.Msgs != 16000 {
		t.Fatalf("written %+v, want 8000 requests and 16000 messages", total)
	}
}
