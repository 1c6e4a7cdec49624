package faults

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// The fault suite's workload: real clients of both doors work while a test
// injects faults, and each keeps its own record of what the cluster told
// it (fault_check_test.go judges those records against the logs).
//
//   - Idempotent Kafka producers (franz-go, acks=all, the default
//     idempotence) write values "k<producer>-<seq>", seq 0, 1, 2, ...
//     spread round robin over the topic's partitions.
//   - HTTP pushers push batches of numbered messages ("h<pusher>-<seq>"
//     as transactionId) to one partition at a time, retrying a batch with
//     the same transaction ids, on another node, until it is acknowledged.
//   - A Kafka consumer group of two members consumes the topic.
//   - HTTP consumers, one per node, pop the queue with leases and ack
//     every message they get.

const (
	faultTopic = "faults"
	faultQueue = "faultq"
	faultGroup = "fault-group"
)

type workloadConfig struct {
	KafkaProducers, KafkaPartitions int
	HTTPPushers, HTTPPartitions     int
	KafkaConsumers                  int // members of the consumer group
	// PushTimeout bounds one push or pop attempt, so a client stuck on a
	// node that cannot commit moves to another one.
	PushTimeout time.Duration
	// LeaseSeconds is the HTTP consumers' lease: an ack that failed is
	// redelivered that long after the pop.
	LeaseSeconds int
}

func defaultWorkload() workloadConfig {
	return workloadConfig{KafkaProducers: 2, KafkaPartitions: 6, HTTPPushers: 2, HTTPPartitions: 6,
		KafkaConsumers: 2, PushTimeout: 3 * time.Second, LeaseSeconds: 8}
}

type workload struct {
	t   *testing.T
	c   *harness.Cluster
	cfg workloadConfig
	led *ledger

	stopWrites context.CancelFunc // producers and pushers
	stopReads  context.CancelFunc // consumers
	writers    sync.WaitGroup
	readers    sync.WaitGroup
	producers  []*kgo.Client
	consumers  []*kgo.Client
	klog       *e2etest.RingLog // the Kafka clients' log, shown when they misbehave
}

// kafkaView is what each broker answers for the workload topic's
// partitions (leader, epoch, error), and each node's view of its groups.
func (w *workload) kafkaView(ctx context.Context) string {
	return brokerViews(ctx, w.c, faultTopic) + "\n" + w.groupViews()
}

// brokerViews asks every node, as a Kafka broker, for topic's metadata:
// the brokers it lists, and each partition's leader, epoch and error.
func brokerViews(ctx context.Context, c *harness.Cluster, topic string) string {
	var out []string
	for _, n := range c.Nodes {
		// A client seeded with this node alone, asking its seed: what
		// this broker answers, whatever the others say.
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.ClientID("fault-inspector"))
		if err != nil {
			out = append(out, fmt.Sprintf("broker %d: %v", n.ID, err))
			continue
		}
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := req.RequestWith(rctx, cl.SeedBrokers()[0])
		cancel()
		cl.Close()
		if err != nil {
			out = append(out, fmt.Sprintf("broker %d: %v", n.ID, err))
			continue
		}
		var ids []int32
		for _, b := range resp.Brokers {
			ids = append(ids, b.NodeID)
		}
		v := fmt.Sprintf("broker %d lists brokers %v;", n.ID, ids)
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				v += fmt.Sprintf(" p%d leader %d epoch %d err %d", p.Partition, p.Leader, p.LeaderEpoch, p.ErrorCode)
			}
		}
		out = append(out, v)
	}
	return strings.Join(out, "\n")
}

