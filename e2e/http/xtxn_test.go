package http

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

// Transactions whose operations live in several raft groups, against real
// nodes that die in the middle (docs/placement.md, "Transactions across
// groups").

// An HTTP transaction (an ack, a push and a KV write, each in a different
// group) sent to a node that kills itself at each step of the two-phase
// commit ends all-or-nothing on the survivors: aborted when it died before
// the decision, committed when it died after, and what it pinned is let go.
func TestCrossGroupTransactionSurvivesACrashAtEachStep(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 4*time.Minute)
	coordinator, survivor := c.Nodes[0], c.Nodes[1]
	for _, tc := range []struct {
		point  string
		commit bool
	}{
		{"xtxn-after-prepare", false},
		{"xtxn-after-decide", true},
		{"xtxn-after-resolve", true},
	} {
		t.Run(tc.point, func(t *testing.T) {
			cl := e2etest.NewClient(t, ctx, survivor)
			coordinator.Stop()
			coordinator.Env["QUEEN_FAULT_CRASH_AT"] = tc.point
			if err := c.Start(coordinator); err != nil {
				t.Fatal(err)
			}
			if err := c.WaitAllHealthy(ctx); err != nil {
				t.Fatal(err)
			}
			in, out, key := "in-"+tc.point, "out-"+tc.point, "k-"+tc.point
			cl.Push(e2etest.PushItems(in, "p", "work")...)
			// An output partition in another group than the input's.
			inPID := e2etest.QueuePartitions(t, ctx, cl.Base, in)["p"]
			target := ""
			for i := 0; target == ""; i++ {
				name := fmt.Sprintf("o%d", i)
				cl.Push(e2etest.PushItems(out, name, "seed")...)
				if e2etest.GroupOfPID(t, e2etest.QueuePartitions(t, ctx, cl.Base, out)[name]) != e2etest.GroupOfPID(t, inPID) {
					target = name
				}
			}
			m := cl.MustPop(e2etest.PopPath(in, "batch=1", "leaseSeconds=3", "subscriptionMode=all"), 1).Messages[0]
			body := map[string]any{
				"operations": []any{
					map[string]any{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID},
					map[string]any{"type": "push", "items": []map[string]any{{"queue": out, "partition": target, "payload": "from-txn"}}},
				},
				"kv": []any{map[string]any{"op": "put", "ns": "app", "key": key, "value": 1}},
			}
			var ans e2etest.TxnAnswer
			code, err := e2etest.Call(ctx, http.MethodPost, coordinator.URL()+"/api/v1/transaction", body, &ans)
			if err == nil {
				t.Fatalf("the node answered %d %+v instead of dying at %s", code, ans, tc.point)
			}
			if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) { return !coordinator.Running(), nil }); err != nil {
				t.Fatal(err)
			}
			coordinator.Kill() // reaps it: it is dead already
			delete(coordinator.Env, "QUEEN_FAULT_CRASH_AT")
			if err := c.Start(coordinator); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			pushed := func() bool { _, hwm, _ := cl.Log(out, target); return hwm == 2 }
			kvSet := func() bool {
				var kv map[string]any
				e2etest.Call(ctx, http.MethodGet, cl.Base+"/api/v1/kv/app/"+key, nil, &kv)
				return kv["found"] == true
			}
			// Settled: committed once the push and the key are there and
			// the lease's time has passed without the message coming back;
			// aborted once it comes back (the abort let go of its lease).
			redelivered := false
			cl.Eventually(45*time.Second, "the transaction settled", func() bool {
				if !redelivered {
					if a, code := cl.Pop(e2etest.PopPath(in, "batch=1")); code == http.StatusOK {
						redelivered = true
						cl.Ack(e2etest.AckOf(a.Messages[0], "completed"))
					}
				}
				if tc.commit {
					return pushed() && kvSet() && time.Since(sent) > 5*time.Second
				}
				return redelivered
			})
			got := fmt.Sprintf("pushed=%v kv=%v acked=%v", pushed(), kvSet(), !redelivered)
			want := fmt.Sprintf("pushed=%v kv=%v acked=%v", tc.commit, tc.commit, tc.commit)
			if got != want {
				t.Fatalf("after a crash at %s: %s, want %s", tc.point, got, want)
			}
			if err := c.WaitAllHealthy(ctx); err != nil {
				t.Fatal(err)
			}
			// Nothing stays pinned: the KV key takes writes again.
			var put map[string]any
			if code, err := e2etest.Call(ctx, http.MethodPut, cl.Base+"/api/v1/kv/app/"+key, map[string]any{"v": 2}, &put); err != nil || code != http.StatusOK {
				t.Fatalf("kv after the transaction: %d %v %v", code, err, put)
			}
		})
	}
}

