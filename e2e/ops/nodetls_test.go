package ops

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/crypto/nodetls/nodetlstest"
	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// TLS between nodes (QUEEN_RAFT_TLS_*): real nodes, a CA made here.

// nodeTLSEnv gives node ids a certificate of ca each (and ca as the CA to
// check peers with).
func nodeTLSEnv(t *testing.T, ca *nodetlstest.CA, ids ...int) map[int]map[string]string {
	t.Helper()
	out := map[int]map[string]string{}
	for _, id := range ids {
		cert, key, err := ca.Issue(t.TempDir(), nodetlstest.Leaf{Name: fmt.Sprintf("node%d", id)})
		if err != nil {
			t.Fatal(err)
		}
		out[id] = map[string]string{"QUEEN_RAFT_TLS_CERT": cert, "QUEEN_RAFT_TLS_KEY": key, "QUEEN_RAFT_TLS_CA": ca.CertPEM}
	}
	return out
}

func TestNodeTLSClusterServesHTTPAndKafka(t *testing.T) {
	ca, err := nodetlstest.NewCA(t.TempDir(), "cluster")
	if err != nil {
		t.Fatal(err)
	}
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: map[string]string{"QUEEN_RAFT_TOKEN": "tls-cluster-token"},
		NodeEnv: nodeTLSEnv(t, ca, 1, 2, 3)})
	ctx := e2etest.Deadline(t, 90*time.Second)
	for _, n := range c.Nodes {
		if !n.Grep(`"config: node_tls" mode=mutual`) {
			t.Fatalf("node %d does not log the TLS mode:\n%s", n.ID, n.Tail(3000))
		}
	}

	// Pushed on node 1, read from node 3's own store once replicated.
	a := e2etest.NewAcked()
	var items []e2etest.PushItem
	for i := 0; i < 5; i++ {
		items = append(items, e2etest.PushItem{Queue: "tls-q", Partition: "p", Payload: i, TransactionID: fmt.Sprintf("tls-%d", i)})
	}
	if err := e2etest.PushUntilAcked(ctx, c.Nodes[0].URL, items, a); err != nil {
		t.Fatal(err)
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		recs, _, err := e2etest.FetchAll(ctx, c.Nodes[2].URL(), "tls-q", "p")
		return err == nil && len(recs) == len(items), nil
	}); err != nil {
		t.Fatal("node 3 never had the records pushed on node 1:", err)
	}

	// Kafka produce and fetch, through every node's listener.
	prod := e2etest.KgoClient(t, c, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("tls-orders"))
	for i := 0; i < 10; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf(`{"n":%d}`, i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons := e2etest.KgoClient(t, c, kgo.ConsumeTopics("tls-orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for _, r := range e2etest.ConsumeN(ctx, t, cons, 10) {
		var v struct{ N int }
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("record %q: %v", r.Value, err)
		}
	}

	// Between nodes of one CA nothing is refused (the senders' TCP
	// reachability probes are not handshakes and must not count).
	for _, n := range c.Nodes {
		if n.Grep("refused a peer's connection") || n.Grep("TLS with a peer failed") {
			t.Fatalf("node %d logged a TLS refusal in a healthy cluster:\n%s", n.ID, n.Tail(3000))
		}
	}

	// The raft listeners serve TLS only: plaintext, and TLS without a
	// certificate of the CA, are refused before any raft route.
	raft := c.Nodes[0].RaftAddr
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+raft+"/raft/v1/time", nil)
	req.Header.Set("X-Queen-Raft-Token", "tls-cluster-token")
	req.Header.Set("X-Queen-Raft-Group", "0")
	if resp, err := e2etest.HTTPClient.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plaintext to a TLS raft listener: %d", resp.StatusCode)
		}
	}
	roots := x509.NewCertPool()
	pem, _ := os.ReadFile(ca.CertPEM)
	roots.AppendCertsFromPEM(pem)
	noCert := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer noCert.CloseIdleConnections()
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, "https://"+raft+"/raft/v1/time", nil)
	req.Header.Set("X-Queen-Raft-Token", "tls-cluster-token")
	req.Header.Set("X-Queen-Raft-Group", "0")
	if resp, err := noCert.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate was answered %d", resp.StatusCode)
	}
}

