package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

func TestSingleNodeSIGKILLKeepsEveryAcknowledgedMessage(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	node := c.Nodes[0]
	ctx := e2etest.Deadline(t, 3*time.Minute)
	a := e2etest.NewAcked()
	partitions := []string{"p0", "p1", "p2", "p3"}

	// Eight writers push batches of 50 until 10,000 messages are
	// acknowledged, and keep pushing while the node is killed.
	const target = 10000
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var writeErr atomic.Value
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for b := 0; wctx.Err() == nil; b++ {
				items := make([]e2etest.PushItem, 50)
				part := partitions[(w+b)%len(partitions)]
				for i := range items {
					txn := fmt.Sprintf("w%d-b%d-i%d", w, b, i)
					items[i] = e2etest.PushItem{Queue: "durable", Partition: part, Payload: map[string]any{"w": w, "b": b, "i": i}, TransactionID: txn}
				}
				res, code, err := e2etest.Push(wctx, node.URL(), items)
				if err != nil || code != http.StatusCreated {
					return // the node is gone: unacknowledged writes may or may not be stored
				}
				for i, r := range res {
					if err := a.Add(items[i].TransactionID, part, r.Offset); err != nil {
						writeErr.Store(err)
						return
					}
				}
			}
		}(w)
	}
	err := harness.Poll(ctx, 5*time.Millisecond, func() (bool, error) { return a.Len() >= target, nil })
	if err != nil {
		t.Fatal(err)
	}
	node.Kill()
	stopWriters()
	wg.Wait()
	if err, _ := writeErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d messages acknowledged before SIGKILL", a.Len())

	if err := c.Start(node); err != nil {
		t.Fatal(err)
	}
	if err := node.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range partitions {
		recs := e2etest.VerifyLog(t, ctx, node.URL(), "durable", p, a)
		total += len(recs)
		// Order per partition: each writer's batches appear in the order
		// they were acknowledged.
		last := map[int][2]int{}
		for _, r := range recs {
			var m struct{ W, B, I int }
			if err := json.Unmarshal(r.Payload, &m); err != nil {
				t.Fatal(err)
			}
			if prev, ok := last[m.W]; ok && (m.B < prev[0] || (m.B == prev[0] && m.I <= prev[1])) {
				t.Fatalf("%s: writer %d message b%d/i%d after b%d/i%d", p, m.W, m.B, m.I, prev[0], prev[1])
			}
			last[m.W] = [2]int{m.B, m.I}
		}
	}
	if total < a.Len() {
		t.Fatalf("%d records after restart, %d acknowledged", total, a.Len())
	}
}

