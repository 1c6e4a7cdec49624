package ops

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// Membership changes on real processes (spec §2.17, §4.4; runbooks in
// docs/operations.md).

const membershipPath = "/api/v1/system/raft/membership"

type membershipView struct {
	Leader   uint64   `json:"leader"`
	Voters   []uint64 `json:"voters"`
	Learners []uint64 `json:"learners"`
	Members  []struct {
		NodeID  uint64 `json:"nodeId"`
		Live    bool   `json:"live"`
		Lag     uint64 `json:"lag"`
		Groups  int    `json:"groups"`
		Problem string `json:"error"`
	} `json:"members"`
	Groups []struct {
		Group    int      `json:"group"`
		Voters   []uint64 `json:"voters"`
		Learners []uint64 `json:"learners"`
	} `json:"groups"`
}

func membership(ctx context.Context, base string) (membershipView, error) {
	var out struct {
		Membership membershipView `json:"membership"`
	}
	code, err := e2etest.Call(ctx, http.MethodGet, base+membershipPath, nil, &out)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("membership: %d", code)
	}
	return out.Membership, err
}

// membershipChange sends one change, retrying while the answer is a 409
// that time cures (learner_behind, in_flight) or the node is unreachable,
// until it succeeds or ctx ends.
func membershipChange(t *testing.T, ctx context.Context, method, url string, body any) {
	t.Helper()
	var last string
	err := harness.Poll(ctx, 200*time.Millisecond, func() (bool, error) {
		var eb e2etest.ErrorAnswer
		code, err := e2etest.Call(ctx, method, url, body, &eb)
		switch {
		case err != nil:
			if err.Error() != last {
				t.Logf("%s %s: %v", method, url, err)
				last = err.Error()
			}
			return false, nil
		case code == http.StatusOK:
			return true, nil
		case code == http.StatusConflict && (eb.Code == "learner_behind" || eb.Code == "in_flight" || eb.Code == "no_quorum"):
			if msg := eb.Code + ": " + eb.Error; msg != last {
				// Each new refusal is logged: a change that never
				// lands must say why in the test's output.
				t.Logf("%s %s: %s", method, url, msg)
				last = msg
			}
			return false, nil
		}
		return false, fmt.Errorf("%s %s: %d %s %s", method, url, code, eb.Code, eb.Error)
	})
	if err != nil {
		// The membership as the node sees it (each member's liveness and
		// lag) says what the change was waiting for.
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m, merr := membership(dctx, url[:strings.Index(url, membershipPath)])
		t.Fatalf("%s %s: %v (last: %s); membership now: %+v %v", method, url, err, last, m, merr)
	}
}

// waitVoters polls a node until every group has exactly voters and no
// learners.
func waitVoters(t *testing.T, ctx context.Context, base string, voters ...uint64) {
	t.Helper()
	var last membershipView
	err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		m, err := membership(ctx, base)
		if err != nil {
			return false, nil
		}
		last = m
		for _, g := range m.Groups {
			if !slices.Equal(g.Voters, voters) || len(g.Learners) > 0 {
				return false, nil
			}
		}
		return len(m.Groups) > 0, nil
	})
	if err != nil {
		t.Fatalf("voters never became %v: %v (last %+v)", voters, err, last)
	}
}

// loadWriter pushes batches of 10 to partitions p0..p3 of queue through the
// nodes urls() lists, retrying each batch with the same transaction ids on
// another node until it is acknowledged, until stopped.
type loadWriter struct {
	a    *e2etest.Acked
	stop context.CancelFunc
	done chan error
}

func startLoad(ctx context.Context, queue string, urls func() []string) *loadWriter {
	wctx, stop := context.WithCancel(ctx)
	w := &loadWriter{a: e2etest.NewAcked(), stop: stop, done: make(chan error, 1)}
	go func() {
		var turn int
		var mu sync.Mutex
		next := func() string {
			mu.Lock()
			defer mu.Unlock()
			u := urls()
			turn++
			return u[turn%len(u)]
		}
		for b := 0; ; b++ {
			items := make([]e2etest.PushItem, 10)
			for i := range items {
				items[i] = e2etest.PushItem{Queue: queue, Partition: fmt.Sprintf("p%d", b%4), Payload: b*10 + i, TransactionID: fmt.Sprintf("b%d-%d", b, i)}
			}
			if err := e2etest.PushUntilAcked(wctx, next, items, w.a); err != nil {
				if wctx.Err() != nil {
					err = nil
				}
				w.done <- err
				return
			}
		}
	}()
	return w
}