// A node whose certificate is from another CA, then one without TLS at
// all, is refused by the others: it never applies an entry nor becomes
// healthy, and the refusal is in the logs of both sides.
func TestNodeTLSRefusesNodesWithoutAValidCertificate(t *testing.T) {
	ctx := e2etest.Deadline(t, 2*time.Minute)
	dir := t.TempDir()
	ca, err := nodetlstest.NewCA(dir, "cluster")
	if err != nil {
		t.Fatal(err)
	}
	other, err := nodetlstest.NewCA(dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	env := nodeTLSEnv(t, ca, 1, 2)
	// Node 3 is consistent with itself (its own CA accepts its
	// certificate, so it boots) but not with the cluster.
	env[3] = nodeTLSEnv(t, other, 3)[3]
	c, err := harness.NewCluster(e2etest.QueenBinary(t), harness.Options{Nodes: 3, BaseDir: t.TempDir(), NodeEnv: env,
		Env: map[string]string{"QUEEN_RAFT_TOKEN": "tls-cluster-token"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("node %d log tail:\n%s", n.ID, n.Tail(3000))
			}
		}
		c.StopAll()
	})
	if err := c.StartAll(); err != nil {
		t.Fatal(err)
	}
	good, bad := c.Nodes[:2], c.Nodes[2]
	for _, n := range good {
		if err := n.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	a := e2etest.NewAcked()
	if err := e2etest.PushUntilAcked(ctx, good[0].URL, []e2etest.PushItem{{Queue: "q", Partition: "p", Payload: 1, TransactionID: "t1"}}, a); err != nil {
		t.Fatal(err)
	}

	refusedBy := func(n *harness.Node) bool {
		v, err := e2etest.Metric(ctx, n.URL(), `queen_raft_tls_refused_total{group="0"}`)
		return err == nil && v >= 1 && n.Grep("refused a peer's connection: its TLS handshake failed")
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		return refusedBy(good[0]) && refusedBy(good[1]) && bad.Grep("TLS with a peer failed"), nil
	}); err != nil {
		t.Fatal("the certificate of another CA was not refused and logged on both sides:", err)
	}
	isolated(ctx, t, bad)

	// The same node without TLS: its plaintext requests are answered 400
	// by the TLS listeners, and the good nodes cannot reach it over TLS.
	bad.Stop()
	for _, k := range []string{"QUEEN_RAFT_TLS_CERT", "QUEEN_RAFT_TLS_KEY", "QUEEN_RAFT_TLS_CA"} {
		delete(bad.Env, k)
	}
	if err := c.Start(bad); err != nil {
		t.Fatal(err)
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		return bad.Grep("refused this node's plaintext request") && bad.Grep(`"config: node_tls" mode=off`) &&
			good[0].Grep("TLS with a peer failed") && good[1].Grep("TLS with a peer failed"), nil
	}); err != nil {
		t.Fatal("the node without TLS was not refused and logged on both sides:", err)
	}
	isolated(ctx, t, bad)
}

// isolated checks that n has no data: nothing applied, not healthy. Its
// HTTP port opens only once its raft groups started and it gave up
// comparing clocks with a majority, so that is waited for.
func isolated(ctx context.Context, t *testing.T, n *harness.Node) {
	t.Helper()
	var applied float64
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		v, err := e2etest.Metric(ctx, n.URL(), `queen_raft_applied_index{group="0"}`)
		applied = v
		return err == nil, nil
	}); err != nil || applied != 0 {
		t.Fatalf("the refused node applied %v entries (%v)", applied, err)
	}
	if code, _ := e2etest.Call(ctx, http.MethodGet, n.URL()+"/health", nil, nil); code != http.StatusServiceUnavailable {
		t.Fatalf("the refused node reports health %d", code)
	}
}

// A half configuration stops the boot with one line naming the variable.
func TestNodeTLSHalfConfigurationStopsTheBoot(t *testing.T) {
	ctx := e2etest.Deadline(t, 30*time.Second)
	ca, err := nodetlstest.NewCA(t.TempDir(), "cluster")
	if err != nil {
		t.Fatal(err)
	}
	env := nodeTLSEnv(t, ca, 1)
	delete(env[1], "QUEEN_RAFT_TLS_KEY")
	c, err := harness.NewCluster(e2etest.QueenBinary(t), harness.Options{Nodes: 1, BaseDir: t.TempDir(), NodeEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.StopAll)
	n := c.Nodes[0]
	if err := c.Start(n); err != nil {
		t.Fatal(err)
	}
	if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) { return !n.Running(), nil }); err != nil {
		t.Fatal("the node booted with a certificate and no key")
	}
	log := strings.TrimSpace(n.Log())
	if n.ExitCode() != 2 || strings.Count(log, "\n") != 0 || !strings.Contains(log, "QUEEN_RAFT_TLS_CERT: is set without QUEEN_RAFT_TLS_KEY") {
		t.Fatalf("exit %d, log:\n%s", n.ExitCode(), log)
	}
}
