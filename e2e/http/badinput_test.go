package http

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// queueExists asks a node's store directly whether a queue has any
// partition: bad input must never create one.
func queueExists(t *testing.T, ctx context.Context, base, queue, partition string) bool {
	t.Helper()
	var out struct {
		Entries []e2etest.FetchEntry `json:"entries"`
	}
	body := map[string]any{"entries": []map[string]any{{"queue": queue, "partition": partition, "offset": 0}}}
	if code, err := e2etest.Call(ctx, http.MethodPost, base+"/api/v1/fetch", body, &out); err != nil || code != 200 {
		t.Fatalf("fetch: %d %v", code, err)
	}
	return out.Entries[0].Error == ""
}

func TestBadInputGetsAClearErrorAndChangesNothing(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{"QUEEN_MAX_BODY_BYTES": "8192"}})
	base := c.Nodes[0].URL()
	ctx := e2etest.Deadline(t, time.Minute)

	cases := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"malformed JSON", `{"items":[{"queue":"bad1","payload":`, 400, "bad_request"},
		{"items not an array", `{"items":{"queue":"bad1"}}`, 400, "bad_request"},
		{"missing queue", `{"items":[{"payload":1}]}`, 400, "bad_request"},
		{"queue name over the budget", `{"items":[{"queue":"` + strings.Repeat("q", 420) + `","payload":1}]}`, 413, "name_too_long"},
		{"partition pushes the budget over", `{"items":[{"queue":"bad1","partition":"` + strings.Repeat("p", 410) + `","payload":1}]}`, 413, "name_too_long"},
		{"one bad item spoils the batch", `{"items":[{"queue":"bad1","payload":1},{"queue":"","payload":2}]}`, 400, "bad_request"},
	}
	for _, tc := range cases {
		status, _, body := e2etest.RawRequest(t, ctx, http.MethodPost, base+"/api/v1/push", tc.body)
		var e e2etest.ErrorAnswer
		if err := json.Unmarshal(body, &e); err != nil || status != tc.status || e.Code != tc.code || e.Error == "" {
			t.Fatalf("%s: %d %s", tc.name, status, body)
		}
	}
	if queueExists(t, ctx, base, "bad1", "Default") {
		t.Fatal("a refused push created its queue")
	}

	// Over QUEEN_MAX_BODY_BYTES: a plain 413, nothing stored.
	big := `{"items":[{"queue":"bad2","payload":"` + strings.Repeat("x", 9000) + `"}]}`
	if status, _, _ := e2etest.RawRequest(t, ctx, http.MethodPost, base+"/api/v1/push", big); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d", status)
	}
	if queueExists(t, ctx, base, "bad2", "Default") {
		t.Fatal("an oversized push was stored")
	}

	// Unknown fields are ignored.
	status, _, body := e2etest.RawRequest(t, ctx, http.MethodPost, base+"/api/v1/push",
		`{"items":[{"queue":"ok","payload":{"a":1},"color":"blue"}],"extra":true}`)
	if status != http.StatusCreated {
		t.Fatalf("unknown fields: %d %s", status, body)
	}

	// Bad pop parameters and acks.
	for _, path := range []string{"/api/v1/pop/queue/ok?batch=0", "/api/v1/pop/queue/ok?partitions=65", "/api/v1/pop/queue/ok?timeout=soon"} {
		if status, _, body := e2etest.RawRequest(t, ctx, http.MethodGet, base+path, ""); status != 400 || !bytes.Contains(body, []byte(`"code":"bad_request"`)) {
			t.Fatalf("%s: %d %s", path, status, body)
		}
	}
	if status, _, body := e2etest.RawRequest(t, ctx, http.MethodPost, base+"/api/v1/ack", `{"transactionId":"x","partitionId":"nope"}`); status != 400 {
		t.Fatalf("bad ack: %d %s", status, body)
	}

	// Unknown routes and methods: 404 with the route-miss envelope.
	for _, r := range [][2]string{{"GET", "/api/v1/nope"}, {"DELETE", "/api/v1/push"}} {
		status, _, body := e2etest.RawRequest(t, ctx, r[0], base+r[1], "")
		var e e2etest.ErrorAnswer
		_ = json.Unmarshal(body, &e)
		if status != 404 || e.Code != "no_such_route" || e.Path != r[1] || e.Error != "not found" {
			t.Fatalf("%s %s: %d %s", r[0], r[1], status, body)
		}
	}
}

func TestWriteWithoutQuorumIs503WithRetryAfter(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: map[string]string{"QUEEN_STMT_TIMEOUT_MS": "1500"}})
	ctx := e2etest.Deadline(t, time.Minute)
	c.Nodes[1].Kill()
	c.Nodes[2].Kill()
	var status int
	var hdr http.Header
	var body []byte
	// The survivor may take a moment to notice it lost its quorum.
	err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		status, hdr, body = e2etest.RawRequest(t, ctx, http.MethodPost, c.Nodes[0].URL()+"/api/v1/push", `{"items":[{"queue":"q","payload":1}]}`)
		return status == http.StatusServiceUnavailable, nil
	})
	if err != nil {
		t.Fatalf("push without quorum: %d %s", status, body)
	}
	var e e2etest.ErrorAnswer
	if json.Unmarshal(body, &e) != nil || e.Code == "" || hdr.Get("Retry-After") == "" {
		t.Fatalf("503 without the envelope or Retry-After: %v %s", hdr, body)
	}
}
