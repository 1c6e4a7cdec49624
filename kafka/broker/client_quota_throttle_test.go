package broker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// TestMutationBucket is KIP-599's token bucket: it holds 10 s of quota;
// strict, a charge is taken while the bucket is not in debt (into debt if
// need be) and refused once it is, with the time until it is not;
// permissive, every charge is taken and throttled by its debt.
func TestMutationBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	const rate = 2.0 // partitions/s: 20 in the bucket
	var bk quotaBucket
	if d, refused := bk.mutate(now, rate, 15, true); refused || d != 0 {
		t.Fatalf("15 of 20: %v %v", d, refused)
	}
	if d, refused := bk.mutate(now, rate, 10, true); refused || d != 0 {
		t.Fatalf("10 more with 5 left is taken into debt, unthrottled: %v %v", d, refused)
	}
	d, refused := bk.mutate(now, rate, 1, true)
	if !refused || d != 2500*time.Millisecond {
		t.Fatalf("in debt by 5 at 2/s: %v %v, want refused for 2.5s", d, refused)
	}
	// The refusal took nothing: 2.5 s on the bucket is at zero again.
	if d, refused := bk.mutate(now.Add(2500*time.Millisecond), rate, 1, true); refused || d != 0 {
		t.Fatalf("back at zero: %v %v", d, refused)
	}
	var old quotaBucket
	old.mutate(now, rate, 20, false)
	if d, refused := old.mutate(now, rate, 4, false); refused || d != 2*time.Second {
		t.Fatalf("permissive, 4 over at 2/s: %v %v, want 2s throttled", d, refused)
	}
	if got := time.Duration(old.mutedUntil.Load() - now.UnixNano()); got != 2*time.Second {
		t.Fatalf("permissive mute %v", got)
	}
}

// TestRequestSeconds: request_percentage is charged the handler's time
// less its long poll.
func TestRequestSeconds(t *testing.T) {
	start := time.Unix(1000, 0)
	if s := requestSeconds(start, start.Add(600*time.Millisecond), 500*time.Millisecond); s < 0.0999 || s > 0.1001 {
		t.Fatalf("600ms with 500ms parked: %v s", s)
	}
	if s := requestSeconds(start, start.Add(time.Millisecond), time.Second); s != 0 {
		t.Fatalf("never negative: %v", s)
	}
}

// setQuota sets one quota on a client id through kadm and loads it into
// the node's cache.
func setQuota(t *testing.T, n *testNode, client, key string, v float64) {
	t.Helper()
	res, err := kadm.NewClient(n.client()).AlterClientQuotas(ctxFor(t), []kadm.AlterClientQuotaEntry{{
		Entity: kadmEntity("client-id", client), Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: v}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	if err := n.broker.reloadQuotas(); err != nil {
		t.Fatal(err)
	}
}

// TestRequestPercentageThrottles: a client id with a tiny
// request_percentage is answered throttle_time_ms (no error) once its
// handler time passes the quota, and its next request waits the throttle
// out; another client id on the node is not throttled. A fetch parked in
// its long poll is not charged for the wait.
func TestRequestPercentageThrottles(t *testing.T) {
	n := startNode(t, nil)
	ctx := ctxFor(t)
	// 0.01% of a handler: 100µs per second, a bucket of 100µs.
	setQuota(t, n, "busy", quotaRequestPercentage, 0.01)
	busy := n.client(kgo.ClientID("busy"))
	var throttled int32
	for i := 0; i < 50 && throttled == 0; i++ {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, busy)
		if err != nil {
			t.Fatal(err)
		}
		throttled = resp.ThrottleMillis
	}
	if throttled <= 0 {
		t.Fatal("50 metadata requests at 0.01% of a handler: never throttled")
	}
	start := time.Now()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, busy); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < time.Duration(throttled)*time.Millisecond/2 {
		t.Fatalf("throttled %d ms, yet the next request took %v: not held", throttled, took)
	}
	other := n.client(kgo.ClientID("calm"))
	for range 20 {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, other)
		if err != nil || resp.ThrottleMillis != 0 {
			t.Fatalf("a client id without a quota: %v throttle %d", err, resp.ThrottleMillis)
		}
	}

	// A long poll: 300ms parked, 10% of a handler (a 100ms bucket) is
	// not spent by it.
	setQuota(t, n, "poller", quotaRequestPercentage, 10)
	if _, err := kadm.NewClient(n.client()).CreateTopics(ctx, 1, 1, nil, "rp-poll"); err != nil {
		t.Fatal(err)
	}
	poller := n.client(kgo.ClientID("poller"))
	topics, err := kadm.NewClient(poller).ListTopics(ctx, "rp-poll")
	if err != nil {
		t.Fatal(err)
	}
	f := kmsg.NewPtrFetchRequest()
	f.MaxWaitMillis, f.MinBytes, f.MaxBytes = 300, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "rp-poll", topics["rp-poll"].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	for range 3 {
		start := time.Now()
		resp, err := f.RequestWith(ctx, poller)
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(start) < 250*time.Millisecond {
			t.Fatalf("the fetch did not wait: %v", time.Since(start))
		}
		if resp.ThrottleMillis != 0 {
			t.Fatalf("a fetch parked 300ms charged for its wait: throttled %d ms", resp.ThrottleMillis)
		}
	}
}

