package broker

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

func sp(s string) *string { return &s }

// quotaEntity builds a kadm entity from type=name pairs, "" a default.
func kadmEntity(pairs ...string) kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	for i := 0; i < len(pairs); i += 2 {
		c := kadm.ClientQuotaEntityComponent{Type: pairs[i]}
		if pairs[i+1] != "" {
			c.Name = sp(pairs[i+1])
		}
		e = append(e, c)
	}
	return e
}

// described is a describe answer as sorted "entity:values" strings.
func described(qs kadm.DescribedClientQuotas) []string {
	var out []string
	for _, q := range qs {
		var vs []string
		for _, v := range q.Values {
			vs = append(vs, v.String())
		}
		out = append(out, q.Entity.String()+":"+strings.Join(vs, ","))
	}
	sort.Strings(out)
	return out
}

// TestClientQuotasRoundTrip sets quotas on named and default entities,
// describes them with each match type, strict and not, checks
// validate_only writes nothing and Kafka's refusals, and removes them.
func TestClientQuotasRoundTrip(t *testing.T) {
	n := startNode(t, nil)
	adm := kadm.NewClient(n.client())
	ctx := ctxFor(t)
	set := func(key string, v float64) []kadm.AlterClientQuotaOp {
		return []kadm.AlterClientQuotaOp{{Key: key, Value: v}}
	}
	entries := []kadm.AlterClientQuotaEntry{
		{Entity: kadmEntity("user", "alice"), Ops: set("producer_byte_rate", 1024)},
		{Entity: kadmEntity("user", ""), Ops: set("consumer_byte_rate", 2048)},
		{Entity: kadmEntity("user", "alice", "client-id", "app"), Ops: set("request_percentage", 12.5)},
		{Entity: kadmEntity("client-id", ""), Ops: set("controller_mutation_rate", 3.5)},
	}
	if res, err := adm.ValidateAlterClientQuotas(ctx, entries); err != nil || res[0].Err != nil {
		t.Fatalf("validate: %v %+v", err, res)
	}
	if qs, err := adm.DescribeClientQuotas(ctx, false, nil); err != nil || len(qs) != 0 {
		t.Fatalf("validate_only wrote: %v %v", err, described(qs))
	}
	res, err := adm.AlterClientQuotas(ctx, entries)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("alter %v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
	check := func(strict bool, comps []kadm.DescribeClientQuotaComponent, want ...string) {
		t.Helper()
		qs, err := adm.DescribeClientQuotas(ctx, strict, comps)
		if err != nil {
			t.Fatalf("describe %+v: %v", comps, err)
		}
		got := described(qs)
		sort.Strings(want)
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("describe strict=%v %+v:\n got %q\nwant %q", strict, comps, got, want)
		}
	}
	alice := "{user=alice}:producer_byte_rate=1024.000000"
	userDef := "{user=<default>}:consumer_byte_rate=2048.000000"
	aliceApp := "{user=alice, client-id=app}:request_percentage=12.500000"
	clientDef := "{client-id=<default>}:controller_mutation_rate=3.500000"
	exact := func(typ, name string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchName: sp(name), MatchType: kmsg.QuotasMatchTypeExact}
	}
	def := func(typ string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: kmsg.QuotasMatchTypeDefault}
	}
	anyOf := func(typ string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: kmsg.QuotasMatchTypeAny}
	}
	check(false, nil, alice, userDef, aliceApp, clientDef)
	check(true, nil)
	check(false, []kadm.DescribeClientQuotaComponent{exact("user", "alice")}, alice, aliceApp)
	check(true, []kadm.DescribeClientQuotaComponent{exact("user", "alice")}, alice)
	check(false, []kadm.DescribeClientQuotaComponent{def("user")}, userDef)
	check(false, []kadm.DescribeClientQuotaComponent{anyOf("user")}, alice, userDef, aliceApp)
	check(true, []kadm.DescribeClientQuotaComponent{anyOf("user"), anyOf("client-id")}, aliceApp)
	check(false, []kadm.DescribeClientQuotaComponent{def("client-id")}, clientDef)
	check(false, []kadm.DescribeClientQuotaComponent{exact("user", "bob")})

	// Kafka's refusals of a filter: the whole request.
	for _, bad := range []struct {
		comps []kadm.DescribeClientQuotaComponent
		want  error
	}{
		{[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: kmsg.QuotasMatchTypeExact}}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: sp("x"), MatchType: kmsg.QuotasMatchTypeDefault}}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{anyOf("user"), def("user")}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{anyOf("ip"), anyOf("user")}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{anyOf("group")}, kerr.UnsupportedVersion},
	} {
		if _, err := adm.DescribeClientQuotas(ctx, false, bad.comps); !errors.Is(err, bad.want) {
			t.Fatalf("describe %+v: %v, want %v", bad.comps, err, bad.want)
		}
	}
	// Kafka's refusals of an alteration: that entity only.
	for _, bad := range []kadm.AlterClientQuotaEntry{
		{Entity: kadmEntity("user", "bob"), Ops: set("unknown_rate", 1)},
		{Entity: kadmEntity("group", "g"), Ops: set("producer_byte_rate", 1)},
		{Entity: kadmEntity("ip", "10.0.0.1"), Ops: set("connection_creation_rate", 1)},
		{Entity: kadmEntity("user", "bob", "user", "carol"), Ops: set("producer_byte_rate", 1)},
		{Entity: nil, Ops: set("producer_byte_rate", 1)},
		{Entity: kadmEntity("user", "bob"), Ops: set("producer_byte_rate", 1.5)},
		{Entity: kadmEntity("user", "bob"), Ops: set("consumer_byte_rate", -1)},
	} {
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{bad})
		if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.InvalidRequest) {
			t.Fatalf("alter %+v: %v %+v, want INVALID_REQUEST", bad, err, res)
		}
	}
	check(false, []kadm.DescribeClientQuotaComponent{exact("user", "bob")})

	// Removing every value removes the entity; the others stay.
	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadmEntity("user", "alice"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}},
		{Entity: kadmEntity("user", "alice", "client-id", "app"), Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 10}}},
	})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("remove: %v %+v", err, res)
	}
	check(false, []kadm.DescribeClientQuotaComponent{exact("user", "alice")},
		"{user=alice, client-id=app}:consumer_byte_rate=10.000000,request_percentage=12.500000")
}

