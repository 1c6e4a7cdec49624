package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

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
			res, code, err := push(actx, n.URL(), []pushItem{{Queue: "faultprobe", Partition: "p", Payload: i, TransactionID: txn}})
			cancel()
			p.note(err == nil && code == http.StatusCreated && len(res) == 1 && res[0].Status != "error",
				fmt.Sprintf("push %s answered %d %+v", txn, code, res))
		}
	}()
	go func() {
		defer p.done.Done()
		for pctx.Err() == nil {
			actx, cancel := context.WithTimeout(pctx, 2*time.Second)
			ans, code, err := pop(actx, n.URL(), popPath(faultQueue, "consumerGroup=minority-probe", "batch=5", "leaseSeconds=1"))
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
	rounds := faultRounds(t, "QUEEN_FAULT_PARTITION_ROUNDS", len(cutKinds))
	c := startFaultCluster(t, true, nil)
	ctx := deadline(t, 2*time.Minute+time.Duration(rounds)*60*time.Second)
	rng := faultRand(t)
	w := startWorkload(t, ctx, c, defaultWorkload())
	if err := w.progress(ctx, 300); err != nil {
		t.Fatal(w.noProgress("before the first fault", err))
	}
	f := &figures{Fault: "partition", Rounds: rounds}
	for r := 1; r <= rounds; r++ {
		kind := cutKinds[(r-1)%len(cutKinds)]
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
			c.Net.Heal()
			t.Fatal(w.noProgress(fmt.Sprintf("round %d, node %d (%s) cut %s", r, victim.ID, why, kind.name), err))
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
		t.Logf("round %d: node %d (%s) cut %s for %v; majority acknowledged again within %v; "+
			"%d writes tried on the cut node, %d acknowledged; caught up %v after the heal (acked: kafka %d, http %d)",
			r, victim.ID, why, kind.name, healedAt.Sub(cutAt).Round(time.Millisecond), again.Round(time.Millisecond),
			attempts, len(acks), time.Since(healedAt).Round(time.Millisecond), k, h)
	}
	resets, unknown := c.Net.Stats()
	t.Logf("proxy: %d connections reset by cuts, %d dropped as unowned", resets, unknown)
	w.finish(ctx, f)
}