// TestControllerMutationRate: a client id at 1 partition/s (a bucket of
// 10) creates 12 partitions unthrottled (into debt: KIP-599's strict
// quota lets the request that empties the bucket pass); its next
// CreateTopics is refused per topic with THROTTLING_QUOTA_EXCEEDED and
// throttle_time_ms; an older CreateTopics is served and throttled
// instead. CreatePartitions (partitions added) and DeleteTopics (the
// topic's partitions) are charged and refused alike; another client id is
// not limited.
func TestControllerMutationRate(t *testing.T) {
	n := startNode(t, nil)
	ctx := ctxFor(t)
	for _, id := range []string{"mut", "mut-grow", "mut-del"} {
		setQuota(t, n, id, quotaControllerMutationRate, 1)
	}
	intoDebt := func(id, topic string) *kadm.Client {
		t.Helper()
		adm := kadm.NewClient(n.client(kgo.ClientID(id)))
		res, err := adm.CreateTopics(ctx, 12, 1, nil, topic)
		if err != nil || res[topic].Err != nil {
			t.Fatalf("%s: 12 partitions with 10 in the bucket: %v %v", id, err, res[topic].Err)
		}
		return adm
	}
	cl := n.client(kgo.ClientID("mut"))
	intoDebt("mut", "m1")
	create := kmsg.NewPtrCreateTopicsRequest()
	for _, name := range []string{"m2", "m3"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		create.Topics = append(create.Topics, rt)
	}
	create.TimeoutMillis = 10_000
	resp, err := create.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version < 6 || resp.ThrottleMillis < 1000 {
		t.Fatalf("v%d in debt by 2 at 1/s: throttle %d ms, want about 2000", resp.Version, resp.ThrottleMillis)
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
			t.Fatalf("topic %s: code %d, want THROTTLING_QUOTA_EXCEEDED", rt.Topic, rt.ErrorCode)
		}
	}
	// CreateTopics v5 knows no THROTTLING_QUOTA_EXCEEDED: served (after
	// the mute above, at zero), into debt, throttled.
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.CreateTopics), 5)
	old := n.client(kgo.ClientID("mut"), kgo.MaxVersions(v))
	oldResp, err := create.RequestWith(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if oldResp.Version != 5 || oldResp.ThrottleMillis <= 0 {
		t.Fatalf("v%d in debt: throttle %d ms, want served and throttled", oldResp.Version, oldResp.ThrottleMillis)
	}
	for _, rt := range oldResp.Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("v5 topic %s: code %d, want created", rt.Topic, rt.ErrorCode)
		}
	}

	grow, err := intoDebt("mut-grow", "g1").CreatePartitions(ctx, 1, "g1")
	if err != nil || !errors.Is(grow["g1"].Err, kerr.ThrottlingQuotaExceeded) {
		t.Fatalf("CreatePartitions in debt: %v %v", err, grow["g1"].Err)
	}
	del, err := intoDebt("mut-del", "d1").DeleteTopics(ctx, "d1")
	if err != nil || !errors.Is(del["d1"].Err, kerr.ThrottlingQuotaExceeded) {
		t.Fatalf("DeleteTopics in debt: %v %v", err, del["d1"].Err)
	}
	if topics, err := kadm.NewClient(n.client()).ListTopics(ctx, "d1", "g1"); err != nil || len(topics["g1"].Partitions) != 12 || !topics.Has("d1") {
		t.Fatalf("a refused mutation changed the topics: %v %+v", err, topics)
	}
	free := kadm.NewClient(n.client(kgo.ClientID("free")))
	if res, err := free.CreateTopics(ctx, 20, 1, nil, "f1"); err != nil || res["f1"].Err != nil {
		t.Fatalf("another client id: %v %v", err, res["f1"].Err)
	}
}

