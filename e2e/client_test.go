package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

var httpClient = &http.Client{Timeout: 90 * time.Second}

// call sends a JSON request and decodes a JSON answer into out (when not
// nil). It returns the status code.
func call(ctx context.Context, method, url string, body, out any) (int, error) {
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
	resp, err := httpClient.Do(req)
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
		if eb, ok := out.(*errorAnswer); ok {
			_ = json.Unmarshal(b, eb)
		}
	}
	return resp.StatusCode, nil
}

type errorAnswer struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	Path  string `json:"path"`
}

type pushItem struct {
	Queue         string `json:"queue"`
	Partition     string `json:"partition,omitempty"`
	Payload       any    `json:"payload"`
	TransactionID string `json:"transactionId,omitempty"`
}

type pushResult struct {
	Index         int    `json:"index"`
	MessageID     string `json:"message_id"`
	TransactionID string `json:"transaction_id"`
	QueueName     string `json:"queueName"`
	Status        string `json:"status"`
	Offset        uint64 `json:"offset"`
	Error         string `json:"error"`
}

func push(ctx context.Context, base string, items []pushItem) ([]pushResult, int, error) {
	var out []pushResult
	code, err := call(ctx, http.MethodPost, base+"/api/v1/push", map[string]any{"items": items}, &out)
	return out, code, err
}

type popMessage struct {
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

type popAnswer struct {
	Success     bool         `json:"success"`
	Queue       string       `json:"queue"`
	Partition   string       `json:"partition"`
	PartitionID string       `json:"partitionId"`
	LeaseID     string       `json:"leaseId"`
	Messages    []popMessage `json:"messages"`
}

func pop(ctx context.Context, base, path string) (popAnswer, int, error) {
	var out popAnswer
	code, err := call(ctx, http.MethodGet, base+path, nil, &out)
	return out, code, err
}

func ackBatch(ctx context.Context, base string, acks []ackReq) ([]ackResult, int, error) {
	var out []ackResult
	code, err := call(ctx, http.MethodPost, base+"/api/v1/ack/batch", map[string]any{"acknowledgments": acks}, &out)
	return out, code, err
}

type fetchRecord struct {
	Offset        uint64          `json:"offset"`
	TransactionID string          `json:"transactionId"`
	Payload       json.RawMessage `json:"payload"`
}

type fetchEntry struct {
	Queue         string        `json:"queue"`
	Partition     string        `json:"partition"`
	Records       []fetchRecord `json:"records"`
	HighWatermark uint64        `json:"highWatermark"`
	LastStable    uint64        `json:"lastStableOffset"`
	NextOffset    uint64        `json:"nextOffset"`
	Error         string        `json:"error"`
}

// fetchAll reads a whole partition from one node's local store.
func fetchAll(ctx context.Context, base, queue, partition string) ([]fetchRecord, uint64, error) {
	var all []fetchRecord
	var offset uint64
	for {
		var out struct {
			Entries []fetchEntry `json:"entries"`
		}
		body := map[string]any{"entries": []map[string]any{{"queue": queue, "partition": partition, "offset": offset, "maxBytes": 4 << 20}}}
		code, err := call(ctx, http.MethodPost, base+"/api/v1/fetch", body, &out)
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

// metric returns the value of one Prometheus sample (name with labels, as
// printed) from a node, or -1 when absent.
func metric(ctx context.Context, base, sample string) (float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics/prometheus", nil)
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, val, ok := strings.Cut(line, " "); ok && name == sample {
			return strconv.ParseFloat(strings.TrimSpace(val), 64)
		}
	}
	return -1, sc.Err()
}

func jsonBody(s string) io.Reader { return strings.NewReader(s) }
