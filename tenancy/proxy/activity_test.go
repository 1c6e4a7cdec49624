package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

func TestActivityRoute(t *testing.T) {
	p, _ := testProxy(t, Config{CPToken: "tok"})
	p.broker = api.New(api.Config{}, p.engine, raftgroupstest.Quiet).Handler()
	ctx := context.Background()
	tn, _, _ := p.store.ensureTenant(ctx, "acme", "")
	c, _, _ := p.store.ensureCluster(ctx, tn, "acme", "dev", nil)
	tenant, _ := p.tenantOf(c)
	if code, out := p.brokerCall("POST", "/api/v1/push", tenant, []byte(`{"items":[{"queue":"q","payload":"0123456789"}]}`)); code != 201 {
		t.Fatalf("push: %d %s", code, out)
	}
	t0 := time.Date(2026, 10, 2, 13, 0, 0, 0, time.UTC)
	// Two writers (two nodes): the earliest first push, the latest uses.
	other := activity{store: p.store, writer: "n2-x"}
	p.activity.writer = "n1-y"
	p.activity.touch(c.ID, true, true, t0)
	p.activity.touch(c.ID, false, false, t0.Add(time.Hour))
	other.touch(c.ID, true, false, t0.Add(-time.Minute))
	other.touch(c.ID, false, true, t0.Add(30*time.Minute))
	for _, a := range []*activity{&p.activity, &other} {
		if err := a.flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	body := `{"slugs":["acme","nope"]}`
	code, out := call(p, "POST", "/api/cp/activity", "tok", strings.NewReader(body), len(body))
	var got struct {
		Clusters []struct {
			Slug          string  `json:"slug"`
			Found         bool    `json:"found"`
			LastTraffic   *string `json:"last_traffic"`
			FirstPush     *string `json:"first_push"`
			LastKeyUse    *string `json:"last_key_use"`
			RetainedBytes uint64  `json:"retained_bytes"`
		} `json:"clusters"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(out), &got) != nil || len(got.Clusters) != 2 {
		t.Fatalf("activity: %d %s", code, out)
	}
	a := got.Clusters[0]
	if !a.Found || *a.LastTraffic != "2026-10-02T14:00:00Z" || *a.FirstPush != "2026-10-02T12:59:00Z" ||
		*a.LastKeyUse != "2026-10-02T13:30:00Z" || a.RetainedBytes == 0 {
		t.Fatalf("acme's activity %+v (%s)", a, out)
	}
	if got.Clusters[1].Found {
		t.Fatalf("an unknown slug: %+v", got.Clusters[1])
	}
	big := `{"slugs":[` + strings.Repeat(`"a",`, 256) + `"a"]}`
	if code, _ := call(p, "POST", "/api/cp/activity", "tok", strings.NewReader(big), len(big)); code != http.StatusBadRequest {
		t.Fatalf("257 slugs: %d", code)
	}
}
