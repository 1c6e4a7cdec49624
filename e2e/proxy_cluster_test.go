package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queen-mq/queen/e2e/harness"
)

// TestProxyRevocationReachesEveryNode: on 3 nodes each running the proxy
// on its own port, a key minted through one node's control plane works on
// all three, and once revoked through another it stops working on all
// three within 2 s.
func TestProxyRevocationReachesEveryNode(t *testing.T) {
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
		nodeEnv[i] = map[string]string{"QUEEN_PROXY_PORT": strconv.Itoa(p)}
		bases = append(bases, fmt.Sprintf("http://127.0.0.1:%d", p))
	}
	c := startCluster(t, harness.Options{Nodes: 3, Groups: 2, Env: env, NodeEnv: nodeEnv})
	ctx := deadline(t, 50*time.Second)
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
}
