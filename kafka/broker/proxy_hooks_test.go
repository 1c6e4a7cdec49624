package broker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// fakePolicy is a plan the test sets by hand.
type fakePolicy struct {
	mu       sync.Mutex
	gate     ProduceGate
	maxParts int
	throttle time.Duration
	refuse   int16
	parkFull bool
	usage    []Usage
	quotas   map[string]float64
}

func (f *fakePolicy) Quotas() map[string]float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.quotas
}

func (f *fakePolicy) Before(context.Context, int16) int16 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refuse
}

func (f *fakePolicy) Produce() ProduceGate {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gate
}

func (f *fakePolicy) Create(asks []CreateAsk) {
	for i := range asks {
		if asks[i].Partitions > f.maxParts {
			asks[i].Err = &PolicyError{Code: kerr.InvalidPartitions.Code, Msg: "partition_limit"}
		}
	}
}

func (f *fakePolicy) After(u Usage) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usage = append(f.usage, u)
	return f.throttle
}

func (f *fakePolicy) Park() (func(), bool, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.parkFull {
		return nil, false, 400 * time.Millisecond
	}
	return nil, true, 0
}

func (f *fakePolicy) set(fn func(*fakePolicy)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// TestPolicyHoldsALogin: a login with a Policy has its produce gated
// (refused whole, records over the cap, batches over the count), its
// creates checked, its answers throttled, every request reported to
// After, and a login without one is untouched.
func TestPolicyHoldsALogin(t *testing.T) {
	pol := &fakePolicy{maxParts: 4}
	n := startNode(t, func(c *Config) {
		c.DefaultPartitions = 1
		c.Listener.Authenticate = func(_ context.Context, user, _ string) (kafka.Principal, error) {
			id := Identity{Tenant: wire.DefaultTenant}
			if user == "planned" {
				id.Policy = pol
			}
			return kafka.Principal{User: user, Identity: id}, nil
		}
	})
	ctx := ctxFor(t)
	as := func(user string, opts ...kgo.Opt) *kgo.Client {
		return n.client(append([]kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: "x"}.AsMechanism()), kgo.RecordRetries(1),
			kgo.ProducerBatchMaxBytes(1 << 20)}, opts...)...)
	}
	cl := as("planned")
	adm := kadm.NewClient(cl)
	res, err := adm.CreateTopics(ctx, 8, 1, nil, "wide")
	if err != nil || !errors.Is(res["wide"].Err, kerr.InvalidPartitions) {
		t.Fatalf("a topic over the plan's partitions: %v %v", err, res["wide"].Err)
	}
	if res, err = adm.CreateTopics(ctx, 4, 1, nil, "t"); err != nil || res["t"].Err != nil {
		t.Fatalf("a topic within the plan: %v %v", err, res["t"].Err)
	}
	topics, err := adm.ListTopics(ctx, "t") // before the refusals below: the client keeps metadata answers a while
	if err != nil {
		t.Fatal(err)
	}
	grown, err := adm.CreatePartitions(ctx, 1, "t")
	if err != nil || !errors.Is(grown["t"].Err, kerr.InvalidPartitions) {
		t.Fatalf("growing past the plan: %v %v", err, grown["t"].Err)
	}

	pol.set(func(f *fakePolicy) { f.gate = ProduceGate{MaxRecordBytes: 100, MaxBatchRecords: 3} })
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte(strings.Repeat("v", 200))}).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("a record over the cap: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("small")}).FirstErr(); err != nil {
		t.Fatalf("a record within the cap: %v", err)
	}
	ends, err := adm.ListEndOffsets(ctx, "t") // nothing more is appended before the fetches below
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("t", 0)
	// Four records to one partition make one batch over the count.
	four := make([]*kgo.Record, 4)
	for i := range four {
		four[i] = &kgo.Record{Topic: "t", Partition: 0, Value: []byte("r")}
	}
	manual := as("planned", kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Second))
	if err := manual.ProduceSync(ctx, four...).FirstErr(); !errors.Is(err, kerr.RecordListTooLarge) {
		t.Fatalf("a batch over the count: %v", err)
	}
	pol.set(func(f *fakePolicy) {
		f.gate = ProduceGate{Refuse: &PolicyError{Code: kerr.TopicAuthorizationFailed.Code, Msg: "push_blocked"}}
	})
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("pushes blocked: %v", err)
	}
	pol.set(func(f *fakePolicy) { f.gate = ProduceGate{}; f.throttle = 300 * time.Millisecond })
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil || resp.ThrottleMillis < 300 {
		t.Fatalf("a throttled answer: %v %+v", err, resp)
	}
	pol.set(func(f *fakePolicy) { f.throttle = 0; f.refuse = kerr.TopicAuthorizationFailed.Code })
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
	if resp, err := md.RequestWith(ctx, cl); err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("a refused login's request: %v %+v", err, resp)
	}
	pol.set(func(f *fakePolicy) { f.refuse = 0 })

	// No parked slot: a fetch that would wait for records is answered at
	// once, throttled.
	fetch := func() (*kmsg.FetchResponse, time.Duration) {
		f := kmsg.NewPtrFetchRequest()
		f.MaxWaitMillis, f.MinBytes, f.MaxBytes = 3000, 1<<20, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = "t", topics["t"].ID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, end.Offset, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
		f.Topics = append(f.Topics, ft)
		start := time.Now()
		resp, err := f.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp, time.Since(start)
	}
	pol.set(func(f *fakePolicy) { f.parkFull = true })
	if resp, took := fetch(); took > 2*time.Second || resp.ThrottleMillis < 400 {
		t.Fatalf("a fetch without a parked slot: %v, throttle %d ms", took, resp.ThrottleMillis)
	}
	pol.set(func(f *fakePolicy) { f.parkFull = false })
	if resp, took := fetch(); took < 2*time.Second {
		t.Fatalf("a fetch with a slot did not wait for records: %v %+v", took, resp)
	}

	var produced, fetched int
	pol.mu.Lock()
	for _, u := range pol.usage {
		if u.Class == UsageProduce && !u.Refused {
			produced += u.Records
		}
	}
	pol.mu.Unlock()
	if produced != 1 {
		t.Fatalf("the accepted records reported: %d, want 1", produced)
	}
	cons := as("planned", kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	consume(t, cons, 1)
	pol.mu.Lock()
	for _, u := range pol.usage {
		if u.Class == UsageFetch {
			fetched += u.Records
		}
	}
	pol.mu.Unlock()
	if fetched < 1 {
		t.Fatal("a fetch was not reported with its records")
	}

	// Another login: no policy, nothing asked.
	cons.Close()
	cl.Close()
	manual.Close()
	pol.set(func(f *fakePolicy) { f.usage = nil; f.gate = ProduceGate{MaxRecordBytes: 1} })
	other := as("other")
	if err := other.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte(strings.Repeat("v", 200))}).FirstErr(); err != nil {
		t.Fatalf("a login without a plan: %v", err)
	}
	pol.mu.Lock()
	defer pol.mu.Unlock()
	if len(pol.usage) != 0 {
		t.Fatalf("another login's requests reached the policy: %+v", pol.usage)
	}
}