// TestClientQuotaPrecedence checks the resolution order Kafka documents,
// most specific first, per quota kind, and the bucket each match meters.
func TestClientQuotaPrecedence(t *testing.T) {
	tenant := wire.DefaultTenant
	other := wire.ID{1}
	ent := func(user, client *string, hasU, hasC bool) quotaEntity {
		return quotaEntity{HasUser: hasU, User: user, HasClient: hasC, Client: client}
	}
	stored := []storedQuota{
		{Tenant: tenant, Entity: ent(sp("alice"), sp("app"), true, true), Values: map[string]float64{quotaProducerByteRate: 1}},
		{Tenant: tenant, Entity: ent(sp("alice"), nil, true, true), Values: map[string]float64{quotaProducerByteRate: 2}},
		{Tenant: tenant, Entity: ent(sp("alice"), nil, true, false), Values: map[string]float64{quotaProducerByteRate: 3, quotaConsumerByteRate: 30}},
		{Tenant: tenant, Entity: ent(nil, sp("app"), true, true), Values: map[string]float64{quotaProducerByteRate: 4}},
		{Tenant: tenant, Entity: ent(nil, nil, true, true), Values: map[string]float64{quotaProducerByteRate: 5}},
		{Tenant: tenant, Entity: ent(nil, nil, true, false), Values: map[string]float64{quotaProducerByteRate: 6}},
		{Tenant: tenant, Entity: ent(nil, sp("app"), false, true), Values: map[string]float64{quotaProducerByteRate: 7}},
		{Tenant: tenant, Entity: ent(nil, nil, false, true), Values: map[string]float64{quotaProducerByteRate: 8, quotaRequestPercentage: 50}},
		{Tenant: other, Entity: ent(sp("alice"), sp("app"), true, true), Values: map[string]float64{quotaProducerByteRate: 99}},
	}
	// Removing the most specific quota each time reveals the next one.
	for i := range stored[:8] {
		tab := tableOf(stored[i:])
		rate, _, ok := tab.resolve(tenant, quotaProducerByteRate, "alice", "app")
		if !ok || rate != float64(i+1) {
			t.Fatalf("with quotas %d.. set: rate %v %v, want %d", i+1, rate, ok, i+1)
		}
	}
	tab := tableOf(stored)
	if r, _, _ := tab.resolve(tenant, quotaConsumerByteRate, "alice", "app"); r != 30 {
		t.Fatalf("consumer rate %v: a kind resolves on its own", r)
	}
	if _, _, ok := tab.resolve(tenant, quotaConsumerByteRate, "bob", "x"); ok {
		t.Fatal("no consumer quota for bob, yet one resolved")
	}
	if r, _, _ := tab.resolve(other, quotaProducerByteRate, "alice", "app"); r != 99 {
		t.Fatalf("other tenant's rate %v", r)
	}
	if _, _, ok := tab.resolve(other, quotaProducerByteRate, "bob", "app"); ok {
		t.Fatal("a tenant's quotas held for another tenant")
	}
	// A default quota meters each user on its own bucket.
	_, kb, _ := tableOf(stored[5:6]).resolve(tenant, quotaProducerByteRate, "bob", "x")
	_, kc, _ := tableOf(stored[5:6]).resolve(tenant, quotaProducerByteRate, "carol", "x")
	if kb == kc || kb.client.has {
		t.Fatalf("default user quota buckets: %+v %+v", kb, kc)
	}
}

