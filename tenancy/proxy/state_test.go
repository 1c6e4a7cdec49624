package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

// testProxy is a proxy over a one-node engine, not listening.
func testProxy(t *testing.T, cfg Config) (*Proxy, *raftgroups.Host) {
	t.Helper()
	host, engine := raftgroupstest.Start(t)
	cfg.TenantHeader = true
	return New(cfg, engine, nil, raftgroupstest.Quiet), host
}

func TestEnsureRowsAreIdempotentUnderRaces(t *testing.T) {
	p, _ := testProxy(t, Config{})
	ctx := context.Background()
	hash := HashKey("k1")
	type result struct {
		tenant, cluster, key string
		created              [3]bool
	}
	results := make([]result, 6)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tn, tc, err := p.store.ensureTenant(ctx, "globex", "Globex")
			if err != nil {
				t.Error(err)
				return
			}
			c, cc, err := p.store.ensureCluster(ctx, tn, "globex", "pro", nil)
			if err != nil {
				t.Error(err)
				return
			}
			k, kc, err := p.store.ensureKey(ctx, c.ID, "default", hash, []string{ScopeProduce})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = result{tn.ID, c.ID, k.ID, [3]bool{tc, cc, kc}}
		}()
	}
	wg.Wait()
	created := [3]int{}
	for _, r := range results {
		if r.tenant != results[0].tenant || r.cluster != results[0].cluster || r.key != results[0].key {
			t.Fatalf("racing creators disagree: %+v", results)
		}
		for j, c := range r.created {
			if c {
				created[j]++
			}
		}
	}
	if created != [3]int{1, 1, 1} {
		t.Fatalf("rows created %v times, want once each", created)
	}
	// A slug another tenant holds, and a hash bound to another cluster,
	// are conflicts.
	other, _, _ := p.store.ensureTenant(ctx, "initech", "")
	if _, _, err := p.store.ensureCluster(ctx, other, "globex", "free", nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("another tenant's slug: %v", err)
	}
	c2, _, _ := p.store.ensureCluster(ctx, other, "initech", "free", nil)
	if _, _, err := p.store.ensureKey(ctx, c2.ID, "x", hash, AllScopes); !errors.Is(err, ErrConflict) {
		t.Fatalf("a hash bound to another cluster: %v", err)
	}
}

func TestBootstrapRunsAtEveryBootAndChangesNothingTwice(t *testing.T) {
	key, _ := NewKey("live")
	p, _ := testProxy(t, Config{Bootstrap: Bootstrap{Tenant: "acme", APIKey: key, Password: "pw"}})
	ctx := context.Background()
	if err := p.seed(ctx); err != nil {
		t.Fatal(err)
	}
	created, err := p.bootstrap(ctx, p.cfg.Bootstrap)
	if err != nil || created {
		t.Fatalf("second bootstrap: created=%v err=%v", created, err)
	}
	cred, err := p.keyCredential(ctx, key)
	if err != nil || cred.cluster.Slug != "acme" || cred.cluster.Plan != "dev" || len(cred.scopes) != 4 {
		t.Fatalf("bootstrap key: %+v %v", cred, err)
	}
	for _, code := range []string{"free", "dev", "pro", "dedicated-s"} {
		if _, found, err := p.plan(ctx, code); err != nil || !found {
			t.Fatalf("plan %s not seeded: %v", code, err)
		}
	}
}

// TestRevocationIsSeenWithinAPoll revokes a key through another writer
// (as another node would) and waits for this node's cache to drop it.
func TestRevocationIsSeenWithinAPoll(t *testing.T) {
	p, _ := testProxy(t, Config{InvalPoll: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key, _ := NewKey("test")
	tn, _, _ := p.store.ensureTenant(ctx, "acme", "")
	c, _, _ := p.store.ensureCluster(ctx, tn, "acme", "dev", nil)
	k, _, err := p.store.ensureKey(ctx, c.ID, "k", HashKey(key), AllScopes)
	if err != nil {
		t.Fatal(err)
	}
	p.cache.refresh(ctx)
	if _, err := p.keyCredential(ctx, key); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); p.cache.run(ctx) }()
	defer func() { cancel(); <-done }()

	otherNode := &kvStore{engine: p.engine, timeout: time.Second}
	k.Revoked = true
	if _, err := otherNode.apply(ctx, putOp(apiKeyKey(k.Hash), k, false)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, err := p.keyCredential(ctx, key)
		if errors.Is(err, errBadCredential) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revoked key still authenticates: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStaleGrace: with the KV gone, a key checked recently keeps working
// for the grace, an unseen key is refused, and after the grace all are.
func TestStaleGrace(t *testing.T) {
	p, host := testProxy(t, Config{StaleGrace: 500 * time.Millisecond, RequestTimeout: 100 * time.Millisecond})
	ctx := context.Background()
	seen, _ := NewKey("test")
	unseen, _ := NewKey("test")
	tn, _, _ := p.store.ensureTenant(ctx, "acme", "")
	c, _, _ := p.store.ensureCluster(ctx, tn, "acme", "dev", nil)
	for _, k := range []string{seen, unseen} {
		if _, _, err := p.store.ensureKey(ctx, c.ID, "k", HashKey(k), AllScopes); err != nil {
			t.Fatal(err)
		}
	}
	p.cache.refresh(ctx)
	if _, err := p.keyCredential(ctx, seen); err != nil {
		t.Fatal(err)
	}
	host.Close()
	// The grace counts from the last good read of the feed: pretend it
	// was now, whatever closing the node took.
	p.cache.mu.Lock()
	p.cache.lastGood = time.Now()
	p.cache.mu.Unlock()
	p.cache.refresh(ctx)
	if _, err := p.keyCredential(ctx, seen); err != nil {
		t.Fatalf("a recently checked key within the grace: %v", err)
	}
	if _, err := p.keyCredential(ctx, unseen); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("an unseen key without the KV: %v", err)
	}
	time.Sleep(550 * time.Millisecond)
	p.cache.refresh(ctx)
	if _, err := p.keyCredential(ctx, seen); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a key past the grace: %v", err)
	}
}