// startWorkload creates the topic and the queue, starts every client and
// waits until the cluster acknowledges writes of both doors.
func startWorkload(t *testing.T, ctx context.Context, c *harness.Cluster, cfg workloadConfig) *workload {
	t.Helper()
	w := &workload{t: t, c: c, cfg: cfg, led: newFaultLedger(), klog: &e2etest.RingLog{Max: 512 << 10}}
	admin := e2etest.KgoClient(t, c)
	e2etest.WaitBrokers(ctx, t, admin, len(c.Nodes))
	e2etest.CreateTopicOn(ctx, t, admin, faultTopic, int32(cfg.KafkaPartitions))
	// The queue's partitions exist before anyone pops, so every consumer
	// sees all of them from its first pop.
	for p := 0; p < cfg.HTTPPartitions; p++ {
		items := []e2etest.PushItem{{Queue: faultQueue, Partition: fmt.Sprintf("p%d", p), Payload: "warm-up", TransactionID: fmt.Sprintf("warm-%d", p)}}
		w.led.hSent(items[0].TransactionID, -1, -1, items[0].Partition)
		if _, err := w.pushBatch(ctx, 0, items); err != nil {
			t.Fatal("warm-up push:", err)
		}
	}

	wctx, stopW := context.WithCancel(context.Background())
	rctx, stopR := context.WithCancel(context.Background())
	w.stopWrites, w.stopReads = stopW, stopR
	t.Cleanup(func() { w.stop() })
	for i := 0; i < cfg.KafkaProducers; i++ {
		cl := w.kafkaClient(fmt.Sprintf("fault-producer-%d", i), kgo.DefaultProduceTopic(faultTopic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
			kgo.RecordDeliveryTimeout(2*time.Minute), kgo.MaxBufferedRecords(20000))
		w.producers = append(w.producers, cl)
		w.writers.Add(1)
		go w.produce(wctx, i, cl)
	}
	for i := 0; i < cfg.HTTPPushers; i++ {
		w.writers.Add(1)
		go w.pushLoop(wctx, i)
	}
	for i := 0; i < cfg.KafkaConsumers; i++ {
		cl := w.kafkaClient(fmt.Sprintf("fault-consumer-%d", i), kgo.ConsumerGroup(faultGroup), kgo.ConsumeTopics(faultTopic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(6*time.Second),
			kgo.HeartbeatInterval(500*time.Millisecond), kgo.FetchMaxWait(300*time.Millisecond))
		w.consumers = append(w.consumers, cl)
		w.readers.Add(1)
		go w.consumeKafka(rctx, cl)
	}
	for i := range c.Nodes {
		w.readers.Add(1)
		go w.consumeHTTP(rctx, i)
	}
	if err := w.progress(ctx, 300); err != nil {
		t.Fatal(w.noProgress("before the first fault", err))
	}
	return w
}

func (w *workload) kafkaClient(name string, opts ...kgo.Opt) *kgo.Client {
	var seeds []string
	for _, n := range w.c.Nodes {
		seeds = append(seeds, n.KafkaAddr)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID(name),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.WithLogger(kgo.BasicLogger(w.klog, kgo.LogLevelInfo, func() string { return name + " " + time.Now().UTC().Format("15:04:05.000 ") }))},
		opts...)...)
	if err != nil {
		w.t.Fatal(err)
	}
	return cl
}

// node returns the i-th node (mod the cluster size) that is running.
func (w *workload) node(i int) *harness.Node {
	for k := 0; k < len(w.c.Nodes); k++ {
		n := w.c.Nodes[(i+k)%len(w.c.Nodes)]
		if n.Running() {
			return n
		}
	}
	return w.c.Nodes[i%len(w.c.Nodes)]
}

// produce writes numbered records at a steady pace until ctx ends. The
// records are produced with a background context: stopping the loop does
// not cancel what was handed to the client.
func (w *workload) produce(ctx context.Context, id int, cl *kgo.Client) {
	defer w.writers.Done()
	tick := time.NewTicker(10 * time.Millisecond) // pacing: about 500 records/s a producer
	defer tick.Stop()
	for seq := 0; ; {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for i := 0; i < 5; i++ {
			p := seq % w.cfg.KafkaPartitions
			val := fmt.Sprintf("k%d-%d", id, seq)
			w.led.kSent(val, id, seq, int32(p))
			seq++
			cl.TryProduce(context.Background(), &kgo.Record{Partition: int32(p), Value: []byte(val)}, func(r *kgo.Record, err error) {
				w.led.kResult(val, r.Partition, r.Offset, err)
			})
		}
	}
}

