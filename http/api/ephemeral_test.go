package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/storage/ephemeral"
)

// ephNodes builds n ephemeral-only servers (no raft engine: the ephemeral
// routes never touch it) that know each other over a testNet; none is
// started.
func ephNodes(t *testing.T, n int) []*Server {
	var peers []uint64
	for i := 0; i < n; i++ {
		peers = append(peers, uint64(i+1))
	}
	net := newTestNet(t)
	out := make([]*Server, n)
	for i := range out {
		out[i] = New(Config{Addr: raftgroupstest.FreeAddr(t), MaxBodyBytes: 1 << 20, Node: net.link(uint64(i + 1)),
			Ephemeral: EphemeralConfig{
				Store: ephemeral.DefaultConfig(), NodeID: uint64(i + 1), Peers: peers,
				MemberTTL: 400 * time.Millisecond, HandoverTimeout: 5 * time.Second,
			}}, nil, raftgroupstest.Quiet)
	}
	return out
}

func startEph(t *testing.T, s *Server) {
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
}

func ephPost(t *testing.T, s *Server, path string, body any) (int, []byte) {
	b, _ := json.Marshal(body)
	resp, err := http.Post("http://"+s.Addr()+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// When a node becomes live, the partitions it owns move to it from the
// node that held them meanwhile; when it dies without a word (no
// hand-over), the survivor owns everything again. Nothing is lost in the
// first move.
func TestEphemeralRebalanceOnLiveness(t *testing.T) {
	nodes := ephNodes(t, 2)
	a, b := nodes[0], nodes[1]
	startEph(t, a)
	const parts = 20
	for p := 0; p < parts; p++ {
		if code, out := ephPost(t, a, "/api/v1/ephemeral/push", map[string]any{"queue": "q", "partition": fmt.Sprint(p),
			"messages": []any{map[string]any{"payload": p}, map[string]any{"payload": p}}}); code != 201 {
			t.Fatalf("push: %d %s", code, out)
		}
	}
	if st := a.eph.store.Stats(); st.Messages != 2*parts {
		t.Fatalf("node 1 alone holds %d", st.Messages)
	}
	startEph(t, b)
	waitFor(t, 10*time.Second, "node 2 to receive its partitions", func() bool {
		return b.eph.store.Stats().Messages > 0 && a.eph.store.Stats().Messages+b.eph.store.Stats().Messages == 2*parts &&
			len(a.eph.store.Take(func(k ephemeral.Key) bool { return false })) == 0 && ownedRight(a) && ownedRight(b)
	})

	// Node 2 vanishes without handing over (as if it crashed): its loop
	// stops and its listener closes. Node 1 owns every key again once the
	// member TTL passes.
	close(b.eph.stop)
	<-b.eph.done
	b.eph.stop = nil // so Shutdown does not hand over
	b.node.(*testLink).down()
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "node 1 to drop node 2 from the live set", func() bool {
		return len(a.eph.live(time.Now())) == 1
	})
	for p := 0; p < parts; p++ {
		if o := a.eph.owner(ephemeral.Key{Tenant: "t", Queue: "q", Partition: fmt.Sprint(p)}, time.Now()); o != 1 {
			t.Fatalf("partition %d owned by %d with node 2 gone", p, o)
		}
	}
}

// ownedRight says every partition a node holds is its own by its view.
func ownedRight(s *Server) bool {
	for _, q := range s.eph.store.Queues("00000000-0000-0000-0000-000000000001", time.Now()) {
		for p := range q.Partitions {
			k := ephemeral.Key{Tenant: "00000000-0000-0000-0000-000000000001", Queue: q.Name, Partition: p}
			if s.eph.owner(k, time.Now()) != s.eph.cfg.NodeID {
				return false
			}
		}
	}
	return true
}

// The system switch turns the routes off on every node (gossiped), and on
// again.
func TestEphemeralSystemSwitchSpreads(t *testing.T) {
	nodes := ephNodes(t, 2)
	startEph(t, nodes[0])
	startEph(t, nodes[1])
	if code, out := ephPost(t, nodes[0], "/api/v1/system/ephemeral", map[string]any{"enabled": false}); code != 200 {
		t.Fatalf("switch: %d %s", code, out)
	}
	waitFor(t, 5*time.Second, "node 2 to learn the switch", func() bool { return !nodes[1].eph.enabled.Load() })
	code, out := ephPost(t, nodes[1], "/api/v1/ephemeral/push", map[string]any{"queue": "q", "messages": []any{map[string]any{"payload": 1}}})
	if code != 503 || !bytes.Contains(out, []byte("ephemeral_disabled")) {
		t.Fatalf("push while off: %d %s", code, out)
	}
	if code, out := ephPost(t, nodes[1], "/api/v1/system/ephemeral", map[string]any{}); code != 400 {
		t.Fatalf("switch without enabled: %d %s", code, out)
	}
	ephPost(t, nodes[1], "/api/v1/system/ephemeral", map[string]any{"enabled": true})
	waitFor(t, 5*time.Second, "node 1 to learn the switch", func() bool { return nodes[0].eph.enabled.Load() })
}

// The per-tenant rate admits the burst at once, then the rate; tenants do
// not share a bucket.
func TestEphemeralRateLimit(t *testing.T) {
	r := newEphRate(10, 20)
	now := time.Now()
	if !r.allow("a", 15, now) || r.allow("a", 10, now) || !r.allow("a", 5, now) {
		t.Fatal("burst of 20 not admitted exactly")
	}
	if !r.allow("b", 20, now) {
		t.Fatal("tenant b shares a's bucket")
	}
	if r.allow("a", 11, now.Add(time.Second)) || !r.allow("a", 10, now.Add(time.Second)) {
		t.Fatal("10/s not refilled exactly")
	}
	if !r.allow("c", 50, now) || r.allow("c", 1, now) {
		t.Fatal("a push over the burst needs a full bucket")
	}
	if newEphRate(0, 10).allow("a", 1<<20, now) != true {
		t.Fatal("rate 0 limits")
	}
}

// On the broker port the relay headers mean nothing and the peer-only
// routes do not exist: a client cannot pose as a peer to pick a tenant or
// hand messages over. Only the node channel (token and TLS checked by the
// raft transport) serves them.
func TestEphemeralPeerRoutesNotOnBrokerPort(t *testing.T) {
	nodes := ephNodes(t, 1)
	startEph(t, nodes[0])
	req, _ := http.NewRequest("POST", "http://"+nodes[0].Addr()+"/api/v1/ephemeral/push",
		bytes.NewReader([]byte(`{"queue":"q","messages":[{"payload":1}]}`)))
	req.Header.Set(hopsHeader, "1")
	req.Header.Set("x-queen-tenant", "11111111-1111-4111-8111-111111111111")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	const defaultTenant = "00000000-0000-0000-0000-000000000001"
	if resp.StatusCode != 201 || len(nodes[0].eph.store.Queues(defaultTenant, time.Now())) != 1 {
		t.Fatalf("push with relay headers on the broker port: %d, not stored under the default tenant", resp.StatusCode)
	}
	for _, route := range []string{"_adopt", "_ready", "_leaving"} {
		if code, _ := ephPost(t, nodes[0], "/api/v1/ephemeral/"+route, map[string]any{"dumps": []any{}}); code != 404 {
			t.Fatalf("%s on the broker port: %d", route, code)
		}
	}
}

// testNet stands in for the node channel between servers without raft:
// each server's node handler listens on a loopback server of its own.
type testNet struct {
	t     *testing.T
	mu    sync.Mutex
	nodes map[uint64]*httptest.Server
}

func newTestNet(t *testing.T) *testNet {
	n := &testNet{t: t, nodes: map[uint64]*httptest.Server{}}
	t.Cleanup(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, s := range n.nodes {
			s.Close()
		}
	})
	return n
}

