package ops

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/queen-mq/queen/crypto/nodetls/nodetlstest"
	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// Calls between nodes go over the node channel (the raft listener: TLS
// between nodes, the raft token), never to a peer's broker port. Here no
// node knows where another's broker port is (QUEEN_RAFT_PEERS lists raft
// addresses only), so anything that still went to a broker port would
// fail: a membership request sent to a follower is answered by the leader,
// which measures every member's lag over the channel, and ephemeral
// partitions are owned, relayed and popped across nodes. The leader counts
// the relayed request on its node route, not on its broker port, and its
// node channel refuses plain HTTP. The ephemeral switch survives a restart
// of the whole cluster.
func TestNodeCallsGoOverTheNodeChannel(t *testing.T) {
	ca, err := nodetlstest.NewCA(t.TempDir(), "cluster")
	if err != nil {
		t.Fatal(err)
	}
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: map[string]string{"QUEEN_RAFT_TOKEN": "node-calls-token",
		"QUEEN_EPHEMERAL_MEMBER_TTL_MS": "2000"}, NodeEnv: nodeTLSEnv(t, ca, 1, 2, 3), PeersWithoutHTTP: true})
	ctx := e2etest.Deadline(t, 3*time.Minute)

	// Group 0 prefers node 1 as its leader: wait until every node agrees
	// it leads, so the request below has one place to go.
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		for _, n := range c.Nodes {
			if m, err := membership(ctx, n.URL()); err != nil || m.Leader != 1 {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal("node 1 never led group 0:", err)
	}
	leader, follower := c.Nodes[0], c.Nodes[2]
	const (
		nodeGet   = `queen_node_requests_total{method="GET",route="/node/v1/membership",status="200"}`
		nodeBad   = `queen_node_requests_total{method="POST",route="/node/v1/membership/promote",status="400"}`
		publicGet = `queen_http_requests_total{method="GET",route="/api/v1/system/raft/membership",status="200"}`
	)
	count := func(sample string) float64 {
		t.Helper()
		v, err := e2etest.Metric(ctx, leader.URL(), sample)
		if err != nil {
			t.Fatal(err)
		}
		return max(v, 0)
	}
	nodeBefore, publicBefore, badBefore := count(nodeGet), count(publicGet), count(nodeBad)

	var view struct {
		Membership struct {
			Leader  uint64 `json:"leader"`
			Source  string `json:"source"`
			Members []struct {
				NodeID  uint64 `json:"nodeId"`
				Live    bool   `json:"live"`
				Problem string `json:"error"`
			} `json:"members"`
		} `json:"membership"`
	}
	if code, err := e2etest.Call(ctx, http.MethodGet, follower.URL()+membershipPath+"?timeoutMs=5000", nil, &view); err != nil || code != 200 {
		t.Fatalf("membership through the follower: %d %v", code, err)
	}
	if view.Membership.Leader != 1 || view.Membership.Source != "leader" || len(view.Membership.Members) != 3 {
		t.Fatalf("membership through the follower: %+v", view.Membership)
	}
	for _, m := range view.Membership.Members {
		if !m.Live || m.Problem != "" {
			t.Fatalf("node %d's lag was not measured over the node channel: %+v", m.NodeID, m)
		}
	}
	if n, p := count(nodeGet), count(publicGet); n != nodeBefore+1 || p != publicBefore {
		t.Fatalf("the leader served the relayed request %v times on its node route (want 1) and %v on its broker port (want 0)",
			n-nodeBefore, p-publicBefore)
	}

	// The leader's answer to a bad change comes back as it was; a bad
	// query or a tenant never leaves the follower.
	var eb e2etest.ErrorAnswer
	if code, _ := e2etest.Call(ctx, http.MethodPost, follower.URL()+membershipPath+"/promote", map[string]any{"ids": []int{9}}, &eb); code != 400 ||
		eb.Code != "bad_request" {
		t.Fatalf("promote of a stranger through the follower: %d %+v", code, eb)
	}
	if got := count(nodeBad); got != badBefore+1 {
		t.Fatalf("the leader answered %v relayed bad promotes, want 1", got-badBefore)
	}
	if code, _ := e2etest.Call(ctx, http.MethodGet, follower.URL()+membershipPath+"?timeoutMs=0", nil, &eb); code != 400 {
		t.Fatalf("timeoutMs=0: %d %+v", code, eb)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, follower.URL()+membershipPath, nil)
	req.Header.Set("x-queen-tenant", e2etest.TenantA)
	if resp, err := e2etest.HTTPClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Fatalf("membership with a tenant: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// The node channel is TLS only: a plaintext node call with the right
	// token is refused before any route.
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, "http://"+leader.RaftAddr+"/node/v1/membership", nil)
	req.Header.Set("X-Queen-Raft-Token", "node-calls-token")
	if resp, err := e2etest.HTTPClient.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plaintext node call: %d", resp.StatusCode)
		}
	}

	// Ephemeral queues: every node sees the others live, and partitions
	// pushed through one node are popped through another from their owners.
	e2etest.WaitEphemeralLive(ctx, t, c)
	owners := map[string]bool{}
	for p := 0; p < 12; p++ {
		part := fmt.Sprint("p", p)
		code, node, b := e2etest.EphemeralCall(ctx, t, "POST", c.Nodes[p%3].URL()+"/api/v1/ephemeral/push", "",
			map[string]any{"queue": "nq", "partition": part, "messages": e2etest.EphemeralMessages(3, part)}, nil)
		if code != 201 {
			t.Fatalf("push %s: %d %s", part, code, b)
		}
		owners[node] = true
		var a e2etest.EphemeralPopAnswer
		code, popNode, b := e2etest.EphemeralCall(ctx, t, "GET", c.Nodes[(p+1)%3].URL()+"/api/v1/ephemeral/pop?queue=nq&batch=10&partition="+part, "", nil, &a)
		if code != 200 || len(a.Messages) != 3 || popNode != node {
			t.Fatalf("pop %s through node %d: %d from node %s (owner %s) %s", part, (p+1)%3+1, code, popNode, node, b)
		}
	}
	if len(owners) < 2 {
		t.Fatalf("12 partitions all owned by one node: %v", owners)
	}

	// The switch, set off on one node, stays off after every node restarts.
	var sys e2etest.EphemeralSystem
	if code, _, b := e2etest.EphemeralCall(ctx, t, "POST", follower.URL()+"/api/v1/system/ephemeral", "", map[string]any{"enabled": false}, &sys); code != 200 || sys.Enabled {
		t.Fatalf("switch off: %d %s", code, b)
	}
	c.StopAll()
	for _, n := range c.Nodes {
		if err := c.Start(n); err != nil {
			t.Fatal(err)
		}
	}
	hctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := c.WaitAllHealthy(hctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
			var s e2etest.EphemeralSystem
			code, _, _ := e2etest.EphemeralCall(ctx, t, "GET", n.URL()+"/api/v1/system/ephemeral", "", nil, &s)
			return code == 200 && !s.Enabled, nil
		}); err != nil {
			t.Fatalf("node %d came back with the ephemeral switch on: %v", n.ID, err)
		}
		if code, _, b := e2etest.EphemeralCall(ctx, t, "POST", n.URL()+"/api/v1/ephemeral/push", "",
			map[string]any{"queue": "nq", "messages": e2etest.EphemeralMessages(1, "x")}, nil); code != 503 {
			t.Fatalf("push on node %d with the switch off: %d %s", n.ID, code, b)
		}
	}
}
