package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/harness"
)

// The data-plane tests' client: thin wrappers over the routes that fail
// the test on a transport error and return the status with the decoded
// body.

type ackResult struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
	Noop          bool    `json:"noop"`
	Conflated     bool    `json:"conflated"`
}

type ackReq struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId,omitempty"`
	ConsumerGroup string `json:"consumerGroup,omitempty"`
	Status        string `json:"status,omitempty"`
	Error         string `json:"error,omitempty"`
}

// ackOf acknowledges m as its pop handed it out (fenced by its lease).
func ackOf(m popMessage, status string) ackReq {
	return ackReq{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, ConsumerGroup: m.ConsumerGroup, Status: status}
}

// acksOf acknowledges every message of msgs with status.
func acksOf(msgs []popMessage, status string) []ackReq {
	var acks []ackReq
	for _, m := range msgs {
		acks = append(acks, ackOf(m, status))
	}
	return acks
}

type client struct {
	t    *testing.T
	ctx  context.Context
	base string
}

func newClient(t *testing.T, ctx context.Context, n *harness.Node) *client {
	return &client{t: t, ctx: ctx, base: n.URL()}
}

func (c *client) on(n *harness.Node) *client { return &client{t: c.t, ctx: c.ctx, base: n.URL()} }

// do sends a request and decodes a JSON answer of any status into out.
func (c *client) do(method, path string, body, out any) int {
	c.t.Helper()
	var raw string
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		raw = string(b)
	}
	status, _, b := rawRequest(c.t, c.ctx, method, c.base+path, raw)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: %d %v (%s)", method, path, status, err, b)
		}
	}
	return status
}

func (c *client) push(items ...pushItem) []pushResult {
	c.t.Helper()
	var out []pushResult
	if code := c.do(http.MethodPost, "/api/v1/push", map[string]any{"items": items}, &out); code != http.StatusCreated || len(out) != len(items) {
		c.t.Fatalf("push: %d %+v", code, out)
	}
	return out
}

// pop pops with the given query; a 204 is an empty answer.
func (c *client) pop(path string) (popAnswer, int) {
	c.t.Helper()
	var out popAnswer
	code := c.do(http.MethodGet, path, nil, &out)
	if code != http.StatusOK && code != http.StatusNoContent {
		c.t.Fatalf("GET %s: %d", path, code)
	}
	return out, code
}

func (c *client) mustPop(path string, n int) popAnswer {
	c.t.Helper()
	a, code := c.pop(path)
	if code != http.StatusOK || len(a.Messages) != n {
		c.t.Fatalf("GET %s: %d with %d messages, want %d", path, code, len(a.Messages), n)
	}
	return a
}

func (c *client) popEmpty(path string) {
	c.t.Helper()
	if a, code := c.pop(path); code != http.StatusNoContent {
		c.t.Fatalf("GET %s: %d with %+v, want 204", path, code, a.Messages)
	}
}

func (c *client) ack(items ...ackReq) []ackResult {
	c.t.Helper()
	var out []ackResult
	if code := c.do(http.MethodPost, "/api/v1/ack/batch", map[string]any{"acknowledgments": items}, &out); code != http.StatusOK || len(out) != len(items) {
		c.t.Fatalf("ack: %d %+v", code, out)
	}
	return out
}

func (c *client) ackAll(a popAnswer, status string) []ackResult {
	c.t.Helper()
	return c.ack(acksOf(a.Messages, status)...)
}

func (c *client) configure(body map[string]any) map[string]any {
	c.t.Helper()
	var out map[string]any
	if code := c.do(http.MethodPost, "/api/v1/configure", body, &out); code != http.StatusOK {
		c.t.Fatalf("configure: %d %v", code, out)
	}
	return out
}

type txnAnswer struct {
	TransactionID string `json:"transactionId"`
	Success       bool   `json:"success"`
	Reason        string `json:"reason"`
	Error         string `json:"error"`
	FailedIndex   *int   `json:"failedIndex"`
	FailedType    string `json:"failedType"`
	Results       []struct {
		Index         int          `json:"index"`
		Type          string       `json:"type"`
		Success       bool         `json:"success"`
		Items         []pushResult `json:"items"`
		LeaseReleased bool         `json:"leaseReleased"`
		Offset        *uint64      `json:"offset"`
	} `json:"results"`
}

func (c *client) txn(body map[string]any) txnAnswer {
	c.t.Helper()
	var out txnAnswer
	if code := c.do(http.MethodPost, "/api/v1/transaction", body, &out); code != http.StatusOK || out.TransactionID == "" {
		c.t.Fatalf("transaction: %d %+v", code, out)
	}
	return out
}

// log reads a partition through fetch: its records, high-water mark and
// log start.
func (c *client) log(queue, partition string) (recs []fetchRecord, hwm, start uint64) {
	c.t.Helper()
	var out struct {
		Entries []struct {
			Records        []fetchRecord `json:"records"`
			HighWatermark  uint64        `json:"highWatermark"`
			LogStartOffset uint64        `json:"logStartOffset"`
			Error          string        `json:"error"`
		} `json:"entries"`
	}
	// Retention can move the log start between an out-of-range answer and
	// the fetch at the start it reported, so follow the start a few times.
	offset := uint64(0)
	for try := 0; ; try++ {
		body := map[string]any{"entries": []map[string]any{{"queue": queue, "partition": partition, "offset": offset}}}
		out.Entries = nil
		if code := c.do(http.MethodPost, "/api/v1/fetch", body, &out); code != http.StatusOK {
			c.t.Fatalf("fetch: %d", code)
		}
		e := out.Entries[0]
		if e.Error == "OFFSET_OUT_OF_RANGE" && e.LogStartOffset != offset && try < 5 {
			offset = e.LogStartOffset
			continue
		}
		if e.Error != "" {
			c.t.Fatalf("fetch %s/%s at %d: %s (log start %d)", queue, partition, offset, e.Error, e.LogStartOffset)
		}
		return e.Records, e.HighWatermark, e.LogStartOffset
	}
}

// eventually polls cond every 20 ms until it holds or d passes.
func (c *client) eventually(d time.Duration, what string, cond func() bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, d)
	defer cancel()
	if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) { return cond(), nil }); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// payloads are the messages' data as compact JSON strings.
func payloads(a popAnswer) []string {
	var out []string
	for _, m := range a.Messages {
		out = append(out, string(m.Data))
	}
	return out
}

func items(queue, partition string, payloads ...any) []pushItem {
	out := make([]pushItem, len(payloads))
	for i, p := range payloads {
		out[i] = pushItem{Queue: queue, Partition: partition, Payload: p}
	}
	return out
}

func popPath(queue string, query ...string) string {
	p := "/api/v1/pop/queue/" + queue
	if len(query) > 0 {
		p += "?" + strings.Join(query, "&")
	}
	return p
}

func errText(e *string) string {
	if e == nil {
		return ""
	}
	return *e
}

var _ = fmt.Sprint