// finish stops the writer and fails on what it saw.
func (w *loadWriter) finish(t *testing.T) {
	t.Helper()
	w.stop()
	if err := <-w.done; err != nil {
		t.Fatal(err)
	}
}

// waitGrowth waits until n more messages were acknowledged.
func (w *loadWriter) waitGrowth(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	from := w.a.Len()
	if err := harness.Poll(ctx, 10*time.Millisecond, func() (bool, error) { return w.a.Len() >= from+n, nil }); err != nil {
		t.Fatal("writes stalled:", err)
	}
}

// verifyServes checks that node holds every acknowledged message of queue,
// once caught up with ref's high-water marks.
func verifyServes(t *testing.T, ctx context.Context, ref, node *harness.Node, queue string, a *e2etest.Acked) {
	t.Helper()
	for p := 0; p < 4; p++ {
		part := fmt.Sprintf("p%d", p)
		_, want, err := e2etest.FetchAll(ctx, ref.URL(), queue, part)
		if err != nil {
			t.Fatal(err)
		}
		if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
			_, hwm, err := e2etest.FetchAll(ctx, node.URL(), queue, part)
			return err == nil && hwm >= want, nil
		}); err != nil {
			t.Fatalf("node %d never caught up on %s: %v", node.ID, part, err)
		}
		e2etest.VerifyLog(t, ctx, node.URL(), queue, part, a)
	}
}

func urlsOf(nodes ...*harness.Node) func() []string {
	return func() []string {
		var out []string
		for _, n := range nodes {
			out = append(out, n.URL())
		}
		return out
	}
}

func TestMembershipReplaceDeadNode(t *testing.T) {
	const groups = 2
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Groups: groups})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	w := startLoad(ctx, "replace", urlsOf(n1, n2))
	w.waitGrowth(t, ctx, 200)

	// Node 3's disk is lost for good.
	n3.Kill()
	if err := os.RemoveAll(n3.Dir); err != nil {
		t.Fatal(err)
	}
	c.Remove(n3)

	// Bad requests change nothing.
	var eb e2etest.ErrorAnswer
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, n1.URL()+membershipPath+"/members/3", nil)
	req.Header.Set("x-queen-tenant", "7d0f4bba-44a3-4b77-9f21-8c8a8c7d6a11")
	if resp, err := e2etest.HTTPClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("tenant-scoped membership change: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if code, _ := e2etest.Call(ctx, http.MethodDelete, n1.URL()+membershipPath+"/members/9", nil, &eb); code != http.StatusNotFound {
		t.Fatalf("removing a non-member: %d %+v", code, eb)
	}
	if code, _ := e2etest.Call(ctx, http.MethodPost, n1.URL()+membershipPath+"/learners", map[string]any{"id": 4, "raft": "nope"}, &eb); code != http.StatusBadRequest {
		t.Fatalf("bad raft address: %d %+v", code, eb)
	}

	membershipChange(t, ctx, http.MethodDelete, n1.URL()+membershipPath+"/members/3", nil)
	waitVoters(t, ctx, n2.URL(), 1, 2)
	w.waitGrowth(t, ctx, 100)

	// An empty node 4 joins and is added as a learner, then promoted.
	n4, err := c.AddNode(t.TempDir(), groups, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(n4); err != nil {
		t.Fatal(err)
	}
	// A removed id can never return.
	if code, _ := e2etest.Call(ctx, http.MethodPost, n2.URL()+membershipPath+"/learners",
		map[string]any{"id": 3, "raft": n4.RaftAddr, "http": n4.HTTPAddr}, &eb); code != http.StatusBadRequest {
		t.Fatalf("re-adding removed id 3: %d %+v", code, eb)
	}
	membershipChange(t, ctx, http.MethodPost, n2.URL()+membershipPath+"/learners",
		map[string]any{"id": n4.ID, "raft": n4.RaftAddr, "http": n4.HTTPAddr})
	membershipChange(t, ctx, http.MethodPost, n1.URL()+membershipPath+"/promote", map[string]any{"ids": []int{n4.ID}})
	for _, n := range []*harness.Node{n1, n2, n4} {
		waitVoters(t, ctx, n.URL(), 1, 2, 4)
	}
	if err := n4.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	w.waitGrowth(t, ctx, 100)
	w.finish(t)
	t.Logf("%d messages acknowledged across the replacement", w.a.Len())
	verifyServes(t, ctx, n1, n4, "replace", w.a)
}

