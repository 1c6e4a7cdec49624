package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// figures are one fault run's numbers, printed as a FAULT-FIGURES line
// (docs/reliability.md; `task faults:long` collects them).
type figures struct {
	Fault  string
	Rounds int

	KafkaSent, KafkaAcked, KafkaFailed, KafkaConsumed int
	HTTPSent, HTTPAcked, HTTPUnknown, HTTPDelivered   int
	HTTPRedelivered, HTTPConsumerAcks                 int
	Checked                                           int // log records read back, over every replica

	Lost, Duplicated, Reordered, Phantom, Misplaced, Diverged int
	Unconsumed, Undelivered, AckedTwice, MinorityAcks         int
	// ProducerResets counts the times a broker answer made an idempotent
	// producer give up its sequence (OUT_OF_ORDER_SEQUENCE_NUMBER or
	// UNKNOWN_PRODUCER_ID): clients take that as data loss, and a
	// committed batch is never lost here, so it is always a broker fault.
	ProducerResets int
}

func (f *figures) violations() int {
	return f.Lost + f.Duplicated + f.Reordered + f.Phantom + f.Misplaced + f.Diverged +
		f.Unconsumed + f.Undelivered + f.AckedTwice + f.MinorityAcks + f.ProducerResets
}

func (f *figures) String() string {
	return fmt.Sprintf("FAULT-FIGURES fault=%s rounds=%d kafka_sent=%d kafka_acked=%d kafka_failed=%d kafka_consumed=%d "+
		"http_sent=%d http_acked=%d http_unknown=%d http_delivered=%d http_redelivered=%d http_consumer_acks=%d "+
		"checked=%d lost=%d duplicated=%d reordered=%d phantom=%d misplaced=%d diverged=%d "+
		"unconsumed=%d undelivered=%d acked_twice=%d minority_acks=%d producer_resets=%d",
		f.Fault, f.Rounds, f.KafkaSent, f.KafkaAcked, f.KafkaFailed, f.KafkaConsumed,
		f.HTTPSent, f.HTTPAcked, f.HTTPUnknown, f.HTTPDelivered, f.HTTPRedelivered, f.HTTPConsumerAcks,
		f.Checked, f.Lost, f.Duplicated, f.Reordered, f.Phantom, f.Misplaced, f.Diverged,
		f.Unconsumed, f.Undelivered, f.AckedTwice, f.MinorityAcks, f.ProducerResets)
}

// faultRounds reads a round count from the environment (the long run sets
// it), else def.
func faultRounds(t *testing.T, env string, def int) int {
	if v := os.Getenv(env); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", env, v)
		}
		return n
	}
	return def
}

