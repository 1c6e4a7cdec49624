package raftgroups

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queen-mq/queen/wire"
)

// fakeLink is a source's committed log held in memory, per group: entry i
// is at index i+1.
type fakeLink struct {
	mu      sync.Mutex
	entries [][]linkEntry
	reads   int
	hold    bool
	// follower: a node other than the group's leader answers.
	follower bool
}

func (f *fakeLink) Groups(context.Context) (int, error) { return len(f.entries), nil }

func (f *fakeLink) add(group int, e linkEntry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e.Index = uint64(len(f.entries[group]) + 1)
	f.entries[group] = append(f.entries[group], e)
}

func (f *fakeLink) Entries(ctx context.Context, group int, from uint64, maxBytes int, wait time.Duration) (linkBatch, error) {
	f.mu.Lock()
	f.reads++
	log := f.entries[group]
	hold := f.hold
	notLeader := f.follower
	f.mu.Unlock()
	b := linkBatch{Commit: uint64(len(log)), First: 1, NotLeader: notLeader}
	if hold { // a source node that knows the commit but sends nothing yet
		from = b.Commit + 1
	}
	if from > b.Commit {
		select { // a long poll that sees nothing new
		case <-ctx.Done():
			return b, ctx.Err()
		case <-time.After(min(wait, 20*time.Millisecond)):
		}
		return b, nil
	}
	size := 0
	for _, e := range log[from-1:] {
		if len(b.Entries) > 0 && size+len(e.Payload) > maxBytes {
			break
		}
		size += len(e.Payload)
		b.Entries = append(b.Entries, e)
	}
	return b, nil
}

func kvPutEntry(nowMs int64, key, value string) linkEntry {
	c := wire.KVCmd{Tenant: wire.DefaultTenant, Ops: []wire.KVOp{{Op: wire.KVPut, NS: "app", Key: []byte(key), Value: []byte(value)}}}
	return linkEntry{StampMs: uint64(nowMs), Payload: wire.AppendEntry(nil, nowMs, []wire.Command{{Kind: wire.KindKV, Body: c.Encode(nil)}})}
}

