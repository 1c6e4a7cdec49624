package workload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queen-mq/queen/bench/node"
	"github.com/queen-mq/queen/e2e/harness"
)

// PartitionsOptions shape the many-partitions benchmark.
type PartitionsOptions struct {
	Nodes, Partitions, Pushers, Consumers, Size int
	// Cleanup, when set, starts the nodes with that PARTITION_CLEANUP_DAYS
	// and, after the drains, turns on completed retention and measures how
	// long the removal of the emptied partitions takes, and the RSS after.
	Cleanup time.Duration
}

// Register adds the options as flags with their defaults.
func (o *PartitionsOptions) Register(fs *flag.FlagSet) {
	fs.IntVar(&o.Nodes, "nodes", 1, "nodes to start (1 or 3)")
	fs.IntVar(&o.Partitions, "partitions", 10_000_000, "distinct partitions of the queue, one message each")
	fs.IntVar(&o.Pushers, "pushers", 8, "concurrent push clients (1000 items per request)")
	fs.IntVar(&o.Consumers, "consumers", 8, "concurrent consumers per drain")
	fs.IntVar(&o.Size, "size", 64, "payload bytes per message")
	fs.DurationVar(&o.Cleanup, "cleanup", 0, "after the drains, empty the partitions by retention and time their removal as idle after this long (0: skip)")
}

// Partitions measures what many logical partitions cost one queue: every
// message goes to its own partition, then two consumer groups drain the
// queue with pops of partitions=64, one with leases and batch acks, one
// with auto-ack. It prints the push and drain rates, each node's peak and
// resting RSS, the time a restarted node takes to answer /health, and the
// median time of the paged views.
func Partitions(o PartitionsOptions, start node.Starter, w io.Writer) error {
	if o.Partitions < 1 || o.Pushers < 1 || o.Consumers < 1 || o.Nodes != 1 && o.Nodes != 3 {
		return fmt.Errorf("%w: partitions, pushers and consumers must be at least 1, nodes 1 or 3", ErrOptions)
	}
	var env map[string]string
	if o.Cleanup > 0 {
		env = map[string]string{"PARTITION_CLEANUP_DAYS": strconv.FormatFloat(o.Cleanup.Hours()/24, 'g', -1, 64)}
	}
	c, stop, err := start(o.Nodes, env)
	if err != nil {
		return err
	}
	defer stop()
	b := &bench{url: c.Nodes[0].URL(), client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}}
	const queue = "many"
	fmt.Fprintf(w, "partitions nodes=%d partitions=%d size=%dB pushers=%d consumers=%d cleanup=%v\n", o.Nodes, o.Partitions, o.Size, o.Pushers, o.Consumers, o.Cleanup)
	printRSS(w, "idle", c)

	began := time.Now()
	if err := b.pushMany(queue, o.Partitions, o.Size, o.Pushers, 1000, func(i int) int { return i }); err != nil {
		return fmt.Errorf("push: %w", err)
	}
	rate(w, "push", o.Partitions, time.Since(began))
	printRSS(w, "after push", c)

	for _, d := range []struct {
		group  string
		leased bool
	}{{"leases", true}, {"autoack", false}} {
		began := time.Now()
		n, err := b.drain(queue, d.group, d.leased, o.Partitions, o.Consumers)
		if err != nil {
			return fmt.Errorf("drain %s: %w", d.group, err)
		}
		rate(w, "drain "+d.group, n, time.Since(began))
	}
	printRSS(w, "after drains", c)

	for _, v := range []string{
		"/api/v1/resources/queues/" + queue + "?limit=100",
		"/api/v1/status/queues/" + queue + "?limit=100",
		"/api/v1/resources/partitions?queue=" + queue + "&limit=100",
		"/api/v1/resources/queues?limit=100",
	} {
		med, bytes, err := b.viewMedian(v, 11)
		if err != nil {
			return fmt.Errorf("view %s: %w", v, err)
		}
		fmt.Fprintf(w, "  view %-52s median %v (%d bytes)\n", v, med.Round(10*time.Microsecond), bytes)
	}

	if o.Cleanup > 0 {
		if err := b.cleanup(w, queue, c); err != nil {
			return fmt.Errorf("cleanup: %w", err)
		}
	}

	// A restart: each node stops (SIGTERM) and starts again; the time to
	// a healthy /health is its boot time. A clean stop leaves each group a
	// load image; a SIGKILL leaves none, and that boot reads every
	// partition back (storage/image.go): both are measured.
	for _, n := range c.Nodes {
		began := time.Now()
		n.Stop()
		fmt.Fprintf(w, "  stop node %d (SIGTERM): %v\n", n.ID, time.Since(began).Round(time.Millisecond))
		if err := restart(w, c, n, "after a clean stop"); err != nil {
			return err
		}
	}
	printRSS(w, "at rest after the restart", c)
	for _, n := range c.Nodes {
		n.Kill()
		if err := restart(w, c, n, "after SIGKILL"); err != nil {
			return err
		}
	}
	printRSS(w, "at rest after a SIGKILL", c)

	// Last, as it changes what a boot reads: a seek of the whole queue and
	// a group delete, each a walk over every partition in raft entries of
	// wire.GroupStepLimit partitions. Either may outlast the node's
	// statement timeout (QUEEN_STMT_TIMEOUT_MS): that is a figure too.
	for _, op := range []struct{ what, method, path, body string }{
		{"seek leases to the end", http.MethodPost, "/api/v1/consumer-groups/leases/queues/" + queue + "/seek", `{"toEnd":true}`},
		{"delete group autoack", http.MethodDelete, "/api/v1/consumer-groups/autoack/queues/" + queue, ""},
	} {
		began := time.Now()
		status, answer, err := b.do(op.method, op.path, op.body)
		took := time.Since(began).Round(time.Millisecond)
		if err != nil {
			fmt.Fprintf(w, "  %-30s failed after %v: %v\n", op.what, took, err)
			continue
		}
		fmt.Fprintf(w, "  %-30s %v: %d %s\n", op.what, took, status, answer)
	}
	printRSS(w, "after the seek and delete", c)
	return nil
}