func (n *testNet) link(id uint64) *testLink { return &testLink{net: n, id: id} }

type testLink struct {
	net *testNet
	id  uint64
}

func (l *testLink) SetNodeHandler(h http.Handler) {
	l.net.mu.Lock()
	defer l.net.mu.Unlock()
	l.net.nodes[l.id] = httptest.NewServer(h)
}

// down closes this node's listener, as if it crashed.
func (l *testLink) down() {
	l.net.mu.Lock()
	s := l.net.nodes[l.id]
	delete(l.net.nodes, l.id)
	l.net.mu.Unlock()
	if s != nil {
		s.Close()
	}
}

func (l *testLink) CallPeer(ctx context.Context, id uint64, method, route string, header http.Header, body io.Reader) (*http.Response, error) {
	l.net.mu.Lock()
	s := l.net.nodes[id]
	l.net.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("node %d is not listening", id)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+raftgroups.NodePath(route), body)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	return s.Client().Do(req)
}

// A relay that never ran at the owner answers retry; one that may have
// run there answers outcome_unknown, so a client does not count a push
// that was stored as refused.
func TestRelayFailureSaysWhetherTheOwnerMayHaveApplied(t *testing.T) {
	dial := &url.Error{Op: "Post", URL: "http://127.0.0.1:1/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	cut := &url.Error{Op: "Post", URL: "http://127.0.0.1:1/x", Err: io.ErrUnexpectedEOF}
	cases := []struct {
		err  error
		code string
	}{
		{fmt.Errorf("node call: %w", dial), "retry"},
		{raftgroups.ErrUnknownPeer, "retry"},
		{fmt.Errorf("%w: node 3 refused the node call: 401", errNotRelayed), "retry"},
		{fmt.Errorf("node call: %w", cut), "outcome_unknown"},
		{context.DeadlineExceeded, "outcome_unknown"},
	}
	for _, c := range cases {
		status, code, _ := errorStatus(relayFailed(c.err))
		if status != http.StatusServiceUnavailable || code != c.code {
			t.Errorf("%v: %d %s, want 503 %s", c.err, status, code, c.code)
		}
	}
}
