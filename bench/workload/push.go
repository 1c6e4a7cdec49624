// Package workload is the benchmarks' measuring code: HTTP push, pop+ack
// and the Kafka door. Each workload has options that register as flags and
// a Run that starts its own nodes (through a node.Starter) unless pointed
// at running ones, measures and prints a report. The go run ./bench/...
// programs and `queen bench` both run it.
package workload

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queen-mq/queen/bench/node"
	"github.com/queen-mq/queen/bench/stats"
)

// ErrOptions marks an error in a workload's options, found before anything
// is started.
var ErrOptions = errors.New("bad options")

// measure lets a workload warm up, then sets measuring for the measured
// window and returns how long that window was.
func measure(measuring *atomic.Bool, warmup, duration time.Duration) time.Duration {
	time.Sleep(warmup)
	measuring.Store(true)
	began := time.Now()
	time.Sleep(duration)
	measuring.Store(false)
	return time.Since(began)
}

// PushOptions shape the HTTP push benchmark.
type PushOptions struct {
	Nodes, Clients, Batch, Size, Partitions int
	URL                                     string
	// Token is sent as a bearer token on every push: an API key, to
	// measure through the embedded proxy's port.
	Token            string
	Duration, Warmup time.Duration
}

// Register adds the options as flags with their defaults.
func (o *PushOptions) Register(fs *flag.FlagSet) {
	fs.IntVar(&o.Nodes, "nodes", 1, "start this many nodes (1 or 3) unless -url is given")
	fs.StringVar(&o.URL, "url", "", "push to this node instead of starting one")
	fs.StringVar(&o.Token, "token", "", "bearer token on every push (an API key, to push through the proxy port)")
	fs.IntVar(&o.Clients, "clients", 64, "concurrent HTTP clients")
	fs.IntVar(&o.Batch, "batch", 100, "messages per push request")
	fs.IntVar(&o.Size, "size", 1024, "payload bytes per message")
	fs.IntVar(&o.Partitions, "partitions", 16, "partitions to spread pushes over")
	fs.DurationVar(&o.Duration, "duration", 15*time.Second, "how long to push")
	fs.DurationVar(&o.Warmup, "warmup", 2*time.Second, "pushes before measuring")
}

// Push measures HTTP push throughput and latency: many concurrent clients
// push batches of fixed-size messages for a fixed time; it prints
// messages/s, MB/s and request latency percentiles.
func Push(o PushOptions, start node.Starter, w io.Writer) error {
	if o.Size < 2 || o.Clients < 1 || o.Batch < 1 || o.Partitions < 1 {
		return fmt.Errorf("%w: size must be at least 2, clients, batch and partitions at least 1", ErrOptions)
	}
	target := o.URL
	if target == "" {
		c, stop, err := start(o.Nodes, nil)
		if err != nil {
			return err
		}
		defer stop()
		target = c.Nodes[0].URL()
	}
	res := pushRun(target, o)
	fmt.Fprintf(w, "httppush nodes=%d clients=%d batch=%d size=%dB partitions=%d duration=%s\n",
		o.Nodes, o.Clients, o.Batch, o.Size, o.Partitions, o.Duration)
	res.Print(w, "msg", float64(o.Size))
	return nil
}

func pushRun(url string, o PushOptions) stats.Result {
	payload := strings.Repeat("x", o.Size-2) // a JSON string of size bytes with its quotes
	bodies := make([][]byte, o.Partitions)
	for p := range bodies {
		var b bytes.Buffer
		b.WriteString(`{"items":[`)
		for i := 0; i < o.Batch; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"queue":"bench","partition":"p%d","payload":"%s"}`, p, payload)
		}
		b.WriteString(`]}`)
		bodies[p] = b.Bytes()
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.Clients, MaxConnsPerHost: o.Clients}}
	var (
		measuring atomic.Bool
		stop      atomic.Bool
		errors    atomic.Int64
		wg        sync.WaitGroup
		rec       = stats.NewRecorder()
	)
	for c := 0; c < o.Clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; !stop.Load(); i++ {
				start := time.Now()
				req, err := http.NewRequest(http.MethodPost, url+"/api/v1/push", bytes.NewReader(bodies[i%o.Partitions]))
				if err != nil {
					errors.Add(1)
					continue
				}
				req.Header.Set("Content-Type", "application/json")
				if o.Token != "" {
					req.Header.Set("Authorization", "Bearer "+o.Token)
				}
				resp, err := client.Do(req)
				if err != nil {
					errors.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					errors.Add(1)
					continue
				}
				if measuring.Load() {
					rec.Observe(time.Since(start), o.Batch)
				}
			}
		}(c)
	}
	elapsed := measure(&measuring, o.Warmup, o.Duration)
	stop.Store(true)
	wg.Wait()
	r := rec.Result(elapsed)
	r.Errors = errors.Load()
	return r
}
