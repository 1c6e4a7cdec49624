package http

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// TestProxyOnThreeNodes: on 3 nodes each running the proxy on its own
// port, a key minted through one node's control plane works on all three,
// and once revoked through another it stops working on all three within
// 2 s. Then usage a node cannot write (no majority) is spooled at its
// shutdown and appears after the restart.
func TestProxyOnThreeNodes(t *testing.T) {
	const token = "cp-token-cluster"
	bootKey, _ := newAPIKey(t)
	env := map[string]string{
		"QUEEN_PROXY_EMBEDDED": "true", "QUEEN_PROXY_CP_TOKEN": token,
		"QUEEN_PROXY_BOOTSTRAP_TENANT": "acme", "QUEEN_PROXY_BOOTSTRAP_API_KEY": bootKey,
	}
	nodeEnv := map[int]map[string]string{}
	var bases []string
	for i := 1; i <= 3; i++ {
		p := proxyPort(t)
		nodeEnv[i] = map[string]string{"QUEEN_PROXY_PORT": strconv.Itoa(p), "QUEEN_PROXY_METER_FLUSH_MS": "200"}
		bases = append(bases, fmt.Sprintf("http://127.0.0.1:%d", p))
	}
	// Node 3 writes its usage only at shutdown, so it still holds it when
	// the others are gone.
	nodeEnv[3]["QUEEN_PROXY_METER_FLUSH_MS"] = "600000"
	c := e2etest.StartPreparedCluster(t, harness.Options{Nodes: 3, Groups: 2, Env: env, NodeEnv: nodeEnv}, func(c *harness.Cluster) {
		for _, n := range c.Nodes {
			n.Env["QUEEN_PROXY_SPOOL_DIR"] = filepath.Join(n.Dir, "spool")
		}
	})
	ctx := e2etest.Deadline(t, 50*time.Second)
	for _, n := range c.Nodes {
		if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) { return n.Grep("proxy: bootstrap tenant ready"), nil }); err != nil {
			t.Fatalf("node %d never bootstrapped", n.ID)
		}
	}
	_, hash := newAPIKey(t)
	var prov struct {
		ClusterID string `json:"cluster_id"`
	}
	if code := cp(t, ctx, bases[0], token, "POST", "/api/cp/provision", provisionBody("revoke", uuid.NewString(), hash, "dev", "read"), &prov); code != http.StatusOK {
		t.Fatalf("provision: %d", code)
	}
	key, keyHash := newAPIKey(t)
	var minted struct {
		ID string `json:"id"`
	}
	body := fmt.Sprintf(`{"cluster_id":%q,"name":"ci","key_hash":%q,"scopes":["read","produce"]}`, prov.ClusterID, keyHash)
	if code := cp(t, ctx, bases[0], token, "POST", "/api/cp/keys", body, &minted); code != http.StatusCreated {
		t.Fatalf("mint: %d", code)
	}
	if code := cp(t, ctx, bases[0], token, "POST", "/api/cp/keys", body, &minted); code != http.StatusOK {
		t.Fatalf("mint again: %d, want 200 with the same id", code)
	}
	status := func(base string) int {
		code, _, _ := proxyDo(t, ctx, base, proxyReq{method: "GET", path: "/api/v1/resources/queues", bearer: key, host: "revoke.queen.example.com"})
		return code
	}
	for _, base := range bases {
		if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) { return status(base) == http.StatusOK, nil }); err != nil {
			t.Fatalf("the minted key never worked on %s", base)
		}
	}
	if code := cp(t, ctx, bases[1], token, "DELETE", "/api/cp/keys/"+minted.ID, "", nil); code != http.StatusOK {
		t.Fatalf("revoke: %d", code)
	}
	revoked := time.Now()
	for _, base := range bases {
		if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) { return status(base) == http.StatusUnauthorized, nil }); err != nil {
			t.Fatalf("the revoked key still works on %s", base)
		}
		if took := time.Since(revoked); took > 2*time.Second {
			t.Fatalf("revocation reached %s after %v, want within 2 s", base, took)
		}
	}
	t.Logf("revocation reached all 3 nodes within %v", time.Since(revoked))
	if code := cp(t, ctx, bases[2], token, "DELETE", "/api/cp/keys/"+minted.ID, "", nil); code != http.StatusOK {
		t.Fatalf("revoke again: %d, want 200", code)
	}
	spoolAcrossARestart(t, ctx, c, bases, token, bootKey)
}

// spoolAcrossARestart pushes through node 3, takes the majority away so
// node 3 cannot write its usage at shutdown, restarts everyone and reads
// the usage back through node 1.
func spoolAcrossARestart(t *testing.T, ctx context.Context, c *harness.Cluster, bases []string, token, bootKey string) {
	t.Helper()
	code, _, body := proxyDo(t, ctx, bases[2], proxyReq{method: "POST", path: "/api/v1/push", bearer: bootKey, host: "acme.queen.example.com",
		body: pushBody("spooled", `{"n":1}`, `{"n":2}`)})
	if code != http.StatusCreated {
		t.Fatalf("push through node 3: %d %s", code, body)
	}
	var acme struct {
		Cluster struct {
			ID string `json:"id"`
		} `json:"cluster"`
	}
	if code := cp(t, ctx, bases[0], token, "GET", "/api/cp/clusters/acme", "", &acme); code != http.StatusOK {
		t.Fatalf("cluster acme: %d", code)
	}
	c.Nodes[0].Stop()
	c.Nodes[1].Stop()
	c.Nodes[2].Stop()
	spool := filepath.Join(c.Nodes[2].Dir, "spool")
	if files, _ := filepath.Glob(filepath.Join(spool, "*.json")); len(files) != 1 || !c.Nodes[2].Grep("usage spooled") {
		t.Fatalf("node 3 spooled %v:\n%s", files, c.Nodes[2].Tail(3000))
	}
	for _, n := range c.Nodes {
		if err := c.Start(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitAllHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	var usage struct {
		Minutes []struct {
			Op   string `json:"op"`
			Msgs int    `json:"msgs"`
		} `json:"minutes"`
	}
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		if cp(t, ctx, bases[0], token, "GET", "/api/cp/clusters/"+acme.Cluster.ID+"/usage", "", &usage) != http.StatusOK {
			return false, nil
		}
		for _, m := range usage.Minutes {
			if m.Op == "push" && m.Msgs == 2 {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("the spooled usage never appeared: %+v", usage)
	}
	if files, _ := filepath.Glob(filepath.Join(spool, "*.json")); len(files) != 0 {
		t.Fatalf("spool files left after the replay: %v", files)
	}
}