func waitStandby(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for " + what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStandbyFollowsRefusesWritesAndPromotes: a one-node standby applies
// its source's entries, refuses writes with ErrStandby while it follows,
// reports its lag, and takes writes once promoted.
func TestStandbyFollowsRefusesWritesAndPromotes(t *testing.T) {
	src := &fakeLink{entries: make([][]linkEntry, 1)}
	now := time.Now().UnixMilli()
	src.add(0, kvPutEntry(now, "a", "1"))
	src.add(0, linkEntry{Skip: true}) // a membership change in the source
	src.add(0, kvPutEntry(now+1, "b", "1"))
	c := newTestClusterWith(t, 1, 1, 0, func(cfg *Config) { cfg.linkSource = src; cfg.StandbyOf = []string{"127.0.0.1:1"} })
	c.waitReady()
	h, e := c.hosts[0], c.engines[0]
	kv := func(key string) (string, bool) {
		it, ok, _ := e.KVStore(wire.DefaultTenant).KVGet(wire.DefaultTenant, "app", []byte(key))
		return string(it.Value), ok
	}
	waitStandby(t, "the source's entries", func() bool { _, ok := kv("b"); return ok })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	put := &wire.KVCmd{Tenant: wire.DefaultTenant, Ops: []wire.KVOp{{Op: wire.KVPut, NS: "app", Key: []byte("w"), Value: []byte("1")}}}
	if _, err := e.KV(ctx, put); !errors.Is(err, ErrStandby) {
		t.Fatalf("a write on a standby: %v", err)
	}
	src.add(0, kvPutEntry(now+2, "a", "2"))
	waitStandby(t, "a later source entry", func() bool { v, _ := kv("a"); return v == "2" })
	waitStandby(t, "lag 0", func() bool {
		st := h.Standby()
		return st != nil && st.Following && st.LagEntries == 0 && st.Groups[0].Applied == 4
	})
	if l := h.groups[0].store.Link(); !l.Linked || l.Applied != 4 || l.Source != "127.0.0.1:1" {
		t.Fatalf("link state %+v", l)
	}
	// Behind: the lag shows in entries and milliseconds, and in metrics.
	src.mu.Lock()
	src.hold = true
	src.mu.Unlock()
	src.add(0, kvPutEntry(now+3, "c", "1"))
	waitStandby(t, "a lag of one entry", func() bool {
		st := h.Standby()
		return st.LagEntries == 1 && st.LagMs > 0 && st.Groups[0].Commit == 5
	})
	var prom bytes.Buffer
	h.cfg.Metrics.WritePrometheus(&prom)
	if !strings.Contains(prom.String(), `queen_standby_lag_entries{group="0"} 1`) || !strings.Contains(prom.String(), `queen_standby_lag_ms{group="0"}`) {
		t.Fatalf("metrics: %s", prom.String())
	}
	src.mu.Lock()
	src.hold = false
	src.mu.Unlock()
	waitStandby(t, "caught up again", func() bool { v, _ := kv("c"); return v == "1" && h.Standby().LagEntries == 0 })
	res, err := e.PromoteStandby(ctx)
	if err != nil || len(res.SourceIndex) != 1 || res.SourceIndex[0] != 5 {
		t.Fatalf("promote: %+v %v", res, err)
	}
	if r, err := e.KV(ctx, put); err != nil || !r.OK {
		t.Fatalf("a write after promotion: %+v %v", r, err)
	}
	if st := h.Standby(); st == nil || st.Following {
		t.Fatalf("standby status after promotion %+v", st)
	}
	// The follower stopped: a source entry after promotion is not applied.
	src.add(0, kvPutEntry(now+4, "a", "3"))
	time.Sleep(200 * time.Millisecond) // nothing to poll for: an absence
	if v, _ := kv("a"); v != "2" {
		t.Fatalf("a promoted standby applied its source's later entry: a=%s", v)
	}
}

// TestNormalClusterHasNoStandbyState: /health's block is absent and
// promotion is refused on a cluster that follows nothing.
func TestNormalClusterHasNoStandbyState(t *testing.T) {
	c := newTestCluster(t, 1, 1)
	c.waitReady()
	if st := c.hosts[0].Standby(); st != nil {
		t.Fatalf("standby status on a normal cluster: %+v", st)
	}
	if _, err := c.engines[0].PromoteStandby(context.Background()); !errors.Is(err, ErrNotStandby) {
		t.Fatalf("promote a normal cluster: %v", err)
	}
}

// TestStandbyLagUncertainWithoutTheLeader: a standby caught up with what a
// source follower serves is not known to be caught up with the source's
// leader (the node that acknowledges writes): its lagMs grows from the
// leader's last answer until a leader answers again.
func TestStandbyLagUncertainWithoutTheLeader(t *testing.T) {
	src := &fakeLink{entries: make([][]linkEntry, 1)}
	src.add(0, kvPutEntry(time.Now().UnixMilli(), "a", "1"))
	c := newTestClusterWith(t, 1, 1, 0, func(cfg *Config) { cfg.linkSource = src; cfg.StandbyOf = []string{"127.0.0.1:1"} })
	c.waitReady()
	h := c.hosts[0]
	waitStandby(t, "lag 0", func() bool {
		st := h.Standby()
		return st != nil && st.LagEntries == 0 && st.LagMs == 0 && st.Groups[0].Applied == 1
	})
	src.mu.Lock()
	src.follower = true
	src.mu.Unlock()
	waitStandby(t, "a lag of unknown entries", func() bool {
		st := h.Standby()
		return st.LagEntries == 0 && st.LagMs >= 300
	})
	src.mu.Lock()
	src.follower = false
	src.mu.Unlock()
	waitStandby(t, "lag 0 once the leader answers", func() bool { return h.Standby().LagMs == 0 })
}
