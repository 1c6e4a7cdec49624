package faults

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// clockOffsetEnv offsets one node's wall clock (a test-only setting).
const clockOffsetEnv = "QUEEN_TEST_CLOCK_OFFSET_MS"

// One node's clock is an hour ahead, then (in a fresh cluster) an hour
// behind, while every client works through every node. Entries carry the
// proposing node's clock and the state machine's time follows them, so an
// unbounded skew moves every node's idea of now: leases expire at once or
// live an hour, messages are stamped an hour off, retention deletes early.
// Beyond the workload's own checks, each run takes a 60 s lease through
// the skewed node, pushes through it, and requires that the lease still
// fences the partition and accepts its ack, and that createdAt stays
// within a few minutes of the real time.
//
// QUEEN_TEST_CLOCK_OFFSET_MS and the bound on the replicated clock come
// from another change; a build without the setting fails here at once (a
// node that does not log the setting is not skewed), and one with the
// setting but no bound fails the checks.
func TestFaultClockSkew(t *testing.T) {
	for _, off := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(fmt.Sprintf("offset%+dh", int(off.Hours())), func(t *testing.T) { clockSkewRun(t, off) })
	}
}

func clockSkewRun(t *testing.T, off time.Duration) {
	// The cluster starts with true clocks; the skewed node is restarted
	// with its offset once the workload runs, as a clock that jumps would.
	c := startFaultCluster(t, false, nil)
	ctx := e2etest.Deadline(t, 4*time.Minute)
	w := startWorkload(t, ctx, c, defaultWorkload())
	skewed, fair := c.Nodes[2], c.Nodes[0]
	skewed.Kill()
	skewed.Env[clockOffsetEnv] = strconv.FormatInt(off.Milliseconds(), 10)
	if err := c.Start(skewed); err != nil {
		t.Fatal(err)
	}
	if err := waitCaughtUp(ctx, w, skewed); err != nil {
		t.Fatal(err)
	}
	// A node that does not know the setting runs a true clock, and the
	// rest of this test would prove nothing.
	if !skewed.Grep(clockOffsetEnv) {
		t.Fatalf("node %d does not acknowledge %s in its log: this build ignores the setting, so its clock is not skewed", skewed.ID, clockOffsetEnv)
	}

	q := "clockq"
	mine := e2etest.NewAcked() // not the workload's: its checks cover its own queue
	// Two 60 s leases, one taken through a node with a true clock and one
	// through the skewed node; then entries the skewed node proposes.
	takers := map[string]*harness.Node{"leased-fair": fair, "leased-skewed": skewed}
	for _, part := range []string{"leased-fair", "leased-skewed", "stamped"} {
		var items []e2etest.PushItem
		for i := 0; i < 5; i++ {
			items = append(items, e2etest.PushItem{Queue: q, Partition: part, Payload: i, TransactionID: fmt.Sprintf("%s-%d", part, i)})
		}
		node := fair
		if part == "stamped" {
			node = skewed
		}
		if err := e2etest.PushUntilAcked(ctx, node.URL, items, mine); err != nil {
			t.Fatal(err)
		}
	}
	leasedAt := time.Now()
	leases := map[string]e2etest.PopAnswer{}
	for part, n := range takers {
		if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
			a, code, err := e2etest.Pop(ctx, n.URL(), "/api/v1/pop/queue/"+q+"/partition/"+part+"?batch=5&leaseSeconds=60")
			leases[part] = a
			return err == nil && code == http.StatusOK && len(a.Messages) == 5, nil
		}); err != nil {
			t.Fatalf("pop of %s through node %d: %v", part, n.ID, err)
		}
	}
	for i := 0; i < 20; i++ { // entries stamped by the skewed clock
		items := []e2etest.PushItem{{Queue: q, Partition: "stamped", Payload: i, TransactionID: fmt.Sprintf("tick-%d", i)}}
		if err := e2etest.PushUntilAcked(ctx, skewed.URL, items, mine); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.progress(ctx, 300); err != nil {
		t.Fatal(w.noProgress("with a skewed node", err))
	}
	var leased []e2etest.PopMessage
	for part, taken := range leases {
		leased = append(leased, taken.Messages...)
		// The 60 s lease still holds the partition: nobody else gets it.
		a, code, err := e2etest.Pop(ctx, fair.URL(), "/api/v1/pop/queue/"+q+"/partition/"+part+"?batch=5")
		if err != nil {
			t.Fatal(err)
		}
		held := time.Since(leasedAt)
		if held > 50*time.Second {
			t.Logf("%s: the checks took %v, too long to judge a 60 s lease", part, held)
			continue
		}
		if code == http.StatusOK {
			t.Errorf("%s: a 60 s lease taken through node %d ended within %v: the partition was handed out again (%d messages); skewed node %v off",
				part, takers[part].ID, held.Round(time.Millisecond), len(a.Messages), off)
		}
		// Its holder can still ack with it.
		res, code, err := ackBatch(ctx, fair.URL(), e2etest.AcksOf(taken.Messages, "completed"))
		if err != nil || code != http.StatusOK {
			t.Fatalf("ack: %d %v", code, err)
		}
		for i, r := range res {
			if !r.Success {
				t.Errorf("%s: ack of %s with its 60 s lease (taken through node %d) %v after the pop: refused (%s); skewed node %v off",
					part, taken.Messages[i].TransactionID, takers[part].ID, held.Round(time.Millisecond), e2etest.ErrText(r.Error), off)
			}
		}
	}
	// Messages the skewed node proposed are stamped with the real time.
	var stamped e2etest.PopAnswer
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		a, code, err := e2etest.Pop(ctx, fair.URL(), "/api/v1/pop/queue/"+q+"/partition/stamped?batch=100&consumerGroup=clock-reader&subscriptionMode=all")
		stamped = a
		return err == nil && code == http.StatusOK && len(a.Messages) > 0, nil
	}); err != nil {
		t.Fatal("pop of the stamped messages:", err)
	}
	bad := 0
	for _, m := range append(leased, stamped.Messages...) {
		at, err := time.Parse(time.RFC3339Nano, m.CreatedAt)
		if err != nil {
			t.Fatalf("%s createdAt %q: %v", m.TransactionID, m.CreatedAt, err)
		}
		if d := at.Sub(time.Now()); d > 5*time.Minute || d < -5*time.Minute {
			if bad++; bad <= 3 {
				t.Errorf("%s in %s stamped %s, %v off the real time (skewed node %v off)", m.TransactionID, m.Partition, m.CreatedAt, d.Round(time.Second), off)
			}
		}
	}
	if bad > 3 {
		t.Errorf("... %d messages stamped more than 5 min off the real time in all", bad)
	}
	f := &figures{Fault: fmt.Sprintf("clock%+dh", int(off.Hours())), Rounds: 1}
	w.finish(ctx, f)
}
