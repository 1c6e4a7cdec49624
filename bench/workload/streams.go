package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/queen-mq/queen/bench/node"
	"github.com/queen-mq/queen/bench/stats"
)

// StreamsOptions shape the Streams benchmark.
type StreamsOptions struct {
	url     string
	cycles  int
	rounds  int
	workers int
	batch   int
	state   int
}

// Register adds the options as flags with their defaults.
func (o *StreamsOptions) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.url, "url", "", "a running node's HTTP base URL (default: start one)")
	fs.IntVar(&o.cycles, "cycles", 1000, "commits per round")
	fs.IntVar(&o.rounds, "rounds", 6, "rounds, alternating cycle and transaction")
	fs.IntVar(&o.workers, "workers", 8, "concurrent workers, each on its own source partition")
	fs.IntVar(&o.batch, "batch", 10, "messages popped, pushed to the sink and acknowledged per commit")
	fs.IntVar(&o.state, "state", 4, "state upserts per commit")
}

// Streams measures Streams cycles (POST /streams/v1/cycle) on one node
// against POST /api/v1/transaction doing the same work: per commit, a pop
// of Batch messages from one source partition, then one commit of State
// state upserts, Batch sink pushes and the source's acknowledgment. The
// cycle acknowledges cumulatively (one ack); the transaction acknowledges
// each message and writes its state through its kv operations. Only the
// commit request is timed (the pops are the same in both). Rounds
// alternate the two (interleaved) on fresh queues, and the medians of the
// rounds are printed.
func Streams(o StreamsOptions, start node.Starter, w io.Writer) error {
	if o.workers < 1 || o.batch < 1 || o.cycles < o.workers || o.rounds < 1 {
		return fmt.Errorf("%w: need workers ≥ 1, batch ≥ 1, cycles ≥ workers, rounds ≥ 1", ErrOptions)
	}
	base := o.url
	if base == "" {
		c, stop, err := start(1, nil)
		if err != nil {
			return err
		}
		defer stop()
		base = c.Nodes[0].URL()
	}
	cl := &streamsClient{base: base, http: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: o.workers * 2}}}
	if err := cl.waitFormat(); err != nil {
		return err
	}
	fmt.Fprintf(w, "streams: %d commits per round, %d workers, batch %d, %d state ops, %d rounds\n", o.cycles, o.workers, o.batch, o.state, o.rounds)
	rates := map[string][]float64{}
	p50s := map[string][]time.Duration{}
	for r := 0; r < o.rounds; r++ {
		mode := [...]string{"cycle", "transaction"}[r%2]
		res, err := streamsRound(cl, o, r, mode)
		if err != nil {
			return fmt.Errorf("round %d (%s): %w", r, mode, err)
		}
		rate := float64(res.Requests) / res.Elapsed.Seconds()
		rates[mode], p50s[mode] = append(rates[mode], rate), append(p50s[mode], res.P50)
		fmt.Fprintf(w, "round %d %-11s %7.0f commits/s  %7.0f msgs/s  p50 %v  p99 %v  errors %d\n", r, mode, rate,
			float64(res.Items)/res.Elapsed.Seconds(), res.P50.Round(10*time.Microsecond), res.P99.Round(10*time.Microsecond), res.Errors)
	}
	for _, mode := range []string{"cycle", "transaction"} {
		if len(rates[mode]) == 0 {
			continue
		}
		slices.Sort(rates[mode])
		slices.Sort(p50s[mode])
		fmt.Fprintf(w, "median %-11s %7.0f commits/s  p50 %v  (%d rounds)\n", mode, rates[mode][len(rates[mode])/2],
			p50s[mode][len(p50s[mode])/2].Round(10*time.Microsecond), len(rates[mode]))
	}
	return nil
}

