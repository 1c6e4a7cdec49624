// Package stats records request latencies and item counts for the
// benchmark programs and prints throughput and percentiles.
package stats

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Recorder collects one latency sample per request and counts items.
type Recorder struct {
	mu        sync.Mutex
	latencies []time.Duration
	items     int64
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{latencies: make([]time.Duration, 0, 1<<16)} }

// Observe records one request that carried items items.
func (r *Recorder) Observe(d time.Duration, items int) {
	r.mu.Lock()
	r.latencies = append(r.latencies, d)
	r.items += int64(items)
	r.mu.Unlock()
}

// Result is a finished measurement.
type Result struct {
	Elapsed  time.Duration
	Items    int64
	Requests int
	P50, P99 time.Duration
	Max      time.Duration
	Errors   int64
}

// Result summarises everything observed over elapsed.
func (r *Recorder) Result(elapsed time.Duration) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := slices.Clone(r.latencies)
	slices.Sort(l)
	res := Result{Elapsed: elapsed, Items: r.items, Requests: len(l)}
	if len(l) > 0 {
		res.P50 = l[len(l)*50/100]
		res.P99 = l[min(len(l)-1, len(l)*99/100)]
		res.Max = l[len(l)-1]
	}
	return res
}

// Print writes the throughput of items of itemBytes each, and latencies.
func (r Result) Print(w io.Writer, unit string, itemBytes float64) {
	secs := r.Elapsed.Seconds()
	fmt.Fprintf(w, "  %s/s:     %.0f\n", unit, float64(r.Items)/secs)
	fmt.Fprintf(w, "  MB/s:      %.1f\n", float64(r.Items)*itemBytes/secs/1e6)
	fmt.Fprintf(w, "  requests:  %d (errors %d)\n", r.Requests, r.Errors)
	fmt.Fprintf(w, "  latency:   p50 %v  p99 %v  max %v\n", r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Max.Round(10*time.Microsecond))
}
