// Command dashboard measures how long each page of the web dashboard takes
// to show its data in a headless Chromium on one node holding -queues
// queues with -partitions partitions in all (one message each), a
// consumer group on a tenth of the queues and a few dead letters: from
// the navigation to the page's tables filled, the median of -runs rounds
// over every page.
// It starts its own node (built from this checkout, temp data dir, free
// ports) and needs Debian's chromium package.
//
//	go run ./bench/dashboard                       # 1,000 queues, 10,000 partitions
//	go run ./bench/dashboard -queues 100 -partitions 100000
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/queen-mq/queen/bench/node"
	"github.com/queen-mq/queen/bench/workload"
	"github.com/queen-mq/queen/e2e/browser"
)

type options struct {
	queues, partitions, runs int
}

func (o *options) register(fs *flag.FlagSet) {
	fs.IntVar(&o.queues, "queues", 1000, "queues")
	fs.IntVar(&o.partitions, "partitions", 10000, "partitions over all queues, spread evenly")
	fs.IntVar(&o.runs, "runs", 5, "loads of each page (the median is shown)")
}

func main() {
	var o options
	workload.Main(o.register, func(start node.Starter, w io.Writer) error { return run(o, start, w) })
}

// page is one dashboard route and the condition that says it shows its
// data: its main table has rows, and no tile still waits for a number.
type page struct {
	name, hash string
}

const shown = `(() => {
	const v = document.getElementById("view");
	if (!v || !v.querySelector("tbody tr")) return false;
	return ![...v.querySelectorAll(".value")].some((e) => e.innerText === "…");
})()`

func run(o options, start node.Starter, w io.Writer) error {
	if o.queues < 1 || o.partitions < o.queues || o.runs < 1 {
		return fmt.Errorf("need 1 <= queues <= partitions and runs >= 1")
	}
	c, stop, err := start(1, nil)
	if err != nil {
		return err
	}
	defer stop()
	base := c.Nodes[0].URL()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	began := time.Now()
	if err := load(ctx, base, o); err != nil {
		return err
	}
	fmt.Fprintf(w, "loaded %d queues, %d partitions in %s\n", o.queues, o.partitions, time.Since(began).Round(time.Millisecond))

	bctx, stopBrowser, err := browser.Start(1280, 860)
	if err != nil {
		return err
	}
	defer stopBrowser()
	mid := fmt.Sprintf("q-%05d", o.queues/2)
	pages := []page{
		{"Overview", "#/overview"}, {"Queues", "#/queues"}, {"Queue " + mid, "#/queues/" + mid},
		{"Consumer groups", "#/groups"}, {"Group bench-g", "#/groups/bench-g"}, {"Dead letters", "#/dlq"},
		{"Kafka topics", "#/topics"}, {"Topic " + mid, "#/topics/" + mid}, {"System", "#/system"},
	}
	// One load first, not counted: Chromium's first page pays for its own
	// start (caches, compiling the modules). Then rounds of every page in
	// turn, so a burst of other work on the machine spreads over all pages.
	if _, err := timeLoad(bctx, base, pages[0]); err != nil {
		return err
	}
	times := make([][]time.Duration, len(pages))
	for range o.runs {
		for i, p := range pages {
			d, err := timeLoad(bctx, base, p)
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			times[i] = append(times[i], d)
		}
	}
	fmt.Fprintf(w, "\n| page | median load | slowest of %d |\n|---|---|---|\n", o.runs)
	for i, p := range pages {
		slices.Sort(times[i])
		fmt.Fprintf(w, "| %s | %s | %s |\n", p.name, times[i][len(times[i])/2].Round(time.Millisecond), times[i][len(times[i])-1].Round(time.Millisecond))
	}
	return nil
}

// timeLoad opens a blank page, then the dashboard page, and times until
// its data shows.
func timeLoad(bctx context.Context, base string, p page) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(bctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"+p.hash)); err != nil {
		return 0, err
	}
	// A poll started while the navigation still swaps documents loses its
	// execution context; it is started again on the new one.
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](shown, chromedp.WithPollingTimeout(30*time.Second)))
		if err == nil {
			return time.Since(t0), nil
		}
		if !strings.Contains(err.Error(), "Cannot find context") || ctx.Err() != nil {
			return 0, err
		}
	}
}

// load pushes one message to every partition (queue q-NNNNN, partition
// p-N), has group bench-g consume from every tenth queue, and dead-letters
// a few messages.
func load(ctx context.Context, base string, o options) error {
	for q := 0; q < min(50, o.queues); q += 10 {
		cfg := map[string]any{"queue": fmt.Sprintf("q-%05d", q), "options": map[string]any{"retryLimit": 0}}
		if err := call(ctx, http.MethodPost, base+"/api/v1/configure", cfg, nil); err != nil {
			return err
		}
	}
	per := o.partitions / o.queues
	var items []map[string]any
	flush := func() error {
		if len(items) == 0 {
			return nil
		}
		err := call(ctx, http.MethodPost, base+"/api/v1/push", map[string]any{"items": items}, nil)
		items = items[:0]
		return err
	}
	for q := range o.queues {
		n := per
		if q < o.partitions%o.queues {
			n++
		}
		for p := range n {
			items = append(items, map[string]any{"queue": fmt.Sprintf("q-%05d", q), "partition": fmt.Sprintf("p-%d", p), "payload": map[string]int{"q": q, "p": p}})
			if len(items) == 5000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	for q := 0; q < o.queues; q += 10 {
		var ans struct {
			Messages []struct{ TransactionID, PartitionID, LeaseID string }
		}
		path := fmt.Sprintf("%s/api/v1/pop/queue/q-%05d?batch=1&consumerGroup=bench-g&subscriptionMode=all", base, q)
		if err := call(ctx, http.MethodGet, path, nil, &ans); err != nil {
			return err
		}
		status := "completed"
		if q < 50 {
			status = "failed" // retryLimit 0 (above): straight to the DLQ
		}
		for _, m := range ans.Messages {
			ack := map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID,
				"consumerGroup": "bench-g", "status": status, "error": "bench"}
			if err := call(ctx, http.MethodPost, base+"/api/v1/ack", ack, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

func call(ctx context.Context, method, url string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	if out != nil && len(b) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}
