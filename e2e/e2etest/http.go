package e2etest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// HTTPClient is the HTTP client of every helper here: a 90 s bound on any
// request, under the tests' own deadlines.
var HTTPClient = &http.Client{Timeout: 90 * time.Second}

// Call sends a JSON request and decodes a JSON answer into out (when not
// nil). It returns the status code.
func Call(ctx context.Context, method, url string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := HTTPClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && len(b) > 0 && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w (%s)", url, err, b)
		}
	}
	if resp.StatusCode >= 300 && out != nil {
		if eb, ok := out.(*ErrorAnswer); ok {
			_ = json.Unmarshal(b, eb)
		}
	}
	return resp.StatusCode, nil
}

// ErrorAnswer is the body of a refused request; Call fills it for a
// status of 300 or more when out is an *ErrorAnswer.
type ErrorAnswer struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	Path  string `json:"path"`
}

// RawRequest sends body as is (JSON) and returns the status, the headers
// and the body; a transport error fails the test.
func RawRequest(t *testing.T, ctx context.Context, method, url, body string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// GetJSON GETs a path and decodes the answer, failing the test on any
// status but want.
func GetJSON(t *testing.T, ctx context.Context, method, url string, body any, want int, out any) {
	t.Helper()
	var raw json.RawMessage
	code, err := Call(ctx, method, url, body, &raw)
	if err != nil || code != want {
		t.Fatalf("%s %s: %d %v (%s)", method, url, code, err, raw)
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v (%s)", method, url, err, raw)
		}
	}
}

// DecodeInto decodes a page body, failing the test on bad JSON.
func DecodeInto(t *testing.T, body []byte, out any) {
	t.Helper()
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
}

// PushItem is one message of a push (/api/v1/push).
type PushItem struct {
	Queue         string `json:"queue"`
	Partition     string `json:"partition,omitempty"`
	Payload       any    `json:"payload"`
	TransactionID string `json:"transactionId,omitempty"`
}

// PushResult is the answer for one pushed item.
type PushResult struct {
	Index         int    `json:"index"`
	MessageID     string `json:"message_id"`
	TransactionID string `json:"transaction_id"`
	QueueName     string `json:"queueName"`
	Status        string `json:"status"`
	Offset        uint64 `json:"offset"`
	Error         string `json:"error"`
}

// Push pushes items through the node at base and returns the answer per
// item and the status.
func Push(ctx context.Context, base string, items []PushItem) ([]PushResult, int, error) {
	var out []PushResult
	code, err := Call(ctx, http.MethodPost, base+"/api/v1/push", map[string]any{"items": items}, &out)
	return out, code, err
}

// PushN pushes n messages to queue/partition.
func PushN(t *testing.T, ctx context.Context, base, queue, partition string, n int) {
	t.Helper()
	items := make([]PushItem, n)
	for i := range items {
		items[i] = PushItem{Queue: queue, Partition: partition, Payload: map[string]int{"n": i}}
	}
	if _, code, err := Push(ctx, base, items); err != nil || code != http.StatusCreated {
		t.Fatalf("push: %d %v", code, err)
	}
}

// PopMessage is one message a pop handed out, with what its ack needs.
type PopMessage struct {
	ID              string          `json:"id"`
	TransactionID   string          `json:"transactionId"`
	Data            json.RawMessage `json:"data"`
	Encoding        string          `json:"encoding"`
	PartitionID     string          `json:"partitionId"`
	Partition       string          `json:"partition"`
	Offset          uint64          `json:"offset"`
	LeaseID         string          `json:"leaseId"`
	ConsumerGroup   string          `json:"consumerGroup"`
	DeliveryAttempt int             `json:"deliveryAttempt"`
	CreatedAt       string          `json:"createdAt"`
}

// PopAnswer is the body of a pop.
type PopAnswer struct {
	Success     bool         `json:"success"`
	Queue       string       `json:"queue"`
	Partition   string       `json:"partition"`
	PartitionID string       `json:"partitionId"`
	LeaseID     string       `json:"leaseId"`
	Messages    []PopMessage `json:"messages"`
}

// Pop GETs a pop path (PopPath) from the node at base; a 204 is an empty
// answer.
func Pop(ctx context.Context, base, path string) (PopAnswer, int, error) {
	var out PopAnswer
	code, err := Call(ctx, http.MethodGet, base+path, nil, &out)
	return out, code, err
}

// PopAck pops up to batch messages of queue (of one partition when set)
// for group and acknowledges them with status; it returns the messages.
func PopAck(t *testing.T, ctx context.Context, base, queue, partition, group string, batch int, status string) []PopMessage {
	t.Helper()
	path := "/api/v1/pop/queue/" + queue
	if partition != "" {
		path += "/partition/" + partition
	}
	path += fmt.Sprintf("?batch=%d&subscriptionMode=all", batch)
	if group != "" {
		path += "&consumerGroup=" + group
	}
	ans, code, err := Pop(ctx, base, path)
	if err != nil || (code != http.StatusOK && code != http.StatusNoContent) {
		t.Fatalf("pop: %d %v", code, err)
	}
	for _, m := range ans.Messages {
		body := map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID,
			"status": status, "consumerGroup": group, "error": "boom"}
		var out []map[string]any
		if code, err := Call(ctx, http.MethodPost, base+"/api/v1/ack", body, &out); err != nil || code != http.StatusOK {
			t.Fatalf("ack: %d %v", code, err)
		}
	}
	return ans.Messages
}

// FetchRecord is one record of a partition read with /api/v1/fetch.
type FetchRecord struct {
	Offset        uint64          `json:"offset"`
	TransactionID string          `json:"transactionId"`
	Payload       json.RawMessage `json:"payload"`
}

// FetchEntry is the answer of /api/v1/fetch for one partition.
type FetchEntry struct {
	Queue         string        `json:"queue"`
	Partition     string        `json:"partition"`
	Records       []FetchRecord `json:"records"`
	HighWatermark uint64        `json:"highWatermark"`
	LastStable    uint64        `json:"lastStableOffset"`
	NextOffset    uint64        `json:"nextOffset"`
	Error         string        `json:"error"`
}

// FetchAll reads a whole partition from one node's local store.
func FetchAll(ctx context.Context, base, queue, partition string) ([]FetchRecord, uint64, error) {
	var all []FetchRecord
	var offset uint64
	for {
		var out struct {
			Entries []FetchEntry `json:"entries"`
		}
		body := map[string]any{"entries": []map[string]any{{"queue": queue, "partition": partition, "offset": offset, "maxBytes": 4 << 20}}}
		code, err := Call(ctx, http.MethodPost, base+"/api/v1/fetch", body, &out)
		if err != nil || code != http.StatusOK {
			return nil, 0, fmt.Errorf("fetch: %d %v", code, err)
		}
		e := out.Entries[0]
		if e.Error != "" {
			return nil, 0, fmt.Errorf("fetch %s/%s: %s", queue, partition, e.Error)
		}
		all = append(all, e.Records...)
		if e.NextOffset == offset || e.NextOffset >= e.LastStable {
			return all, e.HighWatermark, nil
		}
		offset = e.NextOffset
	}
}
