package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
	"github.com/queen-mq/queen/wire"
)

// previousRelease is the last build landed before the raft format gate:
// every node of a cluster upgraded from it starts at wire.FormatV1.
const previousRelease = "49c9c26"

// formatOf reads a node's /health format gate: each group's active format
// (nil from a build before the gate, which reports none).
func formatOf(ctx context.Context, n *harness.Node) ([]uint32, error) {
	var h struct {
		Format *struct {
			Newest uint32   `json:"newest"`
			Active []uint32 `json:"active"`
		} `json:"format"`
	}
	if _, err := e2etest.Call(ctx, "GET", n.URL()+"/health", nil, &h); err != nil {
		return nil, err
	}
	if h.Format == nil {
		return nil, nil
	}
	return h.Format.Active, nil
}

// previousBuild is the queen binary of previousRelease and the settings
// its nodes need. A checkout without that revision (a shallow clone) runs
// this build with QUEEN_TEST_NEWEST_FORMAT=1 instead: it applies and
// writes FormatV1 as the previous release does, which still upgrades
// across the gate, though not from the previous release's own code.
func previousBuild(t *testing.T) (string, map[string]string) {
	t.Helper()
	bin, err := harness.BuildRevision(previousRelease)
	switch {
	case err == nil:
		t.Logf("upgrading from %s, built from git", previousRelease)
		return bin, nil
	case errors.Is(err, harness.ErrNoRevision):
		t.Logf("%v: upgrading from this build held at format %d", err, wire.FormatV1)
		return e2etest.QueenBinary(t), map[string]string{"QUEEN_TEST_NEWEST_FORMAT": "1"}
	}
	t.Fatal(err)
	return "", nil
}