func TestClusterLeaderSIGKILLLosesNothing(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 4*time.Minute)
	a := e2etest.NewAcked()
	items := []e2etest.PushItem{{Queue: "ha", Partition: "p", Payload: "warm-up", TransactionID: "warm-up"}}
	if err := e2etest.PushUntilAcked(ctx, func() string { return c.Nodes[0].URL() }, items, a); err != nil {
		t.Fatal(err)
	}
	// The leader of the group holding the partition, and a follower of it.
	leader := e2etest.GroupLeader(t, ctx, c, e2etest.FirstPartitionGroup(ctx, t, c.Nodes[0].URL(), "ha"))
	follower := c.Nodes[(leader+1)%3]
	// Writes through a follower are proposed locally and forwarded by raft.

	// A writer pushes continuously to the follower, retrying each batch
	// with the same transaction ids until it is acknowledged.
	var lastAck atomic.Int64
	wctx, stopWriter := context.WithCancel(ctx)
	writerDone := make(chan error, 1)
	go func() {
		for b := 0; ; b++ {
			items := make([]e2etest.PushItem, 10)
			for i := range items {
				items[i] = e2etest.PushItem{Queue: "ha", Partition: "p", Payload: b*10 + i, TransactionID: fmt.Sprintf("b%d-%d", b, i)}
			}
			if err := e2etest.PushUntilAcked(wctx, func() string { return follower.URL() }, items, a); err != nil {
				if wctx.Err() != nil {
					err = nil
				}
				writerDone <- err
				return
			}
			lastAck.Store(time.Now().UnixNano())
		}
	}()
	if err := harness.Poll(ctx, 10*time.Millisecond, func() (bool, error) { return a.Len() > 200, nil }); err != nil {
		t.Fatal(err)
	}
	killed := c.Nodes[leader]
	killed.Kill()
	killedAt := time.Now()
	// The cluster accepts writes again within a few seconds.
	recoverCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err := harness.Poll(recoverCtx, 10*time.Millisecond, func() (bool, error) {
		return lastAck.Load() > killedAt.Add(100*time.Millisecond).UnixNano(), nil
	})
	cancel()
	if err != nil {
		t.Fatal("no write acknowledged after the leader was killed:", err)
	}
	t.Logf("writes acknowledged again %v after SIGKILL of the leader", time.Unix(0, lastAck.Load()).Sub(killedAt).Round(time.Millisecond))
	before := a.Len()
	if err := harness.Poll(ctx, 10*time.Millisecond, func() (bool, error) { return a.Len() > before+200, nil }); err != nil {
		t.Fatal(err)
	}
	stopWriter()
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}

	// The killed node comes back and catches up: all three hold the same
	// log, with every acknowledged message exactly once.
	if err := c.Start(killed); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAllHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	var want uint64
	_, want, err = e2etest.FetchAll(ctx, follower.URL(), "ha", "p")
	if err != nil {
		t.Fatal(err)
	}
	if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) {
		_, hwm, err := e2etest.FetchAll(ctx, killed.URL(), "ha", "p")
		return err == nil && hwm >= want, nil
	}); err != nil {
		t.Fatal("restarted node did not catch up:", err)
	}
	var logs [][]e2etest.FetchRecord
	for _, n := range c.Nodes {
		logs = append(logs, e2etest.VerifyLog(t, ctx, n.URL(), "ha", "p", a))
	}
	for i := 1; i < len(logs); i++ {
		if len(logs[i]) != len(logs[0]) {
			t.Fatalf("node %d holds %d records, node 1 %d", i+1, len(logs[i]), len(logs[0]))
		}
		for j := range logs[0] {
			if logs[i][j].TransactionID != logs[0][j].TransactionID {
				t.Fatalf("nodes 1 and %d differ at offset %d", i+1, j)
			}
		}
	}
	t.Logf("%d acknowledged messages, %d records on each node", a.Len(), len(logs[0]))
}

