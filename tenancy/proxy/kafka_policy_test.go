package proxy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka/broker"
)

// kafkaPolicyFor logs in over Kafka with a new all-scope key of a new
// free-plan cluster and returns the login's policy and the cluster.
func kafkaPolicyFor(t *testing.T, p *Proxy, slug string) (broker.Policy, *Cluster) {
	t.Helper()
	ctx := context.Background()
	key, _ := NewKey("live")
	tn, _, err := p.store.ensureTenant(ctx, slug, "")
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := p.store.ensureCluster(ctx, tn, slug, "free", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.store.ensureKey(ctx, c.ID, "k", HashKey(key), []string{ScopeProduce, ScopeConsume, ScopeRead, ScopeAdmin}); err != nil {
		t.Fatal(err)
	}
	if err := p.store.seedPlans(ctx); err != nil {
		t.Fatal(err)
	}
	pr, err := p.KafkaPlain(nil)(ctx, slug, key)
	if err != nil {
		t.Fatal(err)
	}
	pol := pr.Identity.(broker.Identity).Policy
	if pol == nil {
		t.Fatal("a login with an API key has no plan policy")
	}
	return pol, c
}

func policyErrCode(err error) int16 {
	var pe *broker.PolicyError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return 0
}

// TestKafkaPolicyPlanCaps: the free plan's caps, as Kafka answers them: a
// topic over 8 partitions is INVALID_PARTITIONS, the 21st topic
// POLICY_VIOLATION (enforced); records over 256 KiB and batches over
// 1,000 records are refused in shadow mode too, as HTTP's size caps.
func TestKafkaPolicyPlanCaps(t *testing.T) {
	p, _ := testProxy(t, Config{Enforce: true})
	pol, _ := kafkaPolicyFor(t, p, "acme")
	big := []broker.CreateAsk{{Topic: "big", Partitions: 5000}}
	pol.Create(big)
	if policyErrCode(big[0].Err) != kerr.InvalidPartitions.Code {
		t.Fatalf("a 5,000-partition topic on the free plan: %v", big[0].Err)
	}
	grow := []broker.CreateAsk{{Topic: "big", Partitions: 9, Exists: true}}
	pol.Create(grow)
	if policyErrCode(grow[0].Err) != kerr.InvalidPartitions.Code {
		t.Fatalf("growing past 8 partitions: %v", grow[0].Err)
	}
	var asks []broker.CreateAsk
	for i := range 26 {
		asks = append(asks, broker.CreateAsk{Topic: fmt.Sprintf("t%02d", i), Partitions: 8})
	}
	pol.Create(asks)
	for i, a := range asks {
		want := int16(0)
		if i >= 20 {
			want = kerr.PolicyViolation.Code
		}
		if policyErrCode(a.Err) != want || (want == 0 && a.Err != nil) {
			t.Fatalf("topic %d of 26: %v", i, a.Err)
		}
	}
	g := pol.Produce()
	if g.Refuse != nil || g.MaxRecordBytes != 256<<10 || g.MaxBatchRecords != 1000 {
		t.Fatalf("the free plan's produce gate: %+v", g)
	}
	shadow, _ := testProxy(t, Config{})
	spol, _ := kafkaPolicyFor(t, shadow, "beta")
	if g := spol.Produce(); g.MaxRecordBytes != 256<<10 {
		t.Fatalf("shadow mode drops the size caps: %+v", g)
	}
	over := []broker.CreateAsk{{Topic: "big", Partitions: 5000}}
	if spol.Create(over); over[0].Err != nil {
		t.Fatalf("shadow mode refused a cap: %v", over[0].Err)
	}
}

// TestKafkaPolicyBlocksPushes: push_blocked, and a spent storage quota,
// refuse a Kafka produce as HTTP refuses a push; consuming stays open.
func TestKafkaPolicyBlocksPushes(t *testing.T) {
	p, _ := testProxy(t, Config{Enforce: true})
	pol, c := kafkaPolicyFor(t, p, "acme")
	ctx := context.Background()
	blocked := *c
	blocked.Status = StatusPushBlocked
	if _, err := p.store.apply(ctx, putOp(clusterKey(c.ID), blocked, false)); err != nil {
		t.Fatal(err)
	}
	p.cache.drop()
	pol.(*kafkaLogin).viewAt.Store(0)
	if g := pol.Produce(); g.Refuse == nil || g.Refuse.Code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("push_blocked: %+v", g)
	}
	if code := pol.Before(ctx, int16(kmsg.Fetch)); code != 0 {
		t.Fatalf("push_blocked refuses a fetch: %d", code)
	}
	if _, err := p.store.apply(ctx, putOp(clusterKey(c.ID), *c, false)); err != nil {
		t.Fatal(err)
	}
	p.cache.drop()
	pol.(*kafkaLogin).viewAt.Store(0)
	if g := pol.Produce(); g.Refuse != nil {
		t.Fatalf("active again: %+v", g)
	}
	// The last storage measurement is over the free plan's 1 GiB.
	r := p.retained.of("storage", c.ID)
	r.bytes.Store(2 << 30)
	r.at.Store(time.Now().UnixNano())
	if g := pol.Produce(); g.Refuse == nil || g.Refuse.Code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("over max_retained_bytes: %+v", g)
	}
	suspended := *c
	suspended.Status = StatusSuspended
	if _, err := p.store.apply(ctx, putOp(clusterKey(c.ID), suspended, false)); err != nil {
		t.Fatal(err)
	}
	p.cache.drop()
	pol.(*kafkaLogin).viewAt.Store(0)
	if code := pol.Before(ctx, int16(kmsg.Metadata)); code == 0 {
		t.Fatal("a cluster suspended since the login still serves its connection")
	}
}