// do sends one request and returns its status and (at most 256 bytes of)
// its answer.
func (b *bench) do(method, path, body string) (int, string, error) {
	req, err := http.NewRequest(method, b.url+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	return resp.StatusCode, string(answer), err
}

// restart starts a stopped node and prints how long it took to answer
// /health.
func restart(w io.Writer, c *harness.Cluster, n *harness.Node, how string) error {
	began := time.Now()
	if err := c.Start(n); err != nil {
		return fmt.Errorf("restart node %d: %w", n.ID, err)
	}
	if err := waitHealthy(n, 5*time.Minute); err != nil {
		return fmt.Errorf("restart node %d: %w", n.ID, err)
	}
	fmt.Fprintf(w, "  boot node %d to healthy %s: %v\n", n.ID, how, time.Since(began).Round(time.Millisecond))
	return nil
}

// cleanup turns on the queue's completed retention (every message is
// consumed by both groups now), then waits until the queue lists no
// partition: retention empties them, the cleanup removes them once idle
// for the nodes' age. It prints how long that took from the configure.
func (b *bench) cleanup(w io.Writer, queue string, c *harness.Cluster) error {
	body := fmt.Sprintf(`{"queue":%q,"options":{"retentionEnabled":true,"completedRetentionSeconds":1}}`, queue)
	if code, err := b.post("/api/v1/configure", []byte(body), nil); err != nil || code != http.StatusOK {
		return fmt.Errorf("configure retention: %d %v", code, err)
	}
	began, said := time.Now(), time.Now()
	for {
		var list struct {
			Queues []struct {
				Name       string
				Partitions int
			}
		}
		if err := b.getJSON("/api/v1/resources/queues?limit=100", &list); err != nil {
			// The node is busy removing millions of partitions: a view
			// may time out meanwhile; say so and ask again.
			if errors.Is(err, errStatus) && time.Since(began) < time.Hour {
				fmt.Fprintf(w, "  cleanup: at %v, %v\n", time.Since(began).Round(time.Second), err)
				time.Sleep(time.Second)
				continue
			}
			return err
		}
		left := 0
		for _, q := range list.Queues {
			if q.Name == queue {
				left = q.Partitions
			}
		}
		if left == 0 {
			break
		}
		if time.Since(said) >= 30*time.Second {
			said = time.Now()
			fmt.Fprintf(w, "  cleanup: at %v, %d partitions left\n", time.Since(began).Round(time.Second), left)
		}
		if time.Since(began) > time.Hour {
			return fmt.Errorf("%d partitions left after an hour", left)
		}
		time.Sleep(time.Second)
	}
	fmt.Fprintf(w, "  cleanup: every partition removed %v after retention was turned on\n", time.Since(began).Round(time.Second))
	printRSS(w, "after the cleanup", c)
	return nil
}

// errStatus marks an answer other than 200.
var errStatus = errors.New("unexpected status")

// getJSON reads a 200 answer of path into out.
func (b *bench) getJSON(path string, out any) error {
	resp, err := b.client.Get(b.url + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %d %s: %w", path, resp.StatusCode, msg, errStatus)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// pushMany pushes n messages of size bytes, message i to partition
// "p<partOf(i)>", perRequest items per request from writers concurrent
// clients.
func (b *bench) pushMany(queue string, n, size, writers, perRequest int, partOf func(i int) int) error {
	payload := strings.Repeat("x", max(size-2, 0))
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for {
				from := int(next.Add(int64(perRequest))) - perRequest
				if from >= n {
					return
				}
				buf.Reset()
				buf.WriteString(`{"items":[`)
				for i := from; i < min(from+perRequest, n); i++ {
					if i > from {
						buf.WriteByte(',')
					}
					fmt.Fprintf(&buf, `{"queue":%q,"partition":"p%d","payload":"%s"}`, queue, partOf(i), payload)
				}
				buf.WriteString(`]}`)
				if err := b.pushRetrying(buf.Bytes()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// pushRetrying posts one push, again while the node answers a retriable
// 429 or 503 (items carry no transaction id, so a retry after an unknown
// outcome can store a message twice: the drain counts at least n).
func (b *bench) pushRetrying(body []byte) error {
	for try := 0; ; try++ {
		code, err := b.post("/api/v1/push", body, nil)
		if err == nil && code == http.StatusCreated {
			return nil
		}
		if try == 20 || err == nil && code != http.StatusTooManyRequests && code != http.StatusServiceUnavailable {
			return fmt.Errorf("push answered %d: %v", code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// drain has consumer group group pop the queue from its start, 64
// partitions per pop, from consumers concurrent clients until want
// messages came, acking each batch when leased (else the pops auto-ack),
// and answers how many did.
func (b *bench) drain(queue, group string, leased bool, want, consumers int) (int, error) {
	var got, empties atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, consumers)
	path := fmt.Sprintf("/api/v1/pop/queue/%s?batch=64&partitions=64&consumerGroup=%s&subscriptionMode=all&autoAck=%t", queue, group, !leased)
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for got.Load() < int64(want) {
				var a popAnswer
				var err error
				if leased {
					a, _, _, err = b.popAndAck(path, group)
				} else {
					a, err = b.pop(path)
				}
				if err != nil {
					errs <- err
					return
				}
				got.Add(int64(len(a.Messages)))
				// Every message is pushed before the drain: a run of empty
				// pops means the queue lost some.
				if len(a.Messages) == 0 && empties.Add(1) > 1000 {
					errs <- fmt.Errorf("1000 empty pops with %d of %d drained", got.Load(), want)
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return int(got.Load()), err
	default:
		return int(got.Load()), nil
	}
}

func (b *bench) pop(path string) (popAnswer, error) {
	resp, err := b.client.Get(b.url + path)
	if err != nil {
		return popAnswer{}, err
	}
	defer resp.Body.Close()
	var a popAnswer
	switch resp.StatusCode {
	case http.StatusOK:
		err = json.NewDecoder(resp.Body).Decode(&a)
	case http.StatusNoContent:
	default:
		err = fmt.Errorf("pop answered %d", resp.StatusCode)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return a, err
}

// viewMedian GETs path n times and answers the median time and the
// answer's size.
func (b *bench) viewMedian(path string, n int) (time.Duration, int, error) {
	times := make([]time.Duration, 0, n)
	size := 0
	for range n {
		began := time.Now()
		resp, err := b.client.Get(b.url + path)
		if err != nil {
			return 0, 0, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return 0, 0, fmt.Errorf("answered %d: %v", resp.StatusCode, err)
		}
		times = append(times, time.Since(began))
		size = len(body)
	}
	slices.Sort(times)
	return times[n/2], size, nil
}

func rate(w io.Writer, what string, n int, d time.Duration) {
	fmt.Fprintf(w, "  %-14s %d messages in %v: %.0f msg/s\n", what, n, d.Round(time.Millisecond), float64(n)/d.Seconds())
}

// printRSS prints each node's resident memory now and at its peak
// (VmRSS and VmHWM of /proc/<pid>/status; Linux only).
func printRSS(w io.Writer, when string, c *harness.Cluster) {
	for _, n := range c.Nodes {
		rss, peak := procMemory(n.Pid())
		fmt.Fprintf(w, "  rss %-26s node %d: %d MiB (peak %d MiB)\n", when, n.ID, rss>>20, peak>>20)
	}
}

func procMemory(pid int) (rss, peak int64) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	return rss, peak
}

func waitHealthy(n *harness.Node, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return n.WaitHealthy(ctx)
}
