package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/queen-mq/queen/crypto/secret"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/storage/ephemeral"
)

// ephNodes builds n ephemeral-only servers (no raft engine: the ephemeral
// routes never touch it) that know each other; none is started.
func ephNodes(t *testing.T, n int) []*Server {
	addrs := make([]string, n)
	var peers []EphemeralPeer
	for i := range addrs {
		addrs[i] = raftgroupstest.FreeAddr(t)
		peers = append(peers, EphemeralPeer{ID: uint64(i + 1), HTTPAddr: addrs[i]})
	}
	out := make([]*Server, n)
	for i := range out {
		out[i] = New(Config{Addr: addrs[i], MaxBodyBytes: 1 << 20, Ephemeral: EphemeralConfig{
			Store: ephemeral.DefaultConfig(), NodeID: uint64(i + 1), Peers: peers, Token: "tok",
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

// A peer with another raft token is never live here, and a relayed
// request with a wrong token is a 401 before anything is read: nobody
// without the token can pick a tenant by posing as a peer.
func TestEphemeralPeerTokenChecked(t *testing.T) {
	nodes := ephNodes(t, 2)
	nodes[1].eph.cfg.Token = "other"
	nodes[1].eph.token = secret.NewMatcher("other") // as newRing would have made it
	startEph(t, nodes[0])
	startEph(t, nodes[1])
	nodes[0].eph.probe()
	nodes[1].eph.probe()
	if l := nodes[0].eph.live(time.Now()); len(l) != 1 {
		t.Fatalf("node 1 sees %v live", l)
	}
	req, _ := http.NewRequest("POST", "http://"+nodes[0].Addr()+"/api/v1/ephemeral/push",
		bytes.NewReader([]byte(`{"queue":"q","messages":[{"payload":1}]}`)))
	req.Header.Set(hopsHeader, "1")
	req.Header.Set(raftTokenHeader, "wrong")
	req.Header.Set("x-queen-tenant", "11111111-1111-4111-8111-111111111111")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || nodes[0].eph.store.Stats().Messages != 0 {
		t.Fatalf("forged relay: %d, %d messages stored", resp.StatusCode, nodes[0].eph.store.Stats().Messages)
	}
}
