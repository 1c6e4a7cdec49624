package faults

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// A cut isolates one node from its peers in some way.
type cutKind struct {
	name  string
	apply func(nw *harness.Network, n *harness.Node)
}

var cutKinds = []cutKind{
	{"both ways, blackholed", func(nw *harness.Network, n *harness.Node) { nw.Isolate(n, harness.Blackhole) }},
	{"both ways, connections reset", func(nw *harness.Network, n *harness.Node) { nw.Isolate(n, harness.Reset) }},
	{"its outgoing bytes blackholed", func(nw *harness.Network, n *harness.Node) { nw.IsolateOneWay(n, true, harness.Blackhole) }},
	{"its incoming bytes blackholed", func(nw *harness.Network, n *harness.Node) { nw.IsolateOneWay(n, false, harness.Blackhole) }},
}

// minorityProbe writes to the cut node's own HTTP port for as long as the
// cut lasts: pushes to a queue of its own, and pops of the workload queue
// in a consumer group of its own (a pop takes a lease, a write). A node
// cut off from its peers cannot reach a quorum in any group, so none of
// these may be acknowledged: a push answered 201, or a pop answered with
// messages, is a write the minority acknowledged.
type minorityProbe struct {
	stop     context.CancelFunc
	done     sync.WaitGroup
	mu       sync.Mutex
	attempts int
	acks     []string
}

func startMinorityProbe(ctx context.Context, n *harness.Node, round int) *minorityProbe {
	pctx, cancel := context.WithCancel(ctx)
	p := &minorityProbe{stop: cancel}
	p.done.Add(2)
	go func() {
		defer p.done.Done()
		for i := 0; pctx.Err() == nil; i++ {
			actx, cancel := context.WithTimeout(pctx, 2*time.Second)
			txn := fmt.Sprintf("probe-r%d-%d", round, i)
			res, code, err := e2etest.Push(actx, n.URL(), []e2etest.PushItem{{Queue: "faultprobe", Partition: "p", Payload: i, TransactionID: txn}})
			cancel()
			p.note(err == nil && code == http.StatusCreated && len(res) == 1 && res[0].Status != "error",
				fmt.Sprintf("push %s answered %d %+v", txn, code, res))
		}
	}()
	go func() {
		defer p.done.Done()
		for pctx.Err() == nil {
			actx, cancel := context.WithTimeout(pctx, 2*time.Second)
			ans, code, err := e2etest.Pop(actx, n.URL(), e2etest.PopPath(faultQueue, "consumerGroup=minority-probe", "batch=5", "leaseSeconds=1"))
			cancel()
			p.note(err == nil && code == http.StatusOK && len(ans.Messages) > 0,
				fmt.Sprintf("pop answered %d with %d messages", code, len(ans.Messages)))
		}
	}()
	return p
}

func (p *minorityProbe) note(acked bool, what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts++
	if acked {
		p.acks = append(p.acks, what)
	}
}

// end stops the probe and returns its attempts and what was acknowledged;
// it returns before the cut is healed, so every answer counted arrived
// while the node was cut off.
func (p *minorityProbe) end() (int, []string) {
	p.stop()
	p.done.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attempts, p.acks
}

// Rounds of network partitions: each round cuts one node (most often the
// leader of a group) off from its peers — both ways with packets lost,
// both ways with connections reset, only its outgoing bytes, only its
// incoming bytes, in turn — while every client works. The majority must
// go on acknowledging writes, the cut node must acknowledge none, and once
// healed it must catch up. QUEEN_FAULT_PARTITION_ROUNDS sets the rounds (4
// by default, one of each kind).
func TestFaultPartitionRounds(t *testing.T) {
	kinds := cutKinds
	if only := os.Getenv("QUEEN_FAULT_CUTS"); only != "" { // e.g. "incoming" to replay one kind
		kinds = nil
		for _, k := range cutKinds {
			if strings.Contains(k.name, only) {
				kinds = append(kinds, k)
			}
		}
		if len(kinds) == 0 {
			t.Fatalf("QUEEN_FAULT_CUTS=%q matches no cut", only)
		}
	}
	rounds := faultRounds(t, "QUEEN_FAULT_PARTITION_ROUNDS", len(kinds))
	c := startFaultCluster(t, true, nil)
	ctx := e2etest.Deadline(t, 2*time.Minute+time.Duration(rounds)*60*time.Second)
	rng := faultRand(t)
	w := startWorkload(t, ctx, c, defaultWorkload())
	f := &figures{Fault: "partition", Rounds: rounds}
	for r := 1; r <= rounds; r++ {
		kind := kinds[(r-1)%len(kinds)]
		victim, why := pickVictim(t, ctx, c, rng)
		kind.apply(c.Net, victim)
		cutAt := time.Now()
		probe := startMinorityProbe(ctx, victim, r)
		// The majority elects new leaders where it must and goes on; the
		// cut lasts until it has acknowledged a good number of writes.
		pctx, cancel := context.WithTimeout(ctx, 40*time.Second)
		err := w.progress(pctx, 200)
		again := time.Since(cutAt)
		if err == nil {
			err = w.progress(pctx, 300)
		}
		cancel()
		attempts, acks := probe.end()
		if err != nil {
			err = w.noProgress(fmt.Sprintf("round %d, node %d (%s) cut %s at %s", r, victim.ID, why, kind.name, cutAt.UTC().Format("15:04:05.000")), err)
			c.Net.Heal()
			t.Fatal(err)
		}
		c.Net.Heal()
		healedAt := time.Now()
		f.MinorityAcks += len(acks)
		for _, a := range acks {
			w.led.mu.Lock()
			w.led.problem("round %d: node %d, cut off (%s), acknowledged a write: %s", r, victim.ID, kind.name, a)
			w.led.mu.Unlock()
		}
		if err := waitCaughtUp(ctx, w, victim); err != nil {
			t.Fatalf("round %d: after the heal: %v", r, err)
		}
		k, h := w.led.ackedCounts()
		t.Logf("round %d (%s-%s UTC): node %d (%s) cut %s for %v; majority acknowledged again within %v; "+
			"%d writes tried on the cut node, %d acknowledged; caught up %v after the heal (acked: kafka %d, http %d)",
			r, cutAt.UTC().Format("15:04:05.000"), healedAt.UTC().Format("15:04:05.000"),
			victim.ID, why, kind.name, healedAt.Sub(cutAt).Round(time.Millisecond), again.Round(time.Millisecond),
			attempts, len(acks), time.Since(healedAt).Round(time.Millisecond), k, h)
	}
	resets, unknown := c.Net.Stats()
	t.Logf("proxy: %d connections reset by cuts, %d dropped as unowned", resets, unknown)
	w.finish(ctx, f)
}

