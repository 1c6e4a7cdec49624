package proxy

import (
	"testing"
	"time"

	"github.com/queen-mq/queen/http/api"
)

func TestSeededPlansMatchTheSpec(t *testing.T) {
	plans := seededPlans()
	if len(plans) != 4 {
		t.Fatalf("%d plans", len(plans))
	}
	dev := plans[1]
	if dev.Code != "dev" || *dev.Limits[LimitRequestsPerSec] != 10 || *dev.Limits[LimitRequestsBurst] != 50 ||
		*dev.Limits[LimitMaxPayloadBytes] != 512<<10 || *dev.Limits[LimitMaxRetainedBytes] != 3<<30 ||
		dev.Limits[LimitMonthlyMsgsQuota] != nil {
		t.Fatalf("dev plan %+v", dev)
	}
	for _, p := range plans {
		for _, name := range limitNames {
			if _, ok := p.Limits[name]; !ok {
				t.Errorf("plan %s has no %s", p.Code, name)
			}
		}
	}
}

func TestOverrides(t *testing.T) {
	ov, err := parseOverrides([]byte(`{"max_queues": 500, "max_retained_bytes": null}`))
	if err != nil {
		t.Fatal(err)
	}
	lim := effective(fallbackPlan("free"), ov)
	if *lim[LimitMaxQueues] != 500 || lim[LimitMaxRetainedBytes] != nil || *lim[LimitMaxPartitions] != 8 {
		t.Fatalf("effective limits %v", lim)
	}
	if ov, err := parseOverrides([]byte(`null`)); err != nil || len(ov) != 0 {
		t.Fatalf("a null body clears: %v %v", ov, err)
	}
	for _, bad := range []string{`{"max_queues": -1}`, `{"max_queues": 1.5}`, `{"nope": 1}`, `[1]`, `{"max_queues":"5"}`} {
		if _, err := parseOverrides([]byte(bad)); err == nil {
			t.Errorf("%s passes", bad)
		}
	}
}

func TestRateBuckets(t *testing.T) {
	var r rates
	lim := Limits{LimitRequestsPerSec: n(10), LimitRequestsBurst: n(5), LimitMessagesPerSec: n(100), LimitMessagesBurst: n(200)}
	now := time.Unix(1000, 0)
	for i := range 5 {
		if ok, _ := r.takeRequest("c", lim, now); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, wait := r.takeRequest("c", lim, now)
	if ok || wait <= 0 || wait > 100*time.Millisecond {
		t.Fatalf("over the burst: %v %v", ok, wait)
	}
	if ok, _ := r.takeRequest("other", lim, now); !ok {
		t.Fatal("buckets are shared between clusters")
	}
	if ok, _ := r.takeRequest("c", lim, now.Add(100*time.Millisecond)); !ok {
		t.Fatal("the bucket did not refill")
	}
	// A push larger than the message burst empties the bucket instead of
	// waiting forever; a refused charge takes nothing.
	if ok, _ := r.takeMessages("m", lim, 1000, now); !ok {
		t.Fatal("a push over the burst is never admitted")
	}
	if ok, _ := r.takeMessages("m", lim, 1, now); ok {
		t.Fatal("the message bucket was not emptied")
	}
	if ok, _ := r.takeMessages("m", lim, 1, now.Add(10*time.Millisecond)); !ok {
		t.Fatal("a refused charge took tokens")
	}
	if ok, _ := r.takeMessages("m", Limits{}, 1, now); !ok {
		t.Fatal("no limits refused")
	}
}

func TestPushSizeCaps(t *testing.T) {
	items := []api.PushItem{{Queue: "q", PayloadBytes: 102}, {Queue: "q", PayloadBytes: 7}}
	if err := checkPush(items, Limits{LimitMaxPayloadBytes: n(100)}); err == nil {
		t.Fatal("a 102-byte payload passed a 100-byte cap")
	}
	if err := checkPush(items, Limits{LimitMaxItemsPerPush: n(1)}); err == nil {
		t.Fatal("two items passed a one-item cap")
	}
	if err := checkPush(items, Limits{LimitMaxPayloadBytes: n(102), LimitMaxItemsPerPush: n(2)}); err != nil {
		t.Fatal(err)
	}
	if err := checkPush(items, Limits{}); err != nil {
		t.Fatal(err)
	}
}
