// Command httppush measures HTTP push throughput and latency: many
// concurrent clients push batches of fixed-size messages to a queen node for
// a fixed time, and it prints messages/s, MB/s and request latency
// percentiles. It starts its own node or 3-node cluster (built from this
// checkout, temp data dirs, free ports) unless -url points at one.
//
//	go run ./bench/httppush -nodes 1
//	go run ./bench/httppush -nodes 3 -clients 128
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queen-mq/queen/bench/internal/node"
	"github.com/queen-mq/queen/bench/internal/stats"
)

func main() {
	var (
		nodes      = flag.Int("nodes", 1, "start this many nodes (1 or 3) unless -url is given")
		url        = flag.String("url", "", "push to this node instead of starting one")
		clients    = flag.Int("clients", 64, "concurrent HTTP clients")
		batch      = flag.Int("batch", 100, "messages per push request")
		size       = flag.Int("size", 1024, "payload bytes per message")
		partitions = flag.Int("partitions", 16, "partitions to spread pushes over")
		duration   = flag.Duration("duration", 15*time.Second, "how long to push")
		warmup     = flag.Duration("warmup", 2*time.Second, "pushes before measuring")
	)
	flag.Parse()
	target := *url
	if target == "" {
		stop, u, err := startNodes(*nodes)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer stop()
		target = u
	}
	res := run(target, *clients, *batch, *size, *partitions, *warmup, *duration)
	fmt.Printf("httppush nodes=%d clients=%d batch=%d size=%dB partitions=%d duration=%s\n",
		*nodes, *clients, *batch, *size, *partitions, *duration)
	res.Print(os.Stdout, "msg", float64(*size))
}

// startNodes starts a node or a 3-node cluster and returns the URL of a
// follower (of a cluster) to push to, so writes take the forwarded path.
func startNodes(n int) (func(), string, error) {
	stop, urls, err := node.Start(n, nil)
	if err != nil {
		return nil, "", err
	}
	return stop, urls[0], nil
}

func run(url string, clients, batch, size, partitions int, warmup, duration time.Duration) stats.Result {
	payload := strings.Repeat("x", size-2) // a JSON string of size bytes with its quotes
	bodies := make([][]byte, partitions)
	for p := range bodies {
		var b bytes.Buffer
		b.WriteString(`{"items":[`)
		for i := 0; i < batch; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"queue":"bench","partition":"p%d","payload":"%s"}`, p, payload)
		}
		b.WriteString(`]}`)
		bodies[p] = b.Bytes()
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}}
	var (
		measuring atomic.Bool
		stop      atomic.Bool
		errors    atomic.Int64
		wg        sync.WaitGroup
		rec       = stats.NewRecorder()
	)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; !stop.Load(); i++ {
				start := time.Now()
				resp, err := client.Post(url+"/api/v1/push", "application/json", bytes.NewReader(bodies[i%partitions]))
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
					rec.Observe(time.Since(start), batch)
				}
			}
		}(c)
	}
	time.Sleep(warmup)
	measuring.Store(true)
	began := time.Now()
	time.Sleep(duration)
	measuring.Store(false)
	elapsed := time.Since(began)
	stop.Store(true)
	wg.Wait()
	r := rec.Result(elapsed)
	r.Errors = errors.Load()
	return r
}