// TestQuotaThrottle checks the token bucket: a second of quota passes
// unthrottled, the overage is throttled for as long as it takes to drain
// at the rate, and the credit refills with time.
func TestQuotaThrottle(t *testing.T) {
	var bk quotaBucket
	now := time.Unix(1000, 0)
	const rate = 1000.0 // bytes/s
	if d := bk.charge(now, rate, 1000); d != 0 {
		t.Fatalf("within the burst: throttle %v", d)
	}
	if d := bk.charge(now, rate, 500); d != 500*time.Millisecond {
		t.Fatalf("500 bytes over at 1000 B/s: throttle %v, want 500ms", d)
	}
	if got := time.Duration(bk.mutedUntil.Load() - now.UnixNano()); got != 500*time.Millisecond {
		t.Fatalf("muted for %v", got)
	}
	// 250ms later 250 bytes have drained: 250 still over, plus 100 more.
	if d := bk.charge(now.Add(250*time.Millisecond), rate, 100); d != 350*time.Millisecond {
		t.Fatalf("throttle %v, want 350ms", d)
	}
	// Long idle: the credit is full again, no more than one second of it.
	if d := bk.charge(now.Add(time.Hour), rate, 1000); d != 0 {
		t.Fatalf("after idling: throttle %v", d)
	}
	if d := bk.charge(now.Add(time.Hour), rate, 1); d != time.Millisecond {
		t.Fatalf("burst capped at one second: throttle %v", d)
	}
}