// pushLoop pushes batches of 10 numbered messages to one partition at a
// time, each batch until it is acknowledged: a retry carries the same
// transaction ids, so the queue's dedup stores it once whatever happened
// to the earlier attempts.
func (w *workload) pushLoop(ctx context.Context, id int) {
	defer w.writers.Done()
	tick := time.NewTicker(20 * time.Millisecond) // pacing: at most 500 messages/s a pusher
	defer tick.Stop()
	seq, node := 0, id
	for b := 0; ctx.Err() == nil; b++ {
		part := fmt.Sprintf("p%d", (id*7+b)%w.cfg.HTTPPartitions)
		items := make([]e2etest.PushItem, 10)
		for i := range items {
			txn := fmt.Sprintf("h%d-%d", id, seq)
			items[i] = e2etest.PushItem{Queue: faultQueue, Partition: part, Payload: map[string]int{"w": id, "s": seq}, TransactionID: txn}
			w.led.hSent(txn, id, seq, part)
			seq++
		}
		var err error
		if node, err = w.pushBatch(ctx, node, items); err != nil {
			w.led.hUnacked(items) // stopped before an answer: stored at most once
			return
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// pushBatch retries one batch on the running nodes in turn, from the
// start-th, until a node acknowledges all of it or ctx ends; it returns the
// index of the node that did, where the next batch starts.
func (w *workload) pushBatch(ctx context.Context, start int, items []e2etest.PushItem) (int, error) {
	for try := start; ; try++ {
		n := w.node(try)
		actx, cancel := context.WithTimeout(ctx, w.cfg.PushTimeout)
		res, code, err := e2etest.Push(actx, n.URL(), items)
		cancel()
		if err == nil && code == http.StatusCreated && len(res) == len(items) {
			ok := true
			for _, r := range res {
				ok = ok && (r.Status == "queued" || r.Status == "duplicate")
			}
			if ok {
				for i, r := range res {
					w.led.hAcked(items[i].TransactionID, items[i].Partition, r.Offset, n.ID)
				}
				return try, nil
			}
		}
		if ctx.Err() != nil {
			return try, ctx.Err()
		}
		select { // back off before the next node
		case <-ctx.Done():
			return try, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// consumeKafka polls the topic in the consumer group and records every
// record it is given.
func (w *workload) consumeKafka(ctx context.Context, cl *kgo.Client) {
	defer w.readers.Done()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			w.led.kConsumed(r.Partition, r.Offset, string(r.Value))
		})
	}
}

// consumeHTTP pops the queue through node i (another node while i is
// down) and acks every message, fenced by its lease.
func (w *workload) consumeHTTP(ctx context.Context, i int) {
	defer w.readers.Done()
	for try := i; ctx.Err() == nil; try++ {
		n := w.node(try)
		pctx, cancel := context.WithTimeout(ctx, w.cfg.PushTimeout)
		ans, code, err := e2etest.Pop(pctx, n.URL(), e2etest.PopPath(faultQueue, "batch=20", "wait=true", "timeout=500",
			fmt.Sprintf("leaseSeconds=%d", w.cfg.LeaseSeconds)))
		cancel()
		if err != nil || code != http.StatusOK || len(ans.Messages) == 0 {
			if ctx.Err() == nil && err != nil {
				select { // the node is unreachable: back off, then the next one
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
			if code == http.StatusNoContent {
				try-- // nothing to deliver is an answer: stay on this node
			}
			continue
		}
		w.led.hDelivered(n.ID, ans.Messages)
		w.ack(ctx, try, ans.Messages, e2etest.AcksOf(ans.Messages, "completed"))
		try--
	}
}

// ack sends one ack batch, trying up to three nodes; what no node
// answered is recorded as an ack of unknown outcome.
func (w *workload) ack(ctx context.Context, start int, msgs []e2etest.PopMessage, acks []e2etest.AckReq) {
	for k := 0; k < 3 && ctx.Err() == nil; k++ {
		n := w.node(start + k)
		actx, cancel := context.WithTimeout(ctx, w.cfg.PushTimeout)
		res, code, err := ackBatch(actx, n.URL(), acks)
		cancel()
		if err == nil && code == http.StatusOK && len(res) == len(acks) {
			w.led.hAckAnswers(msgs, res)
			return
		}
	}
	w.led.hAckUnknown(msgs)
}

// stopWriting stops the producers and pushers and waits until every record
// handed to a producer has its outcome (or the deadline passes).
func (w *workload) stopWriting(ctx context.Context) {
	if w.stopWrites == nil {
		return
	}
	w.stopWrites()
	w.writers.Wait()
	for i, cl := range w.producers {
		fctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		if err := cl.Flush(fctx); err != nil {
			// The faults are over: a record still unresolved now is stuck.
			w.t.Errorf("producer %d: %d records unresolved 90 s after the last fault ended (%v); they count as failed.\n%s\nclient log tail:\n%s",
				i, cl.BufferedProduceRecords(), err, w.kafkaView(ctx), w.klog.Tail(6000))
		}
		cancel()
		cl.Close() // fails whatever is still buffered
	}
	w.producers = nil
}

// stop ends every client (idempotent).
func (w *workload) stop() {
	w.stopWriting(context.Background())
	if w.stopReads != nil {
		w.stopReads()
		w.readers.Wait()
		w.stopReads = nil
	}
	for _, cl := range w.consumers {
		cl.Close()
	}
	w.consumers = nil
}

// progress waits until the cluster acknowledged more writes of both doors
// (n Kafka records and n/4 HTTP messages) than when it was called: the
// side of a fault that should work does.
func (w *workload) progress(ctx context.Context, n int) error {
	k0, h0 := w.led.ackedCounts()
	err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) {
		k, h := w.led.ackedCounts()
		return k >= k0+n && h >= h0+n/4, nil
	})
	if err != nil {
		k, h := w.led.ackedCounts()
		err = fmt.Errorf("kafka +%d of %d wanted, http +%d of %d: %w", k-k0, n, h-h0, n/4, err)
	}
	return err
}

// progressWithin is progress given at most d.
func (w *workload) progressWithin(ctx context.Context, d time.Duration, n int) error {
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return w.progress(pctx, n)
}

// noProgress wraps a progress timeout with the counts and every node's
// view of its groups' leaders.
func (w *workload) noProgress(what string, err error) error {
	k, h := w.led.ackedCounts()
	return fmt.Errorf("%s at %s: writes stopped being acknowledged (kafka %d, http %d acked so far): %w\n%s\nKafka client log tail:\n%s",
		what, time.Now().UTC().Format("15:04:05.000"), k, h, err, w.kafkaView(context.Background()), w.klog.Tail(5000))
}

// groupViews is each node's view of its groups' leaders.
func (w *workload) groupViews() string {
	var views []string
	for _, n := range w.c.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		groups, _, gerr := e2etest.HealthGroups(ctx, n)
		cancel()
		if gerr != nil {
			views = append(views, fmt.Sprintf("node %d: %v", n.ID, gerr))
			continue
		}
		v := fmt.Sprintf("node %d:", n.ID)
		for _, g := range groups {
			v += fmt.Sprintf(" g%d leader %d term %d (%s)", g.Group, g.Leader, g.Term, g.Role)
		}
		views = append(views, v)
	}
	return strings.Join(views, "\n")
}

func ackBatch(ctx context.Context, base string, acks []e2etest.AckReq) ([]e2etest.AckResult, int, error) {
	var out []e2etest.AckResult
	code, err := e2etest.Call(ctx, http.MethodPost, base+"/api/v1/ack/batch", map[string]any{"acknowledgments": acks}, &out)
	return out, code, err
}