// A node that hears nothing from its peers while they still hear it (its
// incoming raft traffic lost) must not take Kafka clients down with it.
// In each round (QUEEN_FAULT_ONEWAY_ROUNDS, 1 by default) the leader of a
// group is cut that way: the
// majority must lead every group within seconds, a running idempotent
// producer writing to every partition must go on for some seconds more,
// and a new producer whose bootstrap server is the cut node (clients list
// every node, and pick one) must be able to write to every partition.
func TestFaultOneWayCutKeepsKafkaProducing(t *testing.T) {
	c := startFaultCluster(t, true, nil)
	ctx := e2etest.Deadline(t, 4*time.Minute)
	const topic, parts = "oneway", 6
	admin := e2etest.KgoClient(t, c)
	e2etest.WaitBrokers(ctx, t, admin, len(c.Nodes))
	e2etest.CreateTopicOn(ctx, t, admin, topic, parts)
	prod := e2etest.KgoClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond), kgo.RecordDeliveryTimeout(2*time.Minute))
	var acked, failed atomic.Int64
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond) // pacing: 600 records/s
		defer tick.Stop()
		for pctx.Err() == nil {
			select {
			case <-pctx.Done():
			case <-tick.C:
			}
			for p := int32(0); p < parts; p++ {
				prod.TryProduce(context.Background(), &kgo.Record{Partition: p, Value: []byte("v")}, func(_ *kgo.Record, err error) {
					if err != nil {
						failed.Add(1)
					} else {
						acked.Add(1)
					}
				})
			}
		}
	}()
	defer func() { stop(); <-done }()
	grow := func(n int64, d time.Duration) error {
		a0 := acked.Load()
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return harness.Poll(wctx, 20*time.Millisecond, func() (bool, error) { return acked.Load() >= a0+n, nil })
	}
	if err := grow(300, time.Minute); err != nil {
		t.Fatal("the producer never got going:", err)
	}
	groups, err := e2etest.GroupsOf(ctx, c.Nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	rounds := faultRounds(t, "QUEEN_FAULT_ONEWAY_ROUNDS", 1)
	for r := 1; r <= rounds; r++ {
		g := (r - 1) % len(groups)
		victim := c.Nodes[e2etest.GroupLeader(t, ctx, c, g)]
		c.Net.IsolateOneWay(victim, false, harness.Blackhole)
		cutAt := time.Now()
		fail := func(what string, err error) {
			t.Helper()
			views := brokerViews(ctx, c, topic)
			c.Net.Heal()
			t.Fatalf("round %d: node %d (leader of group %d) hears nothing from its peers since %v: %s: %v (running producer: %d acked, %d failed)\n%s",
				r, victim.ID, g, time.Since(cutAt).Round(time.Millisecond), what, err, acked.Load(), failed.Load(), views)
		}
		// The majority takes over, then keeps going (at 600 records/s,
		// 1,800 records are three seconds of writes).
		if err := grow(300, 30*time.Second); err != nil {
			fail("the running producer stopped", err)
		}
		if err := grow(1800, 30*time.Second); err != nil {
			fail("the running producer stopped", err)
		}
		// A producer that bootstraps through the cut node.
		fresh, err := kgo.NewClient(kgo.SeedBrokers(victim.KafkaAddr), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(250*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var recs []*kgo.Record
		for p := int32(0); p < parts; p++ {
			recs = append(recs, &kgo.Record{Partition: p, Value: []byte("fresh")})
		}
		err = fresh.ProduceSync(fctx, recs...).FirstErr()
		cancel()
		fresh.Close()
		if err != nil {
			fail("a producer bootstrapped through the cut node could not write", err)
		}
		c.Net.Heal()
		t.Logf("round %d: node %d (leader of group %d) cut from what its peers send for %v; producers went on",
			r, victim.ID, g, time.Since(cutAt).Round(time.Millisecond))
		if err := victim.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