// acmeCluster makes tenant and cluster acme on p's store.
func acmeCluster(t *testing.T, p *Proxy) (*Tenant, *Cluster) {
	t.Helper()
	ctx := context.Background()
	tn, _, err := p.store.ensureTenant(ctx, "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := p.store.ensureCluster(ctx, tn, "acme", "dev", nil)
	if err != nil {
		t.Fatal(err)
	}
	return tn, c
}

// A row changed between update's read and its write is read again and
// the change made on the new row: both writers keep their change.
func TestUpdateKeepsAChangeMadeMeanwhile(t *testing.T) {
	p, _ := testProxy(t, Config{})
	ctx := context.Background()
	_, c := acmeCluster(t, p)
	calls := 0
	got, err := update(ctx, p.store, clusterKey(c.ID), errClusterUnknown, func(row *Cluster) (bool, error) {
		calls++
		if calls == 1 {
			// Another admin suspends the cluster after this read.
			if _, err := update(ctx, p.store, clusterKey(c.ID), errClusterUnknown, func(o *Cluster) (bool, error) {
				o.Status = "suspended"
				return true, nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		row.Plan = "pro"
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var stored Cluster
	if _, err := p.store.get(ctx, clusterKey(c.ID), &stored); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || got.Status != "suspended" || stored.Status != "suspended" || stored.Plan != "pro" {
		t.Fatalf("after %d reads: answered %+v, stored status %q plan %q", calls, got, stored.Status, stored.Plan)
	}
	if _, err := update(ctx, p.store, clusterKey("no-such"), errClusterUnknown, func(*Cluster) (bool, error) { return true, nil }); !errors.Is(err, errClusterUnknown) {
		t.Fatalf("a missing row: %v", err)
	}
}

// Control-plane changes to one cluster made at once all stay: a status
// change and an overrides change racing never undo each other.
func TestConcurrentClusterChangesAllStay(t *testing.T) {
	p, _ := testProxy(t, Config{CPToken: "tok"})
	ctx := context.Background()
	tn, _, _ := p.store.ensureTenant(ctx, "acme", "")
	if _, _, err := p.store.ensureCluster(ctx, tn, "acme", "dev", nil); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 10; round++ {
		status := []string{"active", "suspended"}[round%2]
		overrides := fmt.Sprintf(`{"max_queues":%d}`, 100+round)
		var wg sync.WaitGroup
		for _, r := range []struct{ path, body string }{
			{"/api/cp/clusters/acme/status", `{"status":"` + status + `"}`},
			{"/api/cp/clusters/acme/overrides", overrides},
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code, out := call(p, "PUT", r.path, "tok", strings.NewReader(r.body), len(r.body)); code != http.StatusOK {
					t.Errorf("%s: %d %s", r.path, code, out)
				}
			}()
		}
		wg.Wait()
		var ref ref
		var c Cluster
		if _, err := p.store.get(ctx, clusterSlugKey("acme"), &ref); err != nil {
			t.Fatal(err)
		}
		if _, err := p.store.get(ctx, clusterKey(ref.ID), &c); err != nil {
			t.Fatal(err)
		}
		if mq := c.Overrides["max_queues"]; c.Status != status || mq == nil || *mq != int64(100+round) {
			t.Fatalf("round %d: status %q overrides %+v, want %q and max_queues %d", round, c.Status, c.Overrides, status, 100+round)
		}
	}
}

// Two admins of a cluster demoted at the same moment: one demotion is
// refused as the last admin's, so the cluster always keeps one.
func TestDemotingTwoAdminsAtOnceKeepsOne(t *testing.T) {
	p, _ := testProxy(t, Config{})
	ctx := context.Background()
	tn, c := acmeCluster(t, p)
	var ids [2]string
	for i := range ids {
		u, _, err := p.store.ensureUser(ctx, "", fmt.Sprintf("admin%d@acme.example", i), tn, c.ID, RoleAdmin, "")
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = u.ID
	}
	for round := 0; round < 10; round++ {
		for _, id := range ids {
			if err := p.setMemberRole(ctx, c, id, RoleAdmin); err != nil {
				t.Fatal(err)
			}
		}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = p.setMemberRole(ctx, c, id, RoleViewer)
			}()
		}
		wg.Wait()
		admins := 0
		for _, id := range ids {
			var u User
			if _, err := p.store.get(ctx, userKey(id), &u); err != nil {
				t.Fatal(err)
			}
			if u.Roles[c.ID] == RoleAdmin {
				admins++
			}
		}
		refused := 0
		for _, err := range errs {
			if errors.Is(err, errLastAdmin) {
				refused++
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if admins != 1 || refused != 1 {
			t.Fatalf("round %d: %d admins left, %d demotions refused (%v)", round, admins, refused, errs)
		}
	}
}
