package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// A read-process-write transaction whose commit was decided but not yet
// resolved anywhere when its coordinator died (the node is made to kill
// itself right after recording the decision) is copied once, not twice,
// by the session that takes over: the new session's consumer asks for
// stable offsets and must wait until the transaction's staged offsets are
// applied, rather than start from the positions before it. The exactly-once
// fault test met this once, by chance, under CPU burners; here the crash
// point makes it happen every run.
func TestFaultExactlyOnceAfterACommitLeftUnresolved(t *testing.T) {
	const (
		in, out, group, txnID = "unres-in", "unres-out", "unres-copy", "unres-copier"
		parts, records        = 3, 30
	)
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	node := c.Nodes[0]
	admin := e2etest.KgoClient(t, c)
	adm := kadm.NewClient(admin)
	e2etest.WaitBrokers(ctx, t, admin, 1)
	e2etest.CreateTopicOn(ctx, t, admin, in, parts)
	e2etest.CreateTopicOn(ctx, t, admin, out, parts)
	prod := e2etest.KgoClient(t, c, kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range records {
		r := &kgo.Record{Partition: int32(i % parts), Value: []byte(fmt.Sprintf("rec-%02d", i))}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// The node dies the next time it decides a transaction's commit.
	node.Stop()
	node.Env["QUEEN_FAULT_CRASH_AT"] = "xtxn-after-decide"
	if err := c.Start(node); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAllHealthy(ctx); err != nil {
		t.Fatal(err)
	}

	session := func(name string) *kgo.GroupTransactSession {
		s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(node.KafkaAddr), kgo.ClientID(name),
			kgo.TransactionalID(txnID), kgo.TransactionTimeout(30*time.Second),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.SessionTimeout(6*time.Second),
			kgo.HeartbeatInterval(500*time.Millisecond), kgo.FetchMaxWait(300*time.Millisecond),
			kgo.DefaultProduceTopic(out), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// copyOnce copies what one poll returns in one transaction and reports
	// how many records it copied.
	copyOnce := func(ctx context.Context, s *kgo.GroupTransactSession) (int, error) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		recs := s.PollRecords(pctx, records).Records()
		cancel()
		if len(recs) == 0 {
			return 0, nil
		}
		if err := s.Begin(); err != nil {
			return 0, err
		}
		var copies []*kgo.Record
		for _, r := range recs {
			copies = append(copies, &kgo.Record{Partition: r.Partition, Value: append([]byte(nil), r.Value...)})
		}
		if err := s.ProduceSync(ctx, copies...).FirstErr(); err != nil {
			return 0, err
		}
		committed, err := s.End(ctx, kgo.TryCommit)
		if err == nil && !committed {
			err = fmt.Errorf("the commit of %d records became an abort", len(recs))
		}
		return len(recs), err
	}

	// The first session copies a batch; its commit kills the node after
	// the decision, before any raft group resolved it.
	first := session("first")
	var copied int
	if err := harness.Poll(ctx, 10*time.Millisecond, func() (bool, error) {
		// Its End fails: the node is gone, and the short context keeps
		// franz-go from retrying the EndTxn once the node is back (a
		// repeated EndTxn resolves the transaction itself).
		ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		n, _ := copyOnce(ectx, first)
		copied += n
		return n > 0, nil
	}); err != nil {
		t.Fatalf("the first session copied nothing: %v", err)
	}
	if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) { return !node.Running(), nil }); err != nil {
		t.Fatalf("the node did not die at its commit decision: %v", err)
	}
	node.Kill() // reaps it
	delete(node.Env, "QUEEN_FAULT_CRASH_AT")
	if err := c.Start(node); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAllHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	first.Close()
	t.Logf("the first session copied %d records; its commit was decided and left unresolved", copied)

	// The next session copies the rest, until the group's committed
	// offsets are the input's ends.
	second := session("second")
	defer second.Close()
	done := func() bool {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		total := int64(0)
		for p := range int32(parts) {
			if o, ok := offs.Lookup(in, p); ok && o.Err == nil {
				total += o.At
			}
		}
		return total == records
	}
	if err := harness.Poll(ctx, 10*time.Millisecond, func() (bool, error) {
		if _, err := copyOnce(ctx, second); err != nil {
			return false, fmt.Errorf("second session: %w", err)
		}
		return done(), nil
	}); err != nil {
		t.Fatal(err)
	}

	// Read back: every input record in the output once.
	reader := e2etest.KgoClient(t, c, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]int{}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(seen) < records && rctx.Err() == nil {
		reader.PollFetches(rctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	// Anything more the last fetches bring is read too.
	qctx, qcancel := context.WithTimeout(ctx, time.Second)
	reader.PollFetches(qctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	qcancel()
	for i := range records {
		v := fmt.Sprintf("rec-%02d", i)
		if seen[v] != 1 {
			t.Errorf("%s is in %s %d times, want once", v, out, seen[v])
		}
	}
}