// TestARollingUpgradeAcrossAFormatChange starts three nodes of the
// previous release, then replaces them one at a time (SIGTERM, the new
// build on the same data dir, healthy) while HTTP clients push with
// transaction ids and a Kafka producer writes. The groups stay at the old
// format while any member runs the old build, and go to the newest once
// the last is upgraded; every acknowledged message is stored exactly once
// on every node, and a Kafka transaction (which the new format settles)
// commits afterwards.
func TestARollingUpgradeAcrossAFormatChange(t *testing.T) {
	oldBin, oldEnv := previousBuild(t)
	newBin := e2etest.QueenBinary(t)
	c := e2etest.StartPreparedCluster(t, harness.Options{Nodes: 3}, func(c *harness.Cluster) {
		for _, n := range c.Nodes {
			n.SetBinary(oldBin)
			for k, v := range oldEnv {
				n.Env[k] = v
			}
		}
	})
	ctx := e2etest.Deadline(t, 5*time.Minute)
	admin := e2etest.KafkaClient(t, c.Nodes[0])
	e2etest.WaitBrokers(ctx, t, admin, 3)
	e2etest.CreateTopicOn(ctx, t, admin, "up-k", 3)

	// The load: HTTP pushes with transaction ids through every node in
	// turn, and an idempotent Kafka producer, until the upgrade is done.
	acked := e2etest.NewAcked()
	parts := []string{"p0", "p1", "p2"}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var pushErr atomic.Value
	var next atomic.Uint64
	var produced atomic.Int64
	// load runs step(0), step(1), ... until stop closes or a step fails.
	load := func(step func(i int) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := step(i); err != nil {
					pushErr.Store(err)
					return
				}
			}
		}()
	}
	load(func(i int) error {
		p := parts[i%len(parts)]
		items := []e2etest.PushItem{{Queue: "up", Partition: p, Payload: map[string]int{"n": i}, TransactionID: fmt.Sprintf("up-%d", i)}}
		nodes := func() string { return c.Nodes[next.Add(1)%uint64(len(c.Nodes))].URL() }
		return e2etest.PushUntilAcked(ctx, nodes, items, acked)
	})
	prod := e2etest.KgoClient(t, c, kgo.DefaultProduceTopic("up-k"), kgo.RequiredAcks(kgo.AllISRAcks()))
	load(func(i int) error {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("k-%d", i))}).FirstErr(); err != nil {
			return fmt.Errorf("kafka produce %d: %w", i, err)
		}
		produced.Add(1)
		return nil
	})
	waitLoad := func(from int) {
		t.Helper()
		if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
			if err, _ := pushErr.Load().(error); err != nil {
				return false, err
			}
			return acked.Len() >= from+20, nil
		}); err != nil {
			t.Fatalf("load: %v", err)
		}
	}
	waitLoad(0)

	for i, n := range c.Nodes {
		if !n.Terminate(30 * time.Second) {
			t.Fatalf("node %d did not stop on SIGTERM", n.ID)
		}
		n.SetBinary(newBin)
		for k := range oldEnv {
			delete(n.Env, k)
		}
		if err := c.Start(n); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitAllHealthy(ctx); err != nil {
			t.Fatalf("after upgrading node %d: %v", n.ID, err)
		}
		if i < len(c.Nodes)-1 {
			// Old builds are members still: nothing is raised. Checked
			// on the upgraded node, the only one that reports formats.
			for range 3 { // a raise would come within a second or so
				active, err := formatOf(ctx, n)
				if err != nil {
					t.Fatal(err)
				}
				if slices.ContainsFunc(active, func(f uint32) bool { return f != wire.FormatV1 }) {
					t.Fatalf("node %d upgraded of %d: groups raised to %v while older builds are members", i+1, len(c.Nodes), active)
				}
				time.Sleep(500 * time.Millisecond) // watching that nothing happens
			}
		}
		waitLoad(acked.Len())
		t.Logf("node %d runs the new build; %d messages acknowledged, %d records produced", n.ID, acked.Len(), produced.Load())
	}
	// Every member runs the new build: each group goes to the newest.
	for _, n := range c.Nodes {
		if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
			active, err := formatOf(ctx, n)
			if err != nil || len(active) == 0 {
				return false, nil
			}
			return !slices.ContainsFunc(active, func(f uint32) bool { return f != wire.NewestFormat }), nil
		}); err != nil {
			t.Fatalf("node %d: groups not raised to format %d: %v", n.ID, wire.NewestFormat, err)
		}
	}
	waitLoad(acked.Len())
	close(stop)
	wg.Wait()
	if err, _ := pushErr.Load().(error); err != nil {
		t.Fatalf("load: %v", err)
	}
	// Every node holds every acknowledged message once, at its offset.
	for _, n := range c.Nodes {
		for _, p := range parts {
			e2etest.VerifyLog(t, ctx, n.URL(), "up", p, acked)
		}
	}
	// A transaction at the new format.
	tx := e2etest.KgoClient(t, c, kgo.TransactionalID("up-tx"), kgo.DefaultProduceTopic("up-k"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("in-txn")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("a transaction after the upgrade: %v", err)
	}
	cons := e2etest.KgoClient(t, c, kgo.ConsumeTopics("up-k"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	want := int(produced.Load()) + 1
	got := map[string]int{}
	for _, r := range e2etest.ConsumeN(ctx, t, cons, want) {
		got[string(r.Value)]++
	}
	if len(got) != want || got["in-txn"] != 1 {
		t.Fatalf("read %d distinct records of %d produced (the transaction's: %d)", len(got), want, got["in-txn"])
	}
	t.Logf("upgraded under load: %d messages acknowledged and read back on every node, %d Kafka records", acked.Len(), want)
}

// TestANodeTooOldForItsGroupsFormatRefusesToStart restarts one node of a
// cluster at the newest format as a build that knows only FormatV1: it
// stops at boot with one line saying to run a newer build, the others go
// on, and the node joins again once it runs the new build.
func TestANodeTooOldForItsGroupsFormatRefusesToStart(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	for _, n := range c.Nodes {
		if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
			active, err := formatOf(ctx, n)
			return err == nil && len(active) > 0 && !slices.ContainsFunc(active, func(f uint32) bool { return f != wire.NewestFormat }), nil
		}); err != nil {
			t.Fatalf("node %d: groups not raised: %v", n.ID, err)
		}
	}
	victim := c.Nodes[2]
	victim.Stop()
	victim.Env["QUEEN_TEST_NEWEST_FORMAT"] = "1"
	if err := c.Start(victim); err != nil {
		t.Fatal(err)
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) { return !victim.Running(), nil }); err != nil {
		t.Fatalf("a node too old for its groups' format kept running:\n%s", victim.Tail(2000))
	}
	if victim.ExitCode() == 0 || !victim.Grep("run a newer build") {
		t.Fatalf("exit %d; the log does not say to run a newer build:\n%s", victim.ExitCode(), victim.Tail(2000))
	}
	e2etest.PushN(t, ctx, c.Nodes[0].URL(), "still", "p", 5)
	delete(victim.Env, "QUEEN_TEST_NEWEST_FORMAT")
	if err := c.Start(victim); err != nil {
		t.Fatal(err)
	}
	if err := victim.WaitHealthy(ctx); err != nil {
		t.Fatalf("the node with the new build again: %v", err)
	}
}
