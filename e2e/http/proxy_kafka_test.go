package http

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// throttleHook counts the answers a broker sent with a throttle.
type throttleHook struct{ n atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// TestProxyKafkaDoorKeepsThePlan: the seed-004 walkthrough cluster (acme,
// bootstrapped with its key) on the free plan with QUEEN_PROXY_ENFORCE=true,
// logged in over Kafka with its API key (issue 33 item 1): every free-plan
// limit is refused with Kafka's answer (INVALID_PARTITIONS past 8
// partitions, POLICY_VIOLATION for the 21st topic, MESSAGE_TOO_LARGE past
// 256 KiB, RECORD_LIST_TOO_LARGE past 1,000 records a batch,
// TOPIC_AUTHORIZATION_FAILED while push_blocked and over
// max_retained_bytes), past the request rate answers carry
// throttle_time_ms and no error, and a Kafka produce shows in /usage.
func TestProxyKafkaDoorKeepsThePlan(t *testing.T) {
	key, _ := newAPIKey(t)
	const token = "cp-token-kafka-door"
	c, base := proxyNode(t, key, token, map[string]string{"QUEEN_PROXY_ENFORCE": "true", "QUEEN_PROXY_BOOTSTRAP_PLAN": "free",
		"QUEEN_KAFKA_SASL": "plain"})
	ctx := e2etest.Deadline(t, 4*time.Minute)
	var acme struct {
		Cluster struct {
			ID string `json:"id"`
		} `json:"cluster"`
	}
	if code := cp(t, ctx, base, token, "GET", "/api/cp/clusters/acme", "", &acme); code != http.StatusOK {
		t.Fatalf("cluster acme: %d", code)
	}
	login := kgo.SASL(plain.Auth{User: "acme", Pass: key}.AsMechanism())
	adm := kadm.NewClient(e2etest.KgoClient(t, c, login))

	// Partition cap: 8 per queue.
	res, err := adm.CreateTopics(ctx, 5000, 1, nil, "wide")
	if err != nil {
		t.Fatal(err)
	}
	if r := res["wide"]; !errors.Is(r.Err, kerr.InvalidPartitions) {
		t.Fatalf("a 5,000-partition topic: %v %q", r.Err, r.ErrMessage)
	}
	if res, err = adm.CreateTopics(ctx, 8, 1, nil, "t00"); err != nil || res["t00"].Err != nil {
		t.Fatalf("an 8-partition topic: %v %v", err, res["t00"].Err)
	}
	grown, err := adm.CreatePartitions(ctx, 1, "t00")
	if err != nil {
		t.Fatal(err)
	}
	if r := grown["t00"]; !errors.Is(r.Err, kerr.InvalidPartitions) {
		t.Fatalf("growing to 9 partitions: %v", r.Err)
	}

	// Queue cap: 20. One topic a request, as a client creating them one
	// by one, quickly.
	for i := 1; i < 26; i++ {
		name := fmt.Sprintf("t%02d", i)
		res, err := adm.CreateTopics(ctx, 1, 1, nil, name)
		if err != nil {
			t.Fatal(err)
		}
		switch r := res[name]; {
		case i < 20 && r.Err != nil:
			t.Fatalf("topic %d of 20: %v", i+1, r.Err)
		case i >= 20 && !errors.Is(r.Err, kerr.PolicyViolation):
			t.Fatalf("topic %d: %v, want POLICY_VIOLATION", i+1, r.Err)
		}
	}
	// Automatic creation meets the same cap.
	auto := e2etest.KgoClient(t, c, login, kgo.AllowAutoTopicCreation(), kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(20*time.Second))
	if err := auto.ProduceSync(ctx, &kgo.Record{Topic: "auto-21", Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("a produce created a 21st topic")
	}
	// HTTP says the same of a 21st queue (once the cluster's request
	// bucket, which the Kafka requests drew on too, lets it through).
	var code int
	var body string
	if err := harness.Poll(ctx, 500*time.Millisecond, func() (bool, error) {
		code, _, body = proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/configure", bearer: key, body: `{"queue":"http-21"}`})
		return code != http.StatusTooManyRequests, nil
	}); err != nil {
		t.Fatal("HTTP stayed rate limited")
	}
	if code != http.StatusForbidden || !strings.Contains(body, "queue_limit") {
		t.Fatalf("a 21st queue over HTTP: %d %s", code, body)
	}

	// Payload cap: 256 KiB.
	prod := e2etest.KgoClient(t, c, login, kgo.DefaultProduceTopic("t01"), kgo.RecordRetries(2),
		kgo.ProducerBatchMaxBytes(2<<20), kgo.RecordDeliveryTimeout(30*time.Second))
	if err := prod.ProduceSync(ctx, kgo.SliceRecord(make([]byte, 900_000))).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("a 900 KB record: %v", err)
	}
	if err := prod.ProduceSync(ctx, kgo.SliceRecord(make([]byte, 1000))).FirstErr(); err != nil {
		t.Fatalf("a 1 KB record: %v", err)
	}
	// Items per push: 1,000. One batch of 1,001 records to one partition.
	batcher := e2etest.KgoClient(t, c, login, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Second),
		kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(30*time.Second))
	many := make([]*kgo.Record, 1001)
	for i := range many {
		many[i] = &kgo.Record{Topic: "t01", Partition: 0, Value: []byte("r")}
	}
	if err := batcher.ProduceSync(ctx, many...).FirstErr(); !errors.Is(err, kerr.RecordListTooLarge) {
		t.Fatalf("a batch of 1,001 records: %v", err)
	}

	// Request rate: 5/s, burst 25. Past the burst the answers carry a
	// throttle the client waits out; no request fails.
	hook := &throttleHook{}
	rated := e2etest.KgoClient(t, c, login, kgo.DefaultProduceTopic("t02"), kgo.WithHooks(hook), kgo.RecordDeliveryTimeout(time.Minute))
	start := time.Now()
	const sends = 60
	for i := range sends {
		if err := rated.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatalf("produce %d under the rate: %v", i, err)
		}
	}
	took := time.Since(start)
	t.Logf("%d produce requests took %v, %d answers throttled", sends, took, hook.n.Load())
	if hook.n.Load() == 0 || took < 4*time.Second {
		t.Fatalf("%d produce requests in %v with %d throttled answers: the free plan's 5 requests/s was not applied", sends, took, hook.n.Load())
	}

	// Metering: the Kafka produce shows in the cluster's usage as push.
	var usage struct {
		Minutes []struct {
			Op   string `json:"op"`
			Msgs int    `json:"msgs"`
			Reqs int    `json:"reqs"`
		} `json:"minutes"`
	}
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		cp(t, ctx, base, token, "GET", "/api/cp/clusters/"+acme.Cluster.ID+"/usage", "", &usage)
		msgs := 0
		for _, m := range usage.Minutes {
			if m.Op == "push" {
				msgs += m.Msgs
			}
		}
		return msgs >= sends+1, nil
	}); err != nil {
		t.Fatalf("the Kafka produces are not in /usage: %+v", usage)
	}

	// push_blocked: produce refused, fetch open.
	if code := cp(t, ctx, base, token, "PUT", "/api/cp/clusters/"+acme.Cluster.ID+"/status", `{"status":"push_blocked"}`, nil); code != http.StatusOK {
		t.Fatalf("push_blocked: %d", code)
	}
	blocked := e2etest.KgoClient(t, c, login, kgo.DefaultProduceTopic("t01"), kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(10*time.Second))
	waitRefused(ctx, t, blocked, "push_blocked")
	cons := e2etest.KgoClient(t, c, login, kgo.ConsumeTopics("t01"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	e2etest.ConsumeN(ctx, t, cons, 1)
	if code := cp(t, ctx, base, token, "PUT", "/api/cp/clusters/"+acme.Cluster.ID+"/status", `{"status":"active"}`, nil); code != http.StatusOK {
		t.Fatalf("active: %d", code)
	}
	if err := harness.Poll(ctx, 200*time.Millisecond, func() (bool, error) {
		return blocked.ProduceSync(ctx, kgo.StringRecord("again")).FirstErr() == nil, nil
	}); err != nil {
		t.Fatal("the cluster active again still refuses Kafka produces")
	}

	// max_retained_bytes: over it, produce refused.
	if code := cp(t, ctx, base, token, "PUT", "/api/cp/clusters/"+acme.Cluster.ID+"/overrides", `{"max_retained_bytes": 1}`, nil); code != http.StatusOK {
		t.Fatalf("overrides: %d", code)
	}
	waitRefused(ctx, t, blocked, "storage_quota_exceeded")
	code, _, body = proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", bearer: key, body: pushBody("t01", `1`)})
	if code != http.StatusForbidden || !strings.Contains(body, "storage_quota_exceeded") {
		t.Fatalf("HTTP over the storage quota: %d %s", code, body)
	}
}

// waitRefused produces until the answer is TOPIC_AUTHORIZATION_FAILED
// (the proxy's view of a status or quota moves within seconds).
func waitRefused(ctx context.Context, t *testing.T, cl *kgo.Client, why string) {
	t.Helper()
	var last error
	if err := harness.Poll(ctx, 200*time.Millisecond, func() (bool, error) {
		last = cl.ProduceSync(ctx, kgo.StringRecord("blocked?")).FirstErr()
		return errors.Is(last, kerr.TopicAuthorizationFailed), nil
	}); err != nil {
		t.Fatalf("%s: Kafka still produces (%v)", why, last)
	}
}
