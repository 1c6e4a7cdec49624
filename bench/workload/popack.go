package workload

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queen-mq/queen/bench/node"
	"github.com/queen-mq/queen/bench/stats"
)

// PopAckOptions shape the pop+ack benchmark.
type PopAckOptions struct {
	URL, Pprof                                  string
	Partitions, Batch, Consumers, Preload, Size int
	LatencyRate                                 int
	Duration, Warmup, LatencyDuration           time.Duration
}

// Register adds the options as flags with their defaults.
func (o *PopAckOptions) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.URL, "url", "", "use this node instead of starting one")
	fs.StringVar(&o.Pprof, "pprof", "", "QUEEN_PPROF_ADDR for the node this starts (e.g. 127.0.0.1:6060)")
	fs.IntVar(&o.Partitions, "partitions", 100, "partitions of the preloaded queue")
	fs.IntVar(&o.Batch, "batch", 100, "messages per pop (and per batch ack)")
	fs.IntVar(&o.Consumers, "consumers", 32, "concurrent consumers")
	fs.IntVar(&o.Preload, "preload", 1500000, "messages pushed before consuming (more than the run consumes)")
	fs.IntVar(&o.Size, "size", 256, "payload bytes per message")
	fs.DurationVar(&o.Duration, "duration", 15*time.Second, "how long to consume")
	fs.DurationVar(&o.Warmup, "warmup", 2*time.Second, "consuming before measuring")
	fs.IntVar(&o.LatencyRate, "latency-rate", 200, "messages per second in the latency run")
	fs.DurationVar(&o.LatencyDuration, "latency-duration", 10*time.Second, "how long the latency run pushes")
}

// PopAck measures the consuming side of the HTTP API on one node:
//
//   - pop+ack throughput: a queue (queue mode) with many partitions is
//     preloaded, then concurrent consumers pop batches and acknowledge each
//     batch with one batch ack for a fixed time; messages consumed and
//     acknowledged per second, and pop and ack latencies, are printed.
//   - push→pop latency: consumers long-poll an empty queue while a producer
//     pushes single messages at a steady rate stamped with their send time;
//     the time from the push being sent to the message being delivered is
//     printed as p50/p99.
func PopAck(o PopAckOptions, start node.Starter, w io.Writer) error {
	if o.LatencyRate < 1 || o.Partitions < 1 || o.Consumers < 1 || o.Batch < 1 {
		return fmt.Errorf("%w: latency-rate, partitions, consumers and batch must be at least 1", ErrOptions)
	}
	target := o.URL
	if target == "" {
		var env map[string]string
		if o.Pprof != "" {
			env = map[string]string{"QUEEN_PPROF_ADDR": o.Pprof}
		}
		c, stop, err := start(1, env)
		if err != nil {
			return err
		}
		defer stop()
		target = c.Nodes[0].URL()
	}
	b := &bench{url: target, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}}

	began := time.Now()
	if err := b.preload("popack", o.Partitions, o.Preload, o.Size); err != nil {
		return fmt.Errorf("preload: %w", err)
	}
	fmt.Fprintf(w, "preloaded %d messages of %dB over %d partitions in %v\n", o.Preload, o.Size, o.Partitions, time.Since(began).Round(time.Millisecond))
	res := b.consume("popack", o.Consumers, o.Batch, o.Warmup, o.Duration)
	fmt.Fprintf(w, "popack consumers=%d batch=%d partitions=%d duration=%s (queue mode, pop then one batch ack)\n",
		o.Consumers, o.Batch, o.Partitions, o.Duration)
	res.total.Print(w, "msg", float64(o.Size))
	fmt.Fprintf(w, "  pop:       p50 %v  p99 %v\n", res.pop.P50.Round(10*time.Microsecond), res.pop.P99.Round(10*time.Microsecond))
	fmt.Fprintf(w, "  ack:       p50 %v  p99 %v\n", res.ack.P50.Round(10*time.Microsecond), res.ack.P99.Round(10*time.Microsecond))
	fmt.Fprintf(w, "  empty pops: %d (a consumer found no free partition with messages)\n", res.empty)

	lat, pushed := b.latency("latency", o.LatencyRate, o.LatencyDuration)
	fmt.Fprintf(w, "push→pop latency rate=%d/s duration=%s (%d pushed, %d delivered, %d errors)\n", o.LatencyRate, o.LatencyDuration, pushed, lat.Requests, lat.Errors)
	fmt.Fprintf(w, "  latency:   p50 %v  p99 %v  max %v\n", lat.P50.Round(10*time.Microsecond), lat.P99.Round(10*time.Microsecond), lat.Max.Round(10*time.Microsecond))
	return nil
}

type bench struct {
	url    string
	client *http.Client
}