// A Kafka transaction over partitions in every group commits or aborts in
// all of them, through a SIGKILL: a read_committed consumer sees each
// committed transaction whole, once, and nothing of an aborted one; a
// read_uncommitted consumer sees the committed ones whole too, and aborted
// records (which stay in the log, as in Kafka) at most once each.
func TestKafkaTransactionsAcrossGroupsThroughASIGKILL(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 4*time.Minute)
	admin := e2etest.KgoClient(t, c)
	e2etest.WaitBrokers(ctx, t, admin, 3)
	const parts = 6
	e2etest.CreateTopicOn(ctx, t, admin, "xledger", parts)
	newProducer := func() *kgo.Client {
		return e2etest.KgoClient(t, c, kgo.TransactionalID("xledger-writer"), kgo.DefaultProduceTopic("xledger"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(10*time.Second))
	}
	prod := newProducer()
	var (
		mu        sync.Mutex
		committed = map[string]bool{}
		aborted   = map[string]bool{} // ended by an abort the client saw succeed
		restarts  int
	)
	run := func(i int) {
		name := fmt.Sprintf("txn-%03d", i)
		if err := prod.BeginTransaction(); err != nil {
			// franz-go can declare its producer id fatally failed when
			// the coordinator it cached dies and leaves Metadata before
			// it looked the coordinator up again ("unknown broker"); an
			// application then makes a new producer, whose
			// InitProducerID fences the old one and aborts what it left
			// open. Once at most per kill; the checks below still hold.
			if restarts++; restarts > 2 {
				t.Fatalf("%s begin: %v (after %d new producers)", name, err, restarts-1)
			}
			t.Logf("%s begin: %v: a new producer takes over", name, err)
			prod.Close()
			prod = newProducer()
			if err := prod.BeginTransaction(); err != nil {
				t.Fatalf("%s begin with a new producer: %v", name, err)
			}
		}
		var failed error
		for p := int32(0); p < parts && failed == nil; p++ {
			failed = prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(name)}).FirstErr()
		}
		end := kgo.TryCommit
		if failed != nil || i%3 == 0 {
			end = kgo.TryAbort
		}
		if err := prod.EndTransaction(ctx, end); err != nil {
			t.Logf("%s end: %v", name, err)
			// The client aborts what it could not end; nothing of it is
			// known committed.
			return
		}
		mu.Lock()
		if end == kgo.TryCommit {
			committed[name] = true
		} else {
			aborted[name] = true
		}
		mu.Unlock()
	}
	for i := 0; i < 10; i++ {
		run(i)
	}
	// Kill the transaction's coordinator: the producer must find the new
	// one (franz-go looks again only once the dead broker leaves Metadata).
	freq := kmsg.NewPtrFindCoordinatorRequest()
	freq.CoordinatorKey, freq.CoordinatorType = "xledger-writer", 1
	fr, err := freq.RequestWith(ctx, admin)
	if err != nil || fr.ErrorCode != 0 || fr.NodeID < 1 || int(fr.NodeID) > len(c.Nodes) {
		t.Fatalf("find coordinator: %v %+v", err, fr)
	}
	victim := c.Nodes[fr.NodeID-1]
	victim.Kill()
	for i := 10; i < 20; i++ {
		run(i)
	}
	if err := c.Start(victim); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAllHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 20; i < 25; i++ {
		run(i)
	}
	if len(committed) < 10 || len(aborted) < 5 {
		t.Fatalf("only %d transactions committed and %d aborted", len(committed), len(aborted))
	}
	for li, level := range []kgo.IsolationLevel{kgo.ReadCommitted(), kgo.ReadUncommitted()} {
		readCommitted := li == 0
		cons := e2etest.KgoClient(t, c, kgo.ConsumeTopics("xledger"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(level))
		seen := map[string]map[int32]int{}
		for _, r := range consumeToEnd(ctx, t, cons, len(committed)*parts) {
			name := string(r.Value)
			if seen[name] == nil {
				seen[name] = map[int32]int{}
			}
			seen[name][r.Partition]++
		}
		for name, ps := range seen {
			if !committed[name] && !strings.HasPrefix(name, "txn-") {
				t.Fatalf("unknown record %q", name)
			}
			if aborted[name] && readCommitted {
				t.Fatalf("read_committed consumed %s, which was aborted: %v", name, ps)
			}
			if !committed[name] && !readCommitted {
				for p, n := range ps {
					if n != 1 {
						t.Fatalf("%s (not committed) seen %d times in partition %d", name, n, p)
					}
				}
				continue // an abort may have come before every partition was written
			}
			if len(ps) != parts {
				t.Fatalf("%s seen in %d of %d partitions: %v", name, len(ps), parts, ps)
			}
			for p, n := range ps {
				if n != 1 {
					t.Fatalf("%s seen %d times in partition %d", name, n, p)
				}
			}
		}
		for name := range committed {
			if seen[name] == nil {
				t.Fatalf("committed %s not consumed", name)
			}
		}
		extra := 0
		for name := range seen {
			if !committed[name] && !aborted[name] {
				extra++
			}
		}
		// A transaction whose end the client did not see may have
		// committed; it is whole, which is all read_committed promises.
		t.Logf("%v: %d committed transactions read whole, %d aborted, %d more whose end the client did not see",
			level, len(committed), len(aborted), extra)
	}
}

// consumeToEnd consumes at least n records, then until a poll of two
// seconds brings nothing more.
func consumeToEnd(ctx context.Context, t *testing.T, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	out := e2etest.ConsumeN(ctx, t, cl, n)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		recs := fs.Records()
		if len(recs) == 0 {
			return out
		}
		out = append(out, recs...)
	}
}
