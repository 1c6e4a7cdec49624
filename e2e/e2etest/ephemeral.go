package e2etest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/harness"
)

// TenantA is a tenant id the ephemeral tests address requests to
// (x-queen-tenant).
const TenantA = "11111111-1111-4111-8111-111111111111"

// EphemeralCall is one ephemeral request as tenant; it answers the status, the
// node that held the partition (x-queen-ephemeral-node) and the body.
func EphemeralCall(ctx context.Context, t *testing.T, method, url, tenant string, body any, out any) (int, string, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if tenant != "" {
		req.Header.Set("x-queen-tenant", tenant)
	}
	resp, err := HTTPClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v (%s)", method, url, err, b)
		}
	}
	return resp.StatusCode, resp.Header.Get("x-queen-ephemeral-node"), b
}

// EphemeralMessages are n messages for an ephemeral push, tagged tag.
func EphemeralMessages(n int, tag string) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = map[string]any{"payload": map[string]any{"tag": tag, "i": i}}
	}
	return out
}

// EphemeralPopAnswer is the body of an ephemeral pop.
type EphemeralPopAnswer struct {
	Queue    string `json:"queue"`
	Messages []struct {
		ID        string          `json:"id"`
		Partition string          `json:"partition"`
		Payload   json.RawMessage `json:"payload"`
		Attempts  int             `json:"attempts"`
	} `json:"messages"`
}

// EphemeralSystem is a node's /api/v1/system/ephemeral: the switch, its
// memory use and the nodes it sees live.
type EphemeralSystem struct {
	Enabled  bool     `json:"enabled"`
	Bytes    int64    `json:"bytes"`
	MaxBytes int64    `json:"maxBytes"`
	Messages int      `json:"messages"`
	Node     int      `json:"node"`
	Live     []uint64 `json:"live"`
}

// WaitEphemeralLive waits until every node sees all nodes live.
func WaitEphemeralLive(ctx context.Context, t *testing.T, c *harness.Cluster) {
	t.Helper()
	err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		for _, n := range c.Nodes {
			var s EphemeralSystem
			if code, _, _ := EphemeralCall(ctx, t, "GET", n.URL()+"/api/v1/system/ephemeral", "", nil, &s); code != 200 || len(s.Live) != len(c.Nodes) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal("nodes never saw each other live:", err)
	}
}