func (b *bench) post(path string, body []byte, out any) (int, error) {
	resp, err := b.client.Post(b.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode < 300 {
		return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// preload pushes n messages round-robin over the partitions, 500 per
// request (each request to one partition), from 16 concurrent writers.
func (b *bench) preload(queue string, partitions, n, size int) error {
	const perRequest = 500
	return b.pushMany(queue, n, size, 16, perRequest, func(i int) int { return (i / perRequest) % partitions })
}

type popAnswer struct {
	PartitionID string `json:"partitionId"`
	LeaseID     string `json:"leaseId"`
	Messages    []struct {
		TransactionID string          `json:"transactionId"`
		PartitionID   string          `json:"partitionId"`
		LeaseID       string          `json:"leaseId"`
		Data          json.RawMessage `json:"data"`
	} `json:"messages"`
}

type ackItem struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId"`
}

// popAndAck pops path and acks what came in one batch ack (for consumer
// group group, "" for queue mode).
func (b *bench) popAndAck(path, group string) (popAnswer, time.Duration, time.Duration, error) {
	start := time.Now()
	resp, err := b.client.Get(b.url + path)
	if err != nil {
		return popAnswer{}, 0, 0, err
	}
	var a popAnswer
	if resp.StatusCode == http.StatusOK {
		err = json.NewDecoder(resp.Body).Decode(&a)
	} else if resp.StatusCode != http.StatusNoContent {
		err = fmt.Errorf("pop answered %d", resp.StatusCode)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	popped := time.Since(start)
	if err != nil || len(a.Messages) == 0 {
		return a, popped, 0, err
	}
	acks := make([]ackItem, len(a.Messages))
	for i, m := range a.Messages {
		acks[i] = ackItem{m.TransactionID, m.PartitionID, m.LeaseID}
	}
	body, _ := json.Marshal(map[string]any{"acknowledgments": acks, "consumerGroup": group})
	start = time.Now()
	var out []struct {
		Success bool `json:"success"`
	}
	code, err := b.post("/api/v1/ack/batch", body, &out)
	if err == nil && (code != http.StatusOK || len(out) != len(acks) || !out[0].Success) {
		err = fmt.Errorf("ack answered %d", code)
	}
	return a, popped, time.Since(start), err
}

type consumeResult struct {
	total, pop, ack stats.Result
	empty           int64
}

func (b *bench) consume(queue string, consumers, batch int, warmup, duration time.Duration) consumeResult {
	var (
		measuring, stop atomic.Bool
		errors, empty   atomic.Int64
		wg              sync.WaitGroup
		total           = stats.NewRecorder()
		pops, acks      = stats.NewRecorder(), stats.NewRecorder()
	)
	path := fmt.Sprintf("/api/v1/pop/queue/%s?batch=%d&wait=true&timeout=1000", queue, batch)
	for c := 0; c < consumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				start := time.Now()
				a, popT, ackT, err := b.popAndAck(path, "")
				if err != nil {
					errors.Add(1)
					continue
				}
				if measuring.Load() && len(a.Messages) == 0 {
					empty.Add(1)
				}
				if measuring.Load() && len(a.Messages) > 0 {
					total.Observe(time.Since(start), len(a.Messages))
					pops.Observe(popT, len(a.Messages))
					acks.Observe(ackT, len(a.Messages))
				}
			}
		}()
	}
	elapsed := measure(&measuring, warmup, duration)
	stop.Store(true)
	wg.Wait()
	r := consumeResult{total: total.Result(elapsed), pop: pops.Result(elapsed), ack: acks.Result(elapsed)}
	r.total.Errors, r.empty = errors.Load(), empty.Load()
	return r
}

// latency runs consumers that long-poll the queue while one producer
// pushes single messages at rate per second; each delivery records the
// time since its push was sent.
func (b *bench) latency(queue string, rate int, duration time.Duration) (stats.Result, int) {
	rec := stats.NewRecorder()
	var stop atomic.Bool
	var errors atomic.Int64
	var wg sync.WaitGroup
	const partitions = 8
	path := fmt.Sprintf("/api/v1/pop/queue/%s?batch=10&wait=true&timeout=1000", queue)
	for c := 0; c < 2*partitions; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				a, _, _, err := b.popAndAck(path, "")
				if err != nil {
					errors.Add(1)
					continue
				}
				now := time.Now().UnixNano()
				for _, m := range a.Messages {
					var sent int64
					if json.Unmarshal(m.Data, &sent) == nil {
						rec.Observe(time.Duration(now-sent), 1)
					}
				}
			}
		}()
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	end := time.Now().Add(duration)
	var pushes sync.WaitGroup
	pushed := 0
	for i := 0; time.Now().Before(end); i++ {
		pushed++
		<-tick.C
		pushes.Add(1)
		go func(i int) {
			defer pushes.Done()
			body := fmt.Sprintf(`{"items":[{"queue":%q,"partition":"p%d","payload":%d}]}`, queue, i%partitions, time.Now().UnixNano())
			if code, err := b.post("/api/v1/push", []byte(body), nil); err != nil || code != http.StatusCreated {
				errors.Add(1)
			}
		}(i)
	}
	tick.Stop()
	pushes.Wait()
	time.Sleep(2 * time.Second) // let the last deliveries arrive
	stop.Store(true)
	wg.Wait()
	r := rec.Result(duration)
	r.Errors = errors.Load()
	return r, pushed
}