// faultRand is the run's random source, seeded from QUEEN_FAULT_SEED when
// set so a failing schedule of faults can be replayed.
func faultRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("QUEEN_FAULT_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("QUEEN_FAULT_SEED=%q", v)
		}
		seed = s
	}
	t.Logf("fault schedule seed %d (QUEEN_FAULT_SEED=%d replays it)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// finish ends the run: writers stop and their last records resolve,
// consumers drain everything acknowledged, every replica's logs are read
// back and judged against the clients' records. Every violation fails the
// test; the figures are logged and printed either way.
func (w *workload) finish(ctx context.Context, f *figures) {
	t := w.t
	t.Helper()
	w.stopWriting(ctx)
	dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	var why string
	err := harness.Poll(dctx, 100*time.Millisecond, func() (bool, error) {
		ok, s := w.led.drained()
		why = s
		if !ok {
			return false, nil
		}
		// An ack whose answer was lost may not have applied: then its
		// message comes back when the lease ends and is acked again.
		// The queue is drained when its queue-mode backlog is empty.
		depth, err := w.queueDepth(dctx)
		why = fmt.Sprintf("%d messages still pending or leased in %s (%v)", depth, faultQueue, err)
		return err == nil && depth == 0, nil
	})
	cancel()
	if err != nil {
		t.Errorf("consumers did not drain: %s", why)
	}
	w.stop()
	if f.ProducerResets = w.klog.ProducerResets(); f.ProducerResets > 0 {
		t.Errorf("%d idempotent producer resets (%q in the client log):\n%s", f.ProducerResets, e2etest.ProducerResetLine, w.klog.Tail(4000))
	}
	w.checkLogs(ctx, f)
	w.countConsumption(f)

	l := w.led
	l.mu.Lock()
	problems := append([]string(nil), l.problems...)
	l.mu.Unlock()
	fmt.Println(f.String())
	t.Log(f.String())
	for i, p := range problems {
		if i == 30 {
			t.Errorf("... %d more", len(problems)-i)
			break
		}
		t.Error(p)
	}
	if n := f.violations(); n > 0 && len(problems) == 0 {
		t.Errorf("%d violations", n)
	}
}

// queueDepth is the queue-mode backlog of the workload queue (pending and
// leased messages), as a running node sees it.
func (w *workload) queueDepth(ctx context.Context) (int, error) {
	var d struct {
		Depth int `json:"depth"`
	}
	n := w.node(0)
	code, err := e2etest.Call(ctx, http.MethodGet, n.URL()+"/api/v1/resources/queues/"+faultQueue+"/depth?group=__QUEUE_MODE__", nil, &d)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("depth: %d", code)
	}
	return d.Depth, err
}

// partitionLog is one partition as one replica serves it: the record id
// (Kafka value or HTTP transaction id) at each offset.
type partitionLog []string