// TestKafkaPolicyThrottles: past the free plan's burst (25 requests) a
// login's answers carry a throttle, never an error, bounded by one burst
// (5 s); in shadow mode there is none.
func TestKafkaPolicyThrottles(t *testing.T) {
	p, _ := testProxy(t, Config{Enforce: true})
	pol, _ := kafkaPolicyFor(t, p, "acme")
	first := -1
	var worst time.Duration
	for i := range 300 {
		d := pol.After(broker.Usage{Key: int16(kmsg.Produce), Class: broker.UsageProduce, Records: 1})
		if d > 0 && first < 0 {
			first = i
		}
		worst = max(worst, d)
	}
	if first < 20 || first > 30 {
		t.Fatalf("the first throttle came at request %d, want after the burst of 25", first)
	}
	if worst < time.Second || worst > 5*time.Second+time.Millisecond {
		t.Fatalf("the throttle reached %v, want up to one burst's worth (5 s)", worst)
	}
	// The same bucket as HTTP's: the cluster's HTTP requests are refused now.
	l := pol.(*kafkaLogin)
	if ok, _ := p.rates.takeRequest(l.cluster.ID, l.view.Load().limits, time.Now()); ok {
		t.Fatal("HTTP passed a bucket Kafka emptied")
	}
	shadow, _ := testProxy(t, Config{})
	spol, _ := kafkaPolicyFor(t, shadow, "beta")
	for range 300 {
		if d := spol.After(broker.Usage{Key: int16(kmsg.Produce), Class: broker.UsageProduce, Records: 1}); d != 0 {
			t.Fatalf("shadow mode throttled: %v", d)
		}
	}
}

// TestKafkaPolicyMeters: Kafka requests are metered as their route
// classes, so the cluster's usage shows them; refused ones are not.
func TestKafkaPolicyMeters(t *testing.T) {
	p, _ := testProxy(t, Config{})
	pol, c := kafkaPolicyFor(t, p, "acme")
	ctx := context.Background()
	pol.After(broker.Usage{Key: int16(kmsg.Produce), Class: broker.UsageProduce, Records: 3, BytesIn: 120})
	pol.After(broker.Usage{Key: int16(kmsg.Produce), Class: broker.UsageProduce, Refused: true})
	pol.After(broker.Usage{Key: int16(kmsg.Fetch), Class: broker.UsageFetch, Records: 2, BytesOut: 80})
	pol.After(broker.Usage{Key: int16(kmsg.CreateTopics), Class: broker.UsageAdmin})
	pol.After(broker.Usage{Key: int16(kmsg.Metadata), Class: broker.UsageRead})
	if err := p.meter.flush(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := p.store.usage(ctx, c.ID, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]meterRow{}
	for _, r := range rows {
		got[r.Op] = r.meterRow
	}
	if got["push"] != (meterRow{Reqs: 1, Msgs: 3, BytesIn: 120}) || got["delivery"] != (meterRow{Reqs: 1, Msgs: 2, BytesOut: 80}) ||
		got["configure"].Reqs != 1 || got["read"].Reqs != 1 {
		t.Fatalf("usage %+v", got)
	}
}

// TestKafkaPolicyParkedFetches: a fetch that may wait takes one of the
// cluster's parked slots, the ones HTTP's long-poll pops take (free: 50);
// past them, enforced, it is answered at once and throttled a second.
func TestKafkaPolicyParkedFetches(t *testing.T) {
	p, _ := testProxy(t, Config{Enforce: true})
	pol, c := kafkaPolicyFor(t, p, "acme")
	var leaves []func()
	for i := range 50 {
		leave, ok, d := pol.Park()
		if !ok || leave == nil || d != 0 {
			t.Fatalf("parked fetch %d of 50 refused", i+1)
		}
		leaves = append(leaves, leave)
	}
	if _, ok, d := pol.Park(); ok || d != time.Second {
		t.Fatalf("the 51st parked fetch: %v %v", ok, d)
	}
	if p.enterParked(c, n(50)) {
		t.Fatal("an HTTP long poll passed the slots Kafka holds")
	}
	leaves[0]()
	if leave, ok, _ := pol.Park(); !ok {
		t.Fatal("a freed slot was not reused")
	} else {
		leave()
	}
	shadow, _ := testProxy(t, Config{})
	spol, _ := kafkaPolicyFor(t, shadow, "beta")
	for range 60 {
		if _, ok, _ := spol.Park(); !ok {
			t.Fatal("shadow mode refused a parked fetch")
		}
	}
}

// TestKafkaPolicyQuotas: a login's plan rates are its client quotas, the
// cluster's overrides applied, unlimited ones left out.
func TestKafkaPolicyQuotas(t *testing.T) {
	p, _ := testProxy(t, Config{Enforce: true})
	pol, c := kafkaPolicyFor(t, p, "acme")
	want := map[string]float64{LimitRequestsPerSec: 5, LimitRequestsBurst: 25, LimitMessagesPerSec: 20, LimitMessagesBurst: 100}
	if got := pol.Quotas(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the free plan's quotas: %v, want %v", got, want)
	}
	over := *c
	over.Overrides = Limits{LimitRequestsPerSec: n(50), LimitMessagesBurst: nil}
	if _, err := p.store.apply(context.Background(), putOp(clusterKey(c.ID), over, false)); err != nil {
		t.Fatal(err)
	}
	p.cache.drop()
	pol.(*kafkaLogin).viewAt.Store(0)
	want = map[string]float64{LimitRequestsPerSec: 50, LimitRequestsBurst: 25, LimitMessagesPerSec: 20}
	if got := pol.Quotas(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("with overrides: %v, want %v", got, want)
	}
}