func TestMembershipGrowToFiveAndShrinkToThree(t *testing.T) {
	const groups = 2
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Groups: groups})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	n1, n3 := c.Nodes[0], c.Nodes[2]
	w := startLoad(ctx, "grow", urlsOf(n1, n3))
	w.waitGrowth(t, ctx, 200)

	var added []*harness.Node
	for i := 0; i < 2; i++ {
		n, err := c.AddNode(t.TempDir(), groups, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(n); err != nil {
			t.Fatal(err)
		}
		membershipChange(t, ctx, http.MethodPost, n1.URL()+membershipPath+"/learners",
			map[string]any{"id": n.ID, "raft": n.RaftAddr, "http": n.HTTPAddr})
		added = append(added, n)
	}
	n4, n5 := added[0], added[1]
	// Both learners become voters in one call once caught up.
	membershipChange(t, ctx, http.MethodPut, n3.URL()+membershipPath+"/voters", map[string]any{"voters": []int{1, 2, 3, 4, 5}})
	waitVoters(t, ctx, n5.URL(), 1, 2, 3, 4, 5)
	w.waitGrowth(t, ctx, 200)

	// Shrink to 1, 3, 5: an original node and a new one leave.
	var eb e2etest.ErrorAnswer
	if code, _ := e2etest.Call(ctx, http.MethodPut, n1.URL()+membershipPath+"/voters", map[string]any{"voters": []int{1, 3, 9}}, &eb); code != http.StatusBadRequest {
		t.Fatalf("voters naming a non-member: %d %+v", code, eb)
	}
	membershipChange(t, ctx, http.MethodPut, n1.URL()+membershipPath+"/voters", map[string]any{"voters": []int{1, 3, 5}})
	for _, n := range []*harness.Node{n1, n3, n5} {
		waitVoters(t, ctx, n.URL(), 1, 3, 5)
	}
	c.Nodes[1].Stop()
	n4.Stop()
	w.waitGrowth(t, ctx, 200)
	w.finish(t)
	t.Logf("%d messages acknowledged while growing and shrinking", w.a.Len())
	for _, n := range []*harness.Node{n3, n5} {
		verifyServes(t, ctx, n1, n, "grow", w.a)
	}
	verifyServes(t, ctx, n3, n1, "grow", w.a)
}

func TestMembershipForceRecoverFromLostMajority(t *testing.T) {
	const groups = 2
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Groups: groups})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	w := startLoad(ctx, "dr", urlsOf(n1, n2, n3))
	w.waitGrowth(t, ctx, 300)
	w.finish(t)
	// Node 1, the survivor, has applied every acknowledged message.
	verifyServes(t, ctx, n2, n1, "dr", w.a)

	// Nodes 2 and 3 are gone for good; node 1 restarts with the recovery
	// flag.
	for _, n := range []*harness.Node{n2, n3} {
		n.Kill()
		if err := os.RemoveAll(n.Dir); err != nil {
			t.Fatal(err)
		}
		c.Remove(n)
	}
	n1.Kill()
	n1.Env["QUEEN_RAFT_FORCE_RECOVER"] = "true"
	start := time.Now()
	if err := c.Start(n1); err != nil {
		t.Fatal(err)
	}
	if err := n1.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("survivor recovered and healthy in %v", time.Since(start).Round(time.Millisecond))
	if !n1.Grep("FORCE RECOVER") {
		t.Fatal("the recovery was not logged")
	}
	waitVoters(t, ctx, n1.URL(), 1)
	for p := 0; p < 4; p++ {
		e2etest.VerifyLog(t, ctx, n1.URL(), "dr", fmt.Sprintf("p%d", p), w.a)
	}

	// Two new empty nodes are added back under load.
	w2 := startLoad(ctx, "dr-after", urlsOf(n1))
	var added []*harness.Node
	for i := 0; i < 2; i++ {
		n, err := c.AddNode(t.TempDir(), groups, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(n); err != nil {
			t.Fatal(err)
		}
		membershipChange(t, ctx, http.MethodPost, n1.URL()+membershipPath+"/learners",
			map[string]any{"id": n.ID, "raft": n.RaftAddr, "http": n.HTTPAddr})
		added = append(added, n)
	}
	membershipChange(t, ctx, http.MethodPut, n1.URL()+membershipPath+"/voters",
		map[string]any{"voters": []int{1, added[0].ID, added[1].ID}})
	waitVoters(t, ctx, added[1].URL(), 1, uint64(added[0].ID), uint64(added[1].ID))
	t.Logf("two nodes added and promoted in %v", time.Since(start).Round(time.Millisecond))
	w2.waitGrowth(t, ctx, 100)
	w2.finish(t)
	for _, n := range added {
		verifyServes(t, ctx, n1, n, "dr", w.a)
		verifyServes(t, ctx, n1, n, "dr-after", w2.a)
	}
}