// readReplicas reads a partition from every node until all serve the same
// number of records (writes have stopped, so they converge) or ctx ends.
func (w *workload) readReplicas(ctx context.Context, queue, part string, kafka bool) ([]partitionLog, error) {
	var logs []partitionLog
	var last error
	err := harness.Poll(ctx, 200*time.Millisecond, func() (bool, error) {
		logs = logs[:0]
		for _, n := range w.c.Nodes {
			recs, _, err := e2etest.FetchAll(ctx, n.URL(), queue, part)
			if err != nil {
				last = fmt.Errorf("node %d: %w", n.ID, err)
				return false, nil
			}
			pl := make(partitionLog, len(recs))
			for i, r := range recs {
				if uint64(i) != r.Offset {
					return false, fmt.Errorf("node %d %s/%s: record %d has offset %d", n.ID, queue, part, i, r.Offset)
				}
				pl[i] = r.TransactionID
				if kafka {
					_ = json.Unmarshal(r.Payload, &pl[i]) // a Kafka value fetches as a JSON string
				}
			}
			logs = append(logs, pl)
		}
		for _, pl := range logs[1:] {
			if len(pl) != len(logs[0]) {
				last = fmt.Errorf("replicas of %s/%s hold %d and %d records", queue, part, len(logs[0]), len(pl))
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return logs, fmt.Errorf("%w (last: %v)", err, last)
	}
	return logs, nil
}

// checkLogs judges every replica of every partition against the clients'
// records: acknowledged writes present once at their offsets, nothing
// stored twice, each producer's and pusher's numbers increasing along a
// partition, nothing nobody sent, and replicas identical.
func (w *workload) checkLogs(ctx context.Context, f *figures) {
	t, l := w.t, w.led
	rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	found := map[string]hPos{} // id → where it is (HTTP and Kafka ids cannot collide)
	check := func(queue, part string, kafka bool) {
		logs, err := w.readReplicas(rctx, queue, part, kafka)
		if err != nil {
			t.Errorf("reading %s/%s back: %v", queue, part, err)
			if len(logs) == 0 {
				return
			}
		}
		for i, pl := range logs[1:] {
			for off := 0; off < min(len(pl), len(logs[0])); off++ {
				if pl[off] != logs[0][off] {
					f.Diverged++
					l.mu.Lock()
					l.problem("%s/%s offset %d: node 1 holds %s, node %d %s", queue, part, off, logs[0][off], i+2, pl[off])
					l.mu.Unlock()
					break
				}
			}
		}
		for _, pl := range logs {
			f.Checked += len(pl)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		last := map[int]int{} // producer or pusher → last seq seen here
		for off, id := range logs[0] {
			if prev, dup := found[id]; dup {
				f.Duplicated++
				l.problem("%s stored twice: %s/%d and %s/%d", id, prev.partition, prev.offset, part, off)
				continue
			}
			found[id] = hPos{part, uint64(off)}
			who, seq, ok := -1, 0, false
			if kafka {
				var r kRec
				r, ok = l.ksent[id]
				who, seq = r.producer, r.seq
				ok = ok && strconv.Itoa(int(r.partition)) == part
			} else {
				var r hRec
				r, ok = l.hsent[id]
				who, seq = r.pusher, r.seq
				ok = ok && r.partition == part
			}
			if !ok {
				f.Phantom++
				l.problem("%s/%d holds %q, which no client sent there", part, off, id)
				continue
			}
			if who < 0 {
				continue // warm-up
			}
			if prev, seen := last[who]; seen && seq <= prev {
				f.Reordered++
				l.problem("%s/%s offset %d: %s after seq %d of the same client", queue, part, off, id, prev)
			}
			last[who] = seq
		}
	}
	for p := 0; p < w.cfg.KafkaPartitions; p++ {
		check(faultTopic, strconv.Itoa(p), true)
	}
	for p := 0; p < w.cfg.HTTPPartitions; p++ {
		check(faultQueue, fmt.Sprintf("p%d", p), false)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for v, at := range l.kacked {
		got, ok := found[v]
		switch {
		case !ok:
			f.Lost++
			l.problem("kafka %s acknowledged at %d/%d is in no log", v, at.partition, at.offset)
		case got != hPos{strconv.Itoa(int(at.partition)), uint64(at.offset)}:
			f.Misplaced++
			l.problem("kafka %s acknowledged at %d/%d is at %s/%d", v, at.partition, at.offset, got.partition, got.offset)
		}
	}
	for txn, at := range l.hacked {
		got, ok := found[txn]
		switch {
		case !ok:
			f.Lost++
			l.problem("http %s acknowledged at %s/%d is in no log", txn, at.partition, at.offset)
		case got != at:
			f.Misplaced++
			l.problem("http %s acknowledged at %s/%d is at %s/%d", txn, at.partition, at.offset, got.partition, got.offset)
		}
	}
}

// countConsumption fills the consumer side of the figures.
func (w *workload) countConsumption(f *figures) {
	l := w.led
	l.mu.Lock()
	defer l.mu.Unlock()
	f.KafkaSent, f.KafkaAcked, f.KafkaFailed = len(l.ksent), len(l.kacked), len(l.kfailed)
	f.HTTPSent, f.HTTPAcked, f.HTTPUnknown = len(l.hsent), len(l.hacked), len(l.hunacked)
	f.KafkaConsumed, f.HTTPDelivered = len(l.kconsumed), len(l.hdeliv)
	f.Reordered += l.reorders
	for v := range l.kacked {
		if l.kconsumed[v] == 0 {
			f.Unconsumed++
		}
	}
	for txn := range l.hacked {
		if l.hdeliv[txn] == 0 {
			f.Undelivered++
			l.problem("http %s acknowledged to its pusher, never delivered", txn)
		}
	}
	for _, n := range l.hdeliv {
		f.HTTPRedelivered += n - 1
	}
	for _, n := range l.hackOK {
		f.HTTPConsumerAcks += n
		if n > 1 {
			f.AckedTwice++
		}
	}
	if len(l.kfailed) > 0 {
		reasons := map[string]int{}
		for _, e := range l.kfailed {
			reasons[e]++
		}
		var parts []string
		for e, n := range reasons {
			parts = append(parts, fmt.Sprintf("%d× %s", n, e))
		}
		w.t.Logf("Kafka records that failed (not acknowledged; stored at most once): %s", strings.Join(parts, "; "))
	}
}
