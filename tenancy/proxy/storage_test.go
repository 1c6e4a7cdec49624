package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

func TestStorageQuotaFromTheBrokersMeasurement(t *testing.T) {
	p, _ := testProxy(t, Config{})
	p.broker = api.New(api.Config{}, p.engine, raftgroupstest.Quiet).Handler()
	ctx := context.Background()
	tn, _, _ := p.store.ensureTenant(ctx, "acme", "")
	c, _, _ := p.store.ensureCluster(ctx, tn, "acme", "dev", nil)
	tenant, _ := p.tenantOf(c)
	body := `{"items":[{"queue":"q1","payload":"0123456789012345678901234567890123456789"},{"queue":"q2","payload":{"a":1}}]}`
	if code, out := p.brokerCall("POST", "/api/v1/push", tenant, []byte(body)); code != 201 {
		t.Fatalf("push: %d %s", code, out)
	}
	total, err := p.retainedBytes(ctx, c)
	if err != nil || total < 40 {
		t.Fatalf("retained %d %v", total, err)
	}
	small := Limits{LimitMaxRetainedBytes: n(int64(total))}
	if p.overQuota(c, small, time.Now()) {
		t.Fatal("over the quota before any measurement")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !p.overQuota(c, small, time.Now()) {
		if time.Now().After(deadline) {
			t.Fatal("the measurement never stopped pushes at the quota")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p.overQuota(c, Limits{LimitMaxRetainedBytes: n(int64(total) + 1)}, time.Now()) {
		t.Fatal("under the quota, refused")
	}
	if p.overQuota(c, Limits{}, time.Now()) {
		t.Fatal("no quota, refused")
	}
	p.stop()
	p.loops.Wait()
}

func TestMonthlyQuotaFromUsageRows(t *testing.T) {
	p, _ := testProxy(t, Config{})
	ctx := context.Background()
	c := &Cluster{ID: "c1", Slug: "acme"}
	m := newMeter(p.store, 1, "", time.Hour, raftgroupstest.Quiet)
	m.record("c1", "push", 201, 10, []byte(`[{"status":"queued"},{"status":"queued"},{"status":"queued"}]`))
	m.record("c1", "delivery", 200, 0, []byte(`{"messages":[{},{}]}`))
	if err := m.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := p.monthMessages(ctx, c); err != nil || got != 3 {
		t.Fatalf("month messages %d %v", got, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !p.overMonthly(c, Limits{LimitMonthlyMsgsQuota: n(3)}, time.Now()) {
		if time.Now().After(deadline) {
			t.Fatal("the monthly quota never stopped pushes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p.overMonthly(c, Limits{}, time.Now()) {
		t.Fatal("no quota, refused")
	}
	p.stop()
	p.loops.Wait()
}
