package raftgroups

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/crypto/nodetls"
	"github.com/queen-mq/queen/crypto/nodetls/nodetlstest"
	"github.com/queen-mq/queen/raftgroups/transport"
)

// Node-to-node calls reach a peer's node routes over mutual TLS with the
// token; a caller without the token, or without TLS, is refused.
func TestCallPeerOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := nodetlstest.NewCA(dir, "cluster")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.Issue(dir, nodetlstest.Leaf{Name: "node"})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := nodetls.Load(nodetls.Files{Cert: cert, Key: key, CA: ca.CertPEM})
	if err != nil {
		t.Fatal(err)
	}
	c := newTestClusterWith(t, 2, 1, 0, func(cfg *Config) { cfg.TLS, cfg.Token = tc, "node-token" })
	c.waitReady()
	c.hosts[1].SetNodeHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("X-Extra")+" "+string(b)+" tls="+boolStr(r.TLS != nil && len(r.TLS.PeerCertificates) > 0))
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.hosts[0].CallPeer(ctx, 2, http.MethodPost, "echo?x=1", http.Header{"X-Extra": {"e"}}, strings.NewReader("hi"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "/node/v1/echo?x=1 e hi tls=true" {
		t.Fatalf("call: %d %q", resp.StatusCode, b)
	}
	// The applied indexes a membership leader measures lag with are served
	// by the host itself, over the same channel.
	if lag, err := c.hosts[0].memberLag(ctx, 2); err != nil || lag > 1000 {
		t.Fatalf("lag of node 2 over the node channel: %d %v", lag, err)
	}
	if _, err := c.hosts[0].CallPeer(ctx, 9, http.MethodGet, "echo", nil, nil); err != ErrUnknownPeer {
		t.Fatalf("unknown peer: %v", err)
	}
	addr := c.peers[1].RaftAddr
	wrong := transport.NewNodeClient(tc, "guess", time.Second, transport.Timeouts{})
	defer wrong.Close()
	resp, err = wrong.Do(ctx, addr, http.MethodGet, "echo", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
	plain := transport.NewNodeClient(nil, "node-token", time.Second, transport.Timeouts{})
	defer plain.Close()
	if resp, err := plain.Do(ctx, addr, http.MethodGet, "echo", nil, nil); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plaintext call answered %d", resp.StatusCode)
		}
	}
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
