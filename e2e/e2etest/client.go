package e2etest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/harness"
)

// Client is the data-plane tests' client of one node: thin wrappers over
// the routes that fail the test on a transport error and return the status
// with the decoded body.
type Client struct {
	t    *testing.T
	ctx  context.Context
	Base string
}

// NewClient is a Client of node n, failing t, bounded by ctx.
func NewClient(t *testing.T, ctx context.Context, n *harness.Node) *Client {
	return NewClientAt(t, ctx, n.URL())
}

// NewClientAt is a Client of the node whose HTTP base URL is base.
func NewClientAt(t *testing.T, ctx context.Context, base string) *Client {
	return &Client{t: t, ctx: ctx, Base: base}
}

// On is the same client talking to node n.
func (c *Client) On(n *harness.Node) *Client { return &Client{t: c.t, ctx: c.ctx, Base: n.URL()} }

// Do sends a request and decodes a JSON answer of any status into out.
func (c *Client) Do(method, path string, body, out any) int {
	c.t.Helper()
	var raw string
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		raw = string(b)
	}
	status, _, b := RawRequest(c.t, c.ctx, method, c.Base+path, raw)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: %d %v (%s)", method, path, status, err, b)
		}
	}
	return status
}

// Push pushes items and fails the test unless all were accepted (201).
func (c *Client) Push(items ...PushItem) []PushResult {
	c.t.Helper()
	var out []PushResult
	if code := c.Do(http.MethodPost, "/api/v1/push", map[string]any{"items": items}, &out); code != http.StatusCreated || len(out) != len(items) {
		c.t.Fatalf("push: %d %+v", code, out)
	}
	return out
}

// Pop pops with the given query; a 204 is an empty answer.
func (c *Client) Pop(path string) (PopAnswer, int) {
	c.t.Helper()
	var out PopAnswer
	code := c.Do(http.MethodGet, path, nil, &out)
	if code != http.StatusOK && code != http.StatusNoContent {
		c.t.Fatalf("GET %s: %d", path, code)
	}
	return out, code
}

// MustPop pops with the given path and fails the test unless it got
// exactly n messages.
func (c *Client) MustPop(path string, n int) PopAnswer {
	c.t.Helper()
	a, code := c.Pop(path)
	if code != http.StatusOK || len(a.Messages) != n {
		c.t.Fatalf("GET %s: %d with %d messages, want %d", path, code, len(a.Messages), n)
	}
	return a
}

// PopEmpty fails the test unless a pop with the given path answers 204.
func (c *Client) PopEmpty(path string) {
	c.t.Helper()
	if a, code := c.Pop(path); code != http.StatusNoContent {
		c.t.Fatalf("GET %s: %d with %+v, want 204", path, code, a.Messages)
	}
}

// AckReq is one acknowledgement of /api/v1/ack/batch.
type AckReq struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId,omitempty"`
	ConsumerGroup string `json:"consumerGroup,omitempty"`
	Status        string `json:"status,omitempty"`
	Error         string `json:"error,omitempty"`
}

// AckResult is the answer for one acknowledgement.
type AckResult struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
	Noop          bool    `json:"noop"`
	Conflated     bool    `json:"conflated"`
}

// AckOf acknowledges m as its pop handed it out (fenced by its lease).
func AckOf(m PopMessage, status string) AckReq {
	return AckReq{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, ConsumerGroup: m.ConsumerGroup, Status: status}
}

// AcksOf acknowledges every message of msgs with status.
func AcksOf(msgs []PopMessage, status string) []AckReq {
	var acks []AckReq
	for _, m := range msgs {
		acks = append(acks, AckOf(m, status))
	}
	return acks
}

// Ack acknowledges items in one batch and fails the test unless every
// one got an answer (200).
func (c *Client) Ack(items ...AckReq) []AckResult {
	c.t.Helper()
	var out []AckResult
	if code := c.Do(http.MethodPost, "/api/v1/ack/batch", map[string]any{"acknowledgments": items}, &out); code != http.StatusOK || len(out) != len(items) {
		c.t.Fatalf("ack: %d %+v", code, out)
	}
	return out
}

// AckAll acknowledges every message of a with status.
func (c *Client) AckAll(a PopAnswer, status string) []AckResult {
	c.t.Helper()
	return c.Ack(AcksOf(a.Messages, status)...)
}

// Configure sends /api/v1/configure and returns its answer; anything but
// 200 fails the test.
func (c *Client) Configure(body map[string]any) map[string]any {
	c.t.Helper()
	var out map[string]any
	if code := c.Do(http.MethodPost, "/api/v1/configure", body, &out); code != http.StatusOK {
		c.t.Fatalf("configure: %d %v", code, out)
	}
	return out
}

// TxnAnswer is the body of /api/v1/transaction.
type TxnAnswer struct {
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
		Items         []PushResult `json:"items"`
		LeaseReleased bool         `json:"leaseReleased"`
		Offset        *uint64      `json:"offset"`
	} `json:"results"`
}

// Txn sends a transaction and returns its answer; anything but a 200
// with a transaction id fails the test.
func (c *Client) Txn(body map[string]any) TxnAnswer {
	c.t.Helper()
	var out TxnAnswer
	if code := c.Do(http.MethodPost, "/api/v1/transaction", body, &out); code != http.StatusOK || out.TransactionID == "" {
		c.t.Fatalf("transaction: %d %+v", code, out)
	}
	return out
}

// Log reads a partition through fetch: its records, high-water mark and
// log start.
func (c *Client) Log(queue, partition string) (recs []FetchRecord, hwm, start uint64) {
	c.t.Helper()
	var out struct {
		Entries []struct {
			Records        []FetchRecord `json:"records"`
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
		if code := c.Do(http.MethodPost, "/api/v1/fetch", body, &out); code != http.StatusOK {
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

// Eventually polls cond every 20 ms until it holds or d passes.
func (c *Client) Eventually(d time.Duration, what string, cond func() bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, d)
	defer cancel()
	if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) { return cond(), nil }); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// PushItems are push items of queue/partition, one per payload.
func PushItems(queue, partition string, payloads ...any) []PushItem {
	out := make([]PushItem, len(payloads))
	for i, p := range payloads {
		out[i] = PushItem{Queue: queue, Partition: partition, Payload: p}
	}
	return out
}

// PopPath is the pop route of queue with the query parameters given
// ("batch=10", "wait=true").
func PopPath(queue string, query ...string) string {
	p := "/api/v1/pop/queue/" + queue
	if len(query) > 0 {
		p += "?" + strings.Join(query, "&")
	}
	return p
}

// ErrText is an optional error message (AckResult.Error), "" when absent.
func ErrText(e *string) string {
	if e == nil {
		return ""
	}
	return *e
}