func TestWrongRaftTokenIsRefused(t *testing.T) {
	ctx := e2etest.Deadline(t, 2*time.Minute)
	c, err := harness.NewCluster(e2etest.QueenBinary(t), harness.Options{Nodes: 3, BaseDir: t.TempDir(),
		Env: map[string]string{"QUEEN_RAFT_TOKEN": "the-cluster-token"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.StopAll)
	bad := c.Nodes[2]
	bad.Env["QUEEN_RAFT_TOKEN"] = "not-the-token"
	for _, n := range c.Nodes {
		if err := c.Start(n); err != nil {
			t.Fatal(err)
		}
	}
	good := c.Nodes[:2]
	for _, n := range good {
		if err := n.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	a := e2etest.NewAcked()
	if err := e2etest.PushUntilAcked(ctx, func() string { return good[0].URL() },
		[]e2etest.PushItem{{Queue: "q", Partition: "p", Payload: 1, TransactionID: "t1"}}, a); err != nil {
		t.Fatal(err)
	}

	// Its peers answer its raft RPCs with 401 (counted on both sides).
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		for _, n := range good {
			if v, err := e2etest.Metric(ctx, n.URL(), `queen_raft_rpc_refused_total{group="0"}`); err != nil || v < 1 {
				return false, nil
			}
		}
		v, err := e2etest.Metric(ctx, bad.URL(), `queen_raft_rpc_rejected_total{group="0"}`)
		return err == nil && v >= 1, nil
	}); err != nil {
		t.Fatal("peers did not refuse the wrong token:", err)
	}
	// And it makes no progress: nothing applied, no data, never healthy.
	if v, err := e2etest.Metric(ctx, bad.URL(), `queen_raft_applied_index{group="0"}`); err != nil || v != 0 {
		t.Fatalf("node with the wrong token applied %v entries (%v)", v, err)
	}
	var e struct {
		Entries []e2etest.FetchEntry `json:"entries"`
	}
	body := map[string]any{"entries": []map[string]any{{"queue": "q", "partition": "p", "offset": 0}}}
	if code, err := e2etest.Call(ctx, http.MethodPost, bad.URL()+"/api/v1/fetch", body, &e); err != nil || code != 200 || e.Entries[0].Error == "" {
		t.Fatalf("node with the wrong token serves data: %d %v %+v", code, err, e)
	}
	if code, _ := e2etest.Call(ctx, http.MethodGet, bad.URL()+"/health", nil, nil); code != http.StatusServiceUnavailable {
		t.Fatalf("node with the wrong token reports healthy: %d", code)
	}
	if !bad.Grep("refused this node's QUEEN_RAFT_TOKEN") {
		t.Fatal("the refused node did not log the refusal")
	}
	// A raw RPC with a wrong token gets 401 before its body is looked at.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+good[0].RaftAddr+"/raft/v1/stream", nil)
	req.Header.Set("X-Queen-Raft-Token", "guess")
	req.Header.Set("X-Queen-Raft-Group", "0")
	resp, err := e2etest.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("raw RPC with a wrong token: %d", resp.StatusCode)
	}
}

func TestEachGroupListensOnRaftPortPlusN(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Groups: 4})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, time.Minute)
	var h struct {
		Groups []struct {
			Group int    `json:"group"`
			Role  string `json:"role"`
		} `json:"groups"`
	}
	if code, err := e2etest.Call(ctx, http.MethodGet, n.URL()+"/health", nil, &h); err != nil || code != 200 || len(h.Groups) != 4 {
		t.Fatalf("health: %d %v %+v", code, err, h)
	}
	var base int
	fmt.Sscanf(n.RaftAddr, "127.0.0.1:%d", &base)
	for g := 0; g < 4; g++ {
		if h.Groups[g].Group != g || h.Groups[g].Role != "leader" {
			t.Fatalf("group %d: %+v", g, h.Groups[g])
		}
		// Port base+g answers for group g and refuses to be group g+1.
		status := func(group int) int {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/raft/v1/stream", base+g), nil)
			req.Header.Set("X-Queen-Raft-Group", fmt.Sprint(group))
			resp, err := e2etest.HTTPClient.Do(req)
			if err != nil {
				t.Fatalf("group %d port %d: %v", g, base+g, err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if s := status(g); s == http.StatusMisdirectedRequest || s >= 500 {
			t.Fatalf("port %d refused its own group %d: %d", base+g, g, s)
		}
		if s := status(g + 1); s != http.StatusMisdirectedRequest {
			t.Fatalf("port %d accepted group %d: %d", base+g, g+1, s)
		}
	}
}

func TestSIGTERMHandsLeadershipOffAndExitsCleanly(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	leader := e2etest.GroupLeader(t, ctx, c, 0)
	old := c.Nodes[leader]
	if !old.Terminate(30 * time.Second) {
		t.Fatal("the leader did not exit within 30 s of SIGTERM")
	}
	if code := old.ExitCode(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if !old.Grep("leadership handed off") || !old.Grep("shutdown: complete") {
		t.Fatalf("no hand-off logged:\n%s", old.Tail(3000))
	}
	// The survivors have a leader and take writes.
	a := e2etest.NewAcked()
	survivor := c.Nodes[(leader+1)%3]
	if err := e2etest.PushUntilAcked(ctx, func() string { return survivor.URL() },
		[]e2etest.PushItem{{Queue: "q", Partition: "p", Payload: 1, TransactionID: "after-term"}}, a); err != nil {
		t.Fatal(err)
	}
}