// round preloads a fresh source queue and runs o.cycles commits of mode
// over it; only the commits are timed.
func streamsRound(cl *streamsClient, o StreamsOptions, r int, mode string) (stats.Result, error) {
	src, sink := fmt.Sprintf("bs-src-%d", r), fmt.Sprintf("bs-sink-%d", r)
	per := (o.cycles + o.workers - 1) / o.workers
	for wk := 0; wk < o.workers; wk++ {
		if err := cl.preload(src, fmt.Sprintf("p%d", wk), per*o.batch); err != nil {
			return stats.Result{}, err
		}
	}
	var query string
	if mode == "cycle" {
		var q struct {
			QueryID string `json:"query_id"`
		}
		if err := cl.post("/streams/v1/queries", map[string]any{"name": "bench-" + src, "source_queue": src, "sink_queue": sink, "config_hash": "h"}, &q); err != nil {
			return stats.Result{}, err
		}
		query = q.QueryID
	}
	rec := stats.NewRecorder()
	var mu sync.Mutex
	var errs int64
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for wk := 0; wk < o.workers; wk++ {
		wg.Add(1)
		go func(wk int) {
			defer wg.Done()
			part := fmt.Sprintf("p%d", wk)
			for i := 0; i < per; i++ {
				d, err := cl.commit(o, mode, query, src, sink, part, i)
				if err != nil {
					mu.Lock()
					errs++
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				rec.Observe(d, o.batch)
			}
		}(wk)
	}
	wg.Wait()
	res := rec.Result(time.Since(start))
	res.Errors = errs
	if firstErr != nil && errs > int64(per*o.workers)/10 {
		return res, firstErr
	}
	return res, nil
}

// streamsClient is a JSON client of one node's HTTP API.
type streamsClient struct {
	base string
	http *http.Client
}

func (c *streamsClient) do(method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNoContent {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, err
		}
	}
	return resp.StatusCode, nil
}

func (c *streamsClient) post(path string, body, out any) error {
	_, err := c.do(http.MethodPost, path, body, out)
	return err
}

// waitFormat waits until every group applies the format cycles need.
func (c *streamsClient) waitFormat() error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var h struct {
			Format struct {
				Active []uint32 `json:"active"`
			} `json:"format"`
		}
		if _, err := c.do(http.MethodGet, "/health", nil, &h); err == nil && len(h.Format.Active) > 0 &&
			!slices.ContainsFunc(h.Format.Active, func(f uint32) bool { return f < 3 }) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the node's groups did not reach format 3")
}

func (c *streamsClient) preload(queue, partition string, n int) error {
	for n > 0 {
		k := min(n, 1000)
		items := make([]map[string]any, k)
		for i := range items {
			items[i] = map[string]any{"queue": queue, "partition": partition, "payload": map[string]int{"v": i}}
		}
		if err := c.post("/api/v1/push", map[string]any{"items": items}, nil); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// commit pops one batch of partition and commits it as mode says,
// returning the commit request's time.
func (c *streamsClient) commit(o StreamsOptions, mode, query, src, sink, partition string, i int) (time.Duration, error) {
	var p popAnswer
	code, err := c.do(http.MethodGet, fmt.Sprintf("/api/v1/pop/queue/%s/partition/%s?batch=%d", src, partition, o.batch), nil, &p)
	if err != nil {
		return 0, err
	}
	if code == http.StatusNoContent || len(p.Messages) == 0 {
		return 0, fmt.Errorf("pop of %s/%s: nothing", src, partition)
	}
	push := make([]map[string]any, len(p.Messages))
	for j, m := range p.Messages {
		push[j] = map[string]any{"queue": sink, "partition": partition, "payload": m.Data}
	}
	last := p.Messages[len(p.Messages)-1]
	var ok struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
	}
	start := time.Now()
	if mode == "cycle" {
		ops := make([]map[string]any, o.state)
		for j := range ops {
			ops[j] = map[string]any{"type": "upsert", "key": fmt.Sprintf("k%d", j), "value": map[string]int{"windowEnd": i, "sum": i * j}}
		}
		err = c.post("/streams/v1/cycle", map[string]any{"query_id": query, "partition_id": last.PartitionID, "state_ops": ops,
			"push_items": push, "ack": map[string]any{"transactionId": last.TransactionID, "leaseId": last.LeaseID, "status": "completed", "count": len(p.Messages)}}, &ok)
	} else {
		kv := make([]map[string]any, o.state)
		for j := range kv {
			kv[j] = map[string]any{"op": "put", "ns": "bench", "key": fmt.Sprintf("%s/%s/k%d", src, partition, j), "value": map[string]int{"windowEnd": i, "sum": i * j}}
		}
		ops := []map[string]any{{"type": "push", "items": push}}
		for _, m := range p.Messages {
			ops = append(ops, map[string]any{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "completed"})
		}
		body := map[string]any{"operations": ops}
		if o.state > 0 {
			body["kv"] = kv
		}
		err = c.post("/api/v1/transaction", body, &ok)
	}
	d := time.Since(start)
	if err != nil {
		return d, err
	}
	if !ok.Success {
		return d, fmt.Errorf("%s rolled back: %s", mode, ok.Error)
	}
	return d, nil
}