// TestClientQuotasTenantScoped: the same entity set by two tenants is two
// entities; each tenant reads only its own, and the node's cache resolves
// each connection's tenant to its own rate.
func TestClientQuotasTenantScoped(t *testing.T) {
	n := startNode(t, nil)
	ctx := ctxFor(t)
	tenantA := wire.ID{0xa}
	alice := quotaEntity{HasUser: true, User: sp("alice")}
	op := func(v float64) []kmsg.AlterClientQuotasRequestEntryOp {
		return []kmsg.AlterClientQuotasRequestEntryOp{{Key: quotaProducerByteRate, Value: v}}
	}
	if err := n.broker.alterQuota(ctx, wire.DefaultTenant, alice, op(100)); err != nil {
		t.Fatal(err)
	}
	if err := n.broker.alterQuota(ctx, tenantA, alice, op(200)); err != nil {
		t.Fatal(err)
	}
	for tenant, want := range map[wire.ID]float64{wire.DefaultTenant: 100, tenantA: 200} {
		qs, err := n.broker.readQuotas(tenant)
		if err != nil || len(qs) != 1 || qs[0].Values[quotaProducerByteRate] != want {
			t.Fatalf("tenant %s reads %v %+v, want its own rate %v", tenant, err, qs, want)
		}
	}
	// The node's refresher may store a table it read a moment before:
	// poll, with a deadline, for the cache to hold both rates.
	cached := func(ok func() bool) bool {
		deadline := time.Now().Add(testWait)
		for time.Now().Before(deadline) {
			if err := n.broker.reloadQuotas(); err != nil {
				t.Fatal(err)
			}
			if ok() {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return false
	}
	own := func() bool {
		for tenant, want := range map[wire.ID]float64{wire.DefaultTenant: 100, tenantA: 200} {
			if r, _, _ := n.broker.quotas.table.Load().resolve(tenant, quotaProducerByteRate, "alice", "x"); r != want {
				return false
			}
		}
		return n.broker.quotas.on.Load()
	}
	if !cached(own) {
		t.Fatal("the cache does not resolve each tenant to its own rate")
	}
	// Removed everywhere: the cache is off again, a request pays one load.
	for _, tenant := range []wire.ID{wire.DefaultTenant, tenantA} {
		if err := n.broker.alterQuota(ctx, tenant, alice, []kmsg.AlterClientQuotasRequestEntryOp{{Key: quotaProducerByteRate, Remove: true}}); err != nil {
			t.Fatal(err)
		}
	}
	if !cached(func() bool { return !n.broker.quotas.on.Load() }) {
		t.Fatal("every rate removed, yet the cache says one is set")
	}
}

// quotaThrottles counts the throttles a kgo client is answered.
type quotaThrottles struct{ n atomic.Int64 }

func (q *quotaThrottles) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		q.n.Add(1)
	}
}

// TestConsumerByteRateThrottles: a consumer whose client id has a low
// consumer_byte_rate is answered throttle_time_ms on Fetch, with no
// error, and still reads every record; a producer without a quota on
// the same node is not throttled.
func TestConsumerByteRateThrottles(t *testing.T) {
	n := startNode(t, nil)
	ctx := ctxFor(t)
	adm := kadm.NewClient(n.client())
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadmEntity("client-id", "slow-reader"),
		Ops: []kadm.AlterClientQuotaOp{{Key: quotaConsumerByteRate, Value: 10_000}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "quota-fetch"); err != nil {
		t.Fatal(err)
	}
	prodSeen := &quotaThrottles{}
	prod := n.client(kgo.DefaultProduceTopic("quota-fetch"), kgo.WithHooks(prodSeen), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const records = 30
	for i := 0; i < records; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: bytes.Repeat([]byte{byte(i)}, 1000)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	seen := &quotaThrottles{}
	cons := n.client(kgo.ClientID("slow-reader"), kgo.WithHooks(seen), kgo.ConsumeTopics("quota-fetch"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	// The node's cache holds the quota within a second: read until every
	// record is in and a throttle came back (re-reading from the start).
	for got < records || seen.n.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records, %d throttles", got, records, seen.n.Load())
		}
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil && ctx.Err() == nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
		if got >= records && seen.n.Load() == 0 {
			cons.SetOffsets(map[string]map[int32]kgo.EpochOffset{"quota-fetch": {0: {Epoch: -1, Offset: 0}}})
			got = 0
		}
	}
	if prodSeen.n.Load() != 0 {
		t.Fatalf("a producer without a quota was throttled %d times", prodSeen.n.Load())
	}
}

// BenchmarkQuotedNoQuota is what the quota wrapper adds to a produce when
// no byte rate is set: one atomic load.
func BenchmarkQuotedNoQuota(b *testing.B) {
	br := &Broker{quotas: newQuotaCache()}
	resp := kmsg.NewPtrProduceResponse()
	h := br.quoted(int16(kmsg.Produce), func(context.Context, *kafka.Conn, kmsg.Request) (kmsg.Response, error) { return resp, nil })
	req := kmsg.NewPtrProduceRequest()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = h(ctx, nil, req)
	}
}