// TestPlanQuotasAreClientQuotas: a login held to a plan sees the plan's
// limits as its user entity's client quotas, may not alter them, and the
// plan's throttle takes the client quotas' path: the answer carries it
// and the login's next request waits it out.
func TestPlanQuotasAreClientQuotas(t *testing.T) {
	pol := &fakePolicy{maxParts: 100, quotas: map[string]float64{"requests_per_sec": 5, "requests_burst": 25}}
	n := startNode(t, func(c *Config) {
		c.Listener.Authenticate = func(_ context.Context, user, _ string) (kafka.Principal, error) {
			id := Identity{Tenant: wire.DefaultTenant}
			if user == "acme" {
				id.Policy = pol
			}
			return kafka.Principal{User: user, Identity: id}, nil
		}
	})
	ctx := ctxFor(t)
	as := func(user string) *kgo.Client {
		return n.client(kgo.SASL(plain.Auth{User: user, Pass: "x"}.AsMechanism()))
	}
	cl := as("acme")
	adm := kadm.NewClient(cl)
	if res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadmEntity("user", "acme"),
		Ops: []kadm.AlterClientQuotaOp{{Key: quotaProducerByteRate, Value: 1 << 20}}}}); err != nil || res[0].Err != nil {
		t.Fatalf("a Kafka quota on the plan's user: %v %+v", err, res)
	}
	qs, err := adm.DescribeClientQuotas(ctx, false, nil)
	want := "{user=acme}:producer_byte_rate=1048576.000000,requests_burst=25.000000,requests_per_sec=5.000000"
	if got := described(qs); err != nil || len(got) != 1 || got[0] != want {
		t.Fatalf("describe: %v %q, want %q", err, got, want)
	}
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadmEntity("user", "acme"),
		Ops: []kadm.AlterClientQuotaOp{{Key: "requests_per_sec", Value: 500}}}})
	if err != nil || !errors.Is(res[0].Err, kerr.InvalidRequest) || res[0].ErrMessage == "" {
		t.Fatalf("altering the plan's quota: %v %+v, want INVALID_REQUEST", err, res)
	}
	// Another login: no plan entity.
	if qs, err := kadm.NewClient(as("other")).DescribeClientQuotas(ctx, false, nil); err != nil || len(qs) != 1 || len(qs[0].Values) != 1 {
		t.Fatalf("another login sees the plan: %v %q", err, described(qs))
	}

	pol.set(func(f *fakePolicy) { f.throttle = 400 * time.Millisecond })
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil || resp.ThrottleMillis < 400 {
		t.Fatalf("the plan's throttle: %v %+v", err, resp)
	}
	pol.set(func(f *fakePolicy) { f.throttle = 0 })
	start := time.Now()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Fatalf("the request after a 400ms plan throttle took %v: the login was not held", took)
	}
}

// TestProduceAdmission: a produce is charged as it is admitted, so
// produces pipelined on one connection (whose handlers run concurrently)
// each wait for the debt of those before them, and each is answered the
// end of its own debt.
func TestProduceAdmission(t *testing.T) {
	var bk quotaBucket
	now := time.Unix(1000, 0)
	const rate = 1000.0
	wait, end := bk.admit(now, rate, 1500)
	if wait > now.UnixNano() || !end.Equal(now.Add(500*time.Millisecond)) {
		t.Fatalf("first: wait until %v, debt ends %v", time.Duration(wait-now.UnixNano()), end.Sub(now))
	}
	wait, end = bk.admit(now, rate, 500)
	if wait != now.Add(500*time.Millisecond).UnixNano() || !end.Equal(now.Add(time.Second)) {
		t.Fatalf("pipelined: waits %v, debt ends %v; want 500ms and 1s", time.Duration(wait-now.UnixNano()), end.Sub(now))
	}
	if _, end := bk.admit(now.Add(2*time.Second), rate, 100); !end.IsZero() {
		t.Fatalf("within the refilled bucket: debt ends %v", end)
	}
}

// throttleLog records each throttle a kgo client is answered.
type throttleLog struct {
	mu sync.Mutex
	ds []time.Duration
}

func (l *throttleLog) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ds = append(l.ds, d)
}

// TestPipelinedProducesHoldTheRate: a producer pipelining five produce
// requests of 16 KB on one connection at 50 KB/s is held to the rate, and
// each answer's throttle is its own request's share (about 0.3 s), not
// the debt of those pipelined with it, nor a produce charged twice.
func TestPipelinedProducesHoldTheRate(t *testing.T) {
	n := startNode(t, nil)
	ctx := ctxFor(t)
	const rate = 50_000
	setQuota(t, n, "piped", quotaProducerByteRate, rate)
	if _, err := kadm.NewClient(n.client()).CreateTopics(ctx, 1, 1, nil, "piped"); err != nil {
		t.Fatal(err)
	}
	seen := &throttleLog{}
	cl := n.client(kgo.ClientID("piped"), kgo.WithHooks(seen), kgo.DefaultProduceTopic("piped"), kgo.DisableIdempotentWrite(),
		kgo.MaxProduceRequestsInflightPerBroker(5), kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const records = 300
	value := make([]byte, 1000)
	var wg sync.WaitGroup
	start := time.Now()
	for range records {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	seen.mu.Lock()
	defer seen.mu.Unlock()
	// About 300 KB as sent, a second of it in the bucket: 5 s at the
	// rate, less the last answers' throttles the client has not waited.
	if took < 3500*time.Millisecond {
		t.Fatalf("%d records of 1 KB at %d B/s in %v: the rate did not hold", records, rate, took)
	}
	if len(seen.ds) == 0 {
		t.Fatal("never throttled")
	}
	for _, d := range seen.ds {
		if d > 700*time.Millisecond {
			t.Fatalf("a 16 KB produce at %d B/s throttled %v (all: %v)", rate, d, seen.ds)
		}
	}
}
