package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// rollErrors counts what reached the clients of a rolling restart after
// their own retries, by kind, with the first few for the failure message.
type rollErrors struct {
	mu    sync.Mutex
	count map[string]int
	first []string
}

func (e *rollErrors) add(kind string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.count[kind]++
	if len(e.first) < 10 {
		e.first = append(e.first, fmt.Sprintf("%s: %v", kind, err))
	}
}

func (e *rollErrors) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fmt.Sprint(e.count, e.first)
}

// seen counts deliveries per value.
type seen struct {
	mu sync.Mutex
	m  map[string]int
}

func (s *seen) add(v string) {
	s.mu.Lock()
	s.m[v]++
	s.mu.Unlock()
}

// check returns how many of want were delivered and the values
// delivered more than once.
func (s *seen) check(want []string) (got int, dups []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range want {
		if s.m[v] > 0 {
			got++
		}
	}
	for v, n := range s.m {
		if n > 1 {
			dups = append(dups, v)
		}
	}
	return got, dups
}

// httpRetry is an HTTP client's ordinary retry: a request that fails to
// connect, is cut off or answered 502/503/504 goes to the next node, for up
// to 15 s. It returns the final status; an error means the retries did not
// absorb the failure.
func httpRetry(ctx context.Context, nodes []*harness.Node, start int, method, path string, body, out any) (int, error) {
	var last error
	give := time.Now().Add(15 * time.Second)
	for i := start; time.Now().Before(give) && ctx.Err() == nil; i++ {
		n := nodes[i%len(nodes)]
		code, err := e2etest.Call(ctx, method, n.URL()+path, body, out)
		switch {
		case err != nil:
			last = err
		case code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout:
			last = fmt.Errorf("%s %s: %d", method, path, code)
		default:
			return code, nil
		}
		t := time.NewTimer(50 * time.Millisecond) // backoff, not synchronisation
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	return 0, errors.Join(errors.New("retries exhausted"), last)
}

// TestRollingRestartUnderLoad restarts the three nodes one at a time
// (SIGTERM, start, healthy) while a franz-go idempotent producer writes, a
// franz-go consumer group of two reads, and HTTP clients push, pop and ack.
// No client sees an error its ordinary retries do not absorb, every record
// and message arrives exactly once, and the consumer group never spends
// longer than its session timeout rebalancing.
func TestRollingRestartUnderLoad(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: e2etest.GroupEnv})
	ctx := e2etest.Deadline(t, 4*time.Minute)
	var seeds []string
	for _, n := range c.Nodes {
		seeds = append(seeds, n.KafkaAddr)
	}
	admin := e2etest.KafkaClient(t, c.Nodes[0])
	e2etest.WaitBrokers(ctx, t, admin, 3)
	e2etest.CreateTopicOn(ctx, t, admin, "roll", 4)
	errs := &rollErrors{count: map[string]int{}}
	kSeen, hSeen := &seen{m: map[string]int{}}, &seen{m: map[string]int{}}
	// Kafka's shortest session by default (group.min.session.timeout.ms).
	// franz-go retries a JoinGroup, SyncGroup or Heartbeat for at most the
	// session timeout, counted from when it was first sent: a join parked
	// at a coordinator for a few seconds, then told NOT_COORDINATOR as
	// that node stops, has only what is left to find the next one. With
	// 3 s, one run in six under load ran out ("unable to join group
	// session: unable to dial") while the stopping node restarted.
	const session = 6 * time.Second

	// The consumer group: two members, rebalance times measured from a
	// revocation or loss to the next assignment.
	var rebalanceMu sync.Mutex
	var longest time.Duration
	revokedAt := map[string]time.Time{}
	gen := func(name string) []kgo.Opt {
		begin := func(context.Context, *kgo.Client, map[string][]int32) {
			rebalanceMu.Lock()
			revokedAt[name] = time.Now()
			rebalanceMu.Unlock()
		}
		return []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID(name), kgo.ConsumerGroup("roll-group"),
			kgo.ConsumeTopics("roll"), kgo.SessionTimeout(session), kgo.HeartbeatInterval(300 * time.Millisecond),
			kgo.RebalanceTimeout(10 * time.Second), kgo.FetchMaxWait(200 * time.Millisecond),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.Balancers(kgo.CooperativeStickyBalancer()),
			// A revoke callback of one's own replaces franz-go's, which
			// commits before partitions move (cooperative rebalances move
			// some even without a fault): commit here as it would, or the
			// next owner reads the uncommitted records again.
			kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
				begin(ctx, cl, m)
				if err := cl.CommitUncommittedOffsets(ctx); err != nil && !errors.Is(err, context.Canceled) {
					errs.add("kafka commit on revoke", err)
				}
			}),
			kgo.OnPartitionsLost(begin),
			kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
				rebalanceMu.Lock()
				if at, ok := revokedAt[name]; ok {
					longest = max(longest, time.Since(at))
					delete(revokedAt, name)
				}
				rebalanceMu.Unlock()
			})}
	}
	var wg sync.WaitGroup
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer func() { stopLoad(); wg.Wait() }()
	consumeCtx, stopConsume := context.WithCancel(ctx)
	defer stopConsume()
	for _, name := range []string{"r0", "r1"} {
		cl, err := kgo.NewClient(gen(name)...)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for consumeCtx.Err() == nil {
				fs := cl.PollFetches(consumeCtx)
				fs.EachError(func(topic string, p int32, err error) {
					if !errors.Is(err, context.Canceled) {
						errs.add("kafka fetch", fmt.Errorf("%s/%d: %w", topic, p, err))
					}
				})
				fs.EachRecord(func(r *kgo.Record) { kSeen.add(string(r.Value)) })
			}
		}()
	}

	// The idempotent producer (franz-go's default), one record at a time
	// so every produced value is known.
	producer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("roll-producer"),
		kgo.DefaultProduceTopic("roll"), kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	var prodMu sync.Mutex
	var produced []string
	var slowest time.Duration // the longest a record took to be acknowledged
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; loadCtx.Err() == nil; i++ {
			v := fmt.Sprintf("k-%d", i)
			began := time.Now()
			if err := producer.ProduceSync(loadCtx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
				if loadCtx.Err() == nil {
					errs.add("kafka produce", err)
				}
				continue
			}
			prodMu.Lock()
			produced = append(produced, v)
			slowest = max(slowest, time.Since(began))
			prodMu.Unlock()
		}
	}()

	// HTTP: a pusher (transaction ids make its retries idempotent) and a
	// popper that acks what it pops, each on its own node, moving on when
	// that node goes away.
	var pushed []string
	var pushMu sync.Mutex
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; loadCtx.Err() == nil; i++ {
			v := fmt.Sprintf("h-%d", i)
			item := e2etest.PushItem{Queue: "roll-jobs", Partition: fmt.Sprint(i % 3), Payload: map[string]string{"v": v}, TransactionID: v}
			code, err := httpRetry(loadCtx, c.Nodes, i, http.MethodPost, "/api/v1/push", map[string]any{"items": []e2etest.PushItem{item}}, nil)
			if err == nil && code != http.StatusCreated {
				err = fmt.Errorf("status %d", code)
			}
			if err != nil {
				if loadCtx.Err() == nil {
					errs.add("http push", err)
				}
				continue
			}
			pushMu.Lock()
			pushed = append(pushed, v)
			pushMu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		for i := 1; consumeCtx.Err() == nil; i++ {
			var out e2etest.PopAnswer
			code, err := httpRetry(consumeCtx, c.Nodes, i, http.MethodGet, "/api/v1/pop/queue/roll-jobs?batch=20&wait=true&timeout=500", nil, &out)
			if err == nil && code != http.StatusOK && code != http.StatusNoContent {
				err = fmt.Errorf("pop status %d", code)
			}
			if err != nil {
				if consumeCtx.Err() == nil {
					errs.add("http pop", err)
				}
				continue
			}
			for _, m := range out.Messages {
				var p struct{ V string }
				_ = json.Unmarshal(m.Data, &p)
				hSeen.add(p.V)
				ack := map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": "completed"}
				code, err := httpRetry(consumeCtx, c.Nodes, i, http.MethodPost, "/api/v1/ack", ack, nil)
				if err == nil && code >= 300 {
					err = fmt.Errorf("ack status %d", code)
				}
				if err != nil && consumeCtx.Err() == nil {
					errs.add("http ack", err)
				}
			}
		}
	}()

	// librdkafka, when kcat is installed (.ci/run installs it).
	var kl *kcatLoad
	if _, err := exec.LookPath("kcat"); err == nil {
		// A partition in each raft group, so the producer needs every broker
		// once leadership is balanced (see leadsAgain).
		e2etest.CreateTopicOn(ctx, t, admin, "roll-kcat", 3)
		kl = startKcatLoad(ctx, t, strings.Join(seeds, ","), "roll-kcat")
		wg.Add(1)
		go func() { defer wg.Done(); kl.feed(loadCtx) }()
	} else {
		t.Log("kcat is not installed: librdkafka clients not run")
	}

	progress := func(what string) {
		t.Helper()
		prodMu.Lock()
		k := len(produced)
		prodMu.Unlock()
		pushMu.Lock()
		h := len(pushed)
		pushMu.Unlock()
		if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
			prodMu.Lock()
			defer prodMu.Unlock()
			pushMu.Lock()
			defer pushMu.Unlock()
			return len(produced) >= k+20 && len(pushed) >= h+20, nil
		}); err != nil {
			t.Fatalf("no progress %s: %v (errors %v)", what, err, errs)
		}
	}
	progress("before the restarts")
	for _, n := range c.Nodes {
		start := time.Now()
		n.Stop()
		if code := n.ExitCode(); code != 0 {
			t.Fatalf("node %d exited %d on SIGTERM", n.ID, code)
		}
		t.Logf("node %d stopped in %v", n.ID, time.Since(start))
		for _, line := range strings.Split(n.Log(), "\n") {
			if strings.Contains(line, "shutdown:") || strings.Contains(line, "hand") || strings.Contains(line, "membership") {
				t.Logf("node %d: %s", n.ID, line)
			}
		}
		if err := c.Start(n); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitAllHealthy(ctx); err != nil {
			t.Fatal(err)
		}
		e2etest.WaitBrokers(ctx, t, admin, 3)
		leadsAgain(ctx, t, n)
		progress(fmt.Sprintf("after restarting node %d", n.ID))
	}
	stopLoad()
	var wantC []string
	if kl != nil {
		wantC = kl.stopProducing(ctx, t)
	}

	// Everything written is read, once.
	prodMu.Lock()
	wantK := produced
	prodMu.Unlock()
	pushMu.Lock()
	wantH := pushed
	pushMu.Unlock()
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		k, _ := kSeen.check(wantK)
		h, _ := hSeen.check(wantH)
		c := len(wantC)
		if kl != nil {
			c, _ = kl.seen.check(wantC)
		}
		return k == len(wantK) && h == len(wantH) && c == len(wantC), nil
	}); err != nil {
		k, _ := kSeen.check(wantK)
		h, _ := hSeen.check(wantH)
		var c int
		var kcatLog string
		if kl != nil {
			c, _ = kl.seen.check(wantC)
			kcatLog = kl.stderrString()
			kcatLog = kcatLog[max(0, len(kcatLog)-3000):]
		}
		t.Fatalf("consumed %d of %d Kafka records, %d of %d HTTP messages, %d of %d kcat records: %v\nkcat's diagnostics:\n%s",
			k, len(wantK), h, len(wantH), c, len(wantC), err, kcatLog)
	}
	stopConsume()
	wg.Wait()
	_, kDups := kSeen.check(wantK)
	_, hDups := hSeen.check(wantH)
	t.Logf("%d Kafka records (slowest acknowledged in %v), %d HTTP messages; longest rebalance %v", len(wantK), slowest, len(wantH), longest)
	if len(errs.count) > 0 {
		t.Errorf("errors reached the clients: %v", errs)
	}
	if len(kDups) > 0 || len(hDups) > 0 {
		t.Errorf("delivered more than once: %d Kafka records (%.10v), %d HTTP messages (%.10v)", len(kDups), kDups, len(hDups), hDups)
	}
	if kl != nil {
		_, cDups := kl.seen.check(wantC)
		t.Logf("%d kcat records", len(wantC))
		if errs := kl.errors(); len(errs) > 0 {
			t.Errorf("kcat reported errors: %q", errs)
		}
		if len(cDups) > 0 {
			t.Errorf("kcat records delivered more than once: %.10v", cDups)
		}
	}
	if longest > session {
		t.Errorf("a rebalance took %v, longer than the %v session timeout", longest, session)
	}
}

// leadsAgain waits until the restarted node n leads a raft group again (the
// preferred-leader balance moves its share back within a few seconds), as
// the rolling-restart procedure in docs/operations.md asks. Clients that
// connect only to the brokers they need (librdkafka) reconnect to it then;
// stopping the next node before that leaves every broker they know
// disconnected since its last use, which librdkafka reports as "all
// brokers down" and kcat exits on.
func leadsAgain(ctx context.Context, t *testing.T, n *harness.Node) {
	t.Helper()
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		groups, err := e2etest.GroupsOf(ctx, n)
		if err != nil {
			return false, nil
		}
		for _, g := range groups {
			if g.Leader == uint64(n.ID) {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("node %d leads no raft group after its restart: %v", n.ID, err)
	}
}
