package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// Commands placed in different raft groups commit independently: an item
// whose group could not commit its command is answered status "error"
// with the reason, the others as queued (spec §2.4 allows per-item
// failure).
func TestPushAnswersAnItemItsGroupDidNotCommitAsError(t *testing.T) {
	items := []pushItem{{Queue: "q", Partition: "a"}, {Queue: "q", Partition: "b"}, {Queue: "q", Partition: "a"}}
	placed := []itemPlace{{cmd: 0, rec: 0}, {cmd: 1, rec: 0}, {cmd: 0, rec: 1}}
	ids := []wire.ID{{1}, {2}, {3}}
	results := []raftgroups.PushOutcome{
		{PushResult: wire.PushResult{Code: wire.CodeOK, BaseOffset: 7}},
		{Err: errors.New("group 2 has no leader")},
	}
	out := pushAnswers(items, placed, ids, results)
	if out[0].Status != "queued" || *out[0].Offset != 7 || out[2].Status != "queued" || *out[2].Offset != 8 {
		t.Fatalf("committed items: %+v %+v", out[0], out[2])
	}
	if out[1].Status != "error" || out[1].Error != "group 2 has no leader" || out[1].Offset != nil || out[1].MessageID != "" {
		t.Fatalf("item of the failed group: %+v", out[1])
	}
}

// pushBody is a push of n one-byte items to queue q.
func pushBody(n int) string {
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"queue":"q","payload":1}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// TestPushItemsAreCapped: a push of 600k items grew a node by 1.3 GB.
// One push holds at most 10,000 items by default; more is a 400 that
// decodes no more than the cap and stores nothing.
func TestPushItemsAreCapped(t *testing.T) {
	n := startNodeConfig(t, nil, func(c *Config) { c.MaxBodyBytes = 8 << 20 })
	body := pushBody(100000)
	before := totalAlloc()
	code, ans := call(t, "POST", n.url+"/api/v1/push", "", body)
	grew := totalAlloc() - before
	if code != http.StatusBadRequest || !strings.Contains(ans, `"code":"bad_request"`) {
		t.Fatalf("a push of 100,000 items: %d (allocated %d MiB) %.100s", code, grew>>20, ans)
	}
	// The body itself (2.5 MB) is read; the items past the cap are not
	// decoded, planned or proposed.
	if grew > 24<<20 {
		t.Fatalf("refusing a push of 100,000 items allocated %d MiB", grew>>20)
	}
	if code, ans := call(t, "GET", n.url+"/api/v1/resources/queues/q", "", ""); code != http.StatusNotFound {
		t.Fatalf("the refused push created its queue: %d %s", code, ans)
	}
	if code, ans := call(t, "POST", n.url+"/api/v1/push", "", pushBody(10000)); code != http.StatusCreated {
		t.Fatalf("a push of 10,000 items: %d %.200s", code, ans)
	}
}

func TestReadPushItems(t *testing.T) {
	for body, want := range map[string]int{
		`{"items":[{"queue":"q","payload":{"a":[1,2]}},{"queue":"r"}]}`: 2,
		`{"other":{"items":[1]},"items":[{"queue":"q"}],"more":[1,2]}`:  1,
		`{"items":null}`: 0,
		`{}`:             0,
		` {"items":[]} `: 0,
	} {
		items, err := readPushItems([]byte(body), 3)
		if err != nil || len(items) != want {
			t.Errorf("%s: %d items, %v", body, len(items), err)
		}
	}
	for _, body := range []string{``, `[]`, `{"items":{}}`, `{"items":[1]}`, `{"items":[{"queue":"q"}]`, `{"items":[]} {}`,
		`{"items":[{},{},{},{}]}`, `{"items":[{"queue":"q"},]}`} {
		var ae *apiError
		if _, err := readPushItems([]byte(body), 3); !errors.As(err, &ae) || ae.status != http.StatusBadRequest {
			t.Errorf("%q: %v, want a 400", body, err)
		}
	}
}

func TestTenantItemsInFlight(t *testing.T) {
	b := tenancy.NewInflight(10)
	take := func(tenant wire.ID, n int) (func(), error) { return takePushItems(b, tenant, n) }
	a, other := wire.ID{1}, wire.ID{2}
	r1, err := take(a, 6)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := take(a, 5); !errors.Is(err, raftgroups.ErrOverloaded) {
		t.Fatalf("11 items in flight: %v", err)
	}
	r2, err := take(other, 10)
	if err != nil {
		t.Fatalf("another tenant is not held back: %v", err)
	}
	r1()
	r3, err := take(a, 10)
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	r2()
	r3()
	// That idle tenants are not kept is tenancy.TestInflight's.
}
