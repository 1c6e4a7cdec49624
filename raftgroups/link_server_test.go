package raftgroups

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4"

	"github.com/queen-mq/queen/raftgroups/link"
	"github.com/queen-mq/queen/wire"
)

const testLinkToken = "l1nk-test-token"

// linkTestNode is a one-node source serving the link on two groups.
func linkTestNode(t *testing.T) (*testCluster, *link.Client) {
	t.Helper()
	c := newTestClusterWith(t, 1, 2, 1_000_000, func(cfg *Config) { cfg.Token = "r4ft-test-token"; cfg.LinkToken = testLinkToken })
	c.waitReady()
	cl := link.NewClient([]string{c.peers[0].RaftAddr}, testLinkToken, nil)
	t.Cleanup(cl.Close)
	return c, cl
}

// kvCmd is a KV put of key in the default tenant, as a command.
func kvCmd(key string) wire.Command {
	kc := wire.KVCmd{Ops: []wire.KVOp{{Op: wire.KVPut, NS: "link", Key: []byte(key), Value: []byte(`"v-` + key + `"`)}}}
	return wire.Command{Kind: wire.KindKV, Body: kc.Encode(nil)}
}

// readAll reads group's entries from index from through the client up to
// the source's commit, checking they come contiguous.
func readAll(ctx context.Context, t *testing.T, cl *link.Client, group int, from uint64) ([]link.Entry, uint64) {
	t.Helper()
	var out []link.Entry
	for {
		b, err := cl.Entries(ctx, group, from, 4<<10, 0)
		if err != nil {
			t.Fatalf("entries from %d: %v", from, err)
		}
		for _, e := range b.Entries {
			if e.Index != from {
				t.Fatalf("entry %d where %d was due", e.Index, from)
			}
			from++
			out = append(out, e)
		}
		if from > b.Commit {
			return out, from
		}
		if len(b.Entries) == 0 {
			t.Fatalf("no entries from %d below commit %d", from, b.Commit)
		}
	}
}

// Commands proposed on the source come back through the link as the very
// bytes the state machine applied, at contiguous indexes with their clock
// stamps; a long poll wakes on a new commit; once the log is compacted
// past the asked index the client says ErrCompacted.
func TestLinkServesCommittedEntries(t *testing.T) {
	c, cl := linkTestNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	info, err := cl.Info(ctx, 1)
	if err != nil || info.Group != 1 || info.Groups != 2 || info.NodeID != 1 || info.FirstIndex == 0 ||
		info.Members["1"] != c.peers[0].RaftAddr || info.Format == 0 {
		t.Fatalf("info %+v, %v", info, err)
	}
	want := map[string]bool{}
	var wantBodies [][]byte
	for i := 0; i < 50; i++ {
		cmd := kvCmd(fmt.Sprintf("k%03d", i))
		want[string(cmd.Body)] = true
		wantBodies = append(wantBodies, cmd.Body)
		if _, err := c.engines[0].Propose(ctx, 1, cmd); err != nil {
			t.Fatal(err)
		}
	}
	ents, next := readAll(ctx, t, cl, 1, 1)
	var got [][]byte
	skips := 0
	start := time.Now().Add(-time.Hour).UnixMilli()
	for _, e := range ents {
		if e.Skip {
			skips++
			continue
		}
		pe, err := wire.ParseEntry(e.Payload)
		if err != nil {
			t.Fatalf("entry %d does not parse: %v", e.Index, err)
		}
		if e.StampMs < uint64(start) || int64(e.StampMs) != pe.NowMs {
			t.Fatalf("entry %d stamp %d, header %d", e.Index, e.StampMs, pe.NowMs)
		}
		for {
			cmd, ok := pe.Next()
			if !ok {
				break
			}
			if cmd.Kind == wire.KindKV && want[string(cmd.Body)] {
				got = append(got, bytes.Clone(cmd.Body))
			}
		}
	}
	if len(got) != len(wantBodies) {
		t.Fatalf("%d of %d commands read back", len(got), len(wantBodies))
	}
	for i := range got {
		if !bytes.Equal(got[i], wantBodies[i]) {
			t.Fatalf("command %d differs or out of order", i)
		}
	}
	if skips == 0 {
		t.Fatal("the bootstrap's membership entry was not served as a skip")
	}

	// A long poll from the next index wakes when the next entry commits.
	type res struct {
		b   link.Batch
		err error
		at  time.Time
	}
	done := make(chan res, 1)
	go func() {
		b, err := cl.Entries(ctx, 1, next, 1<<20, 5*time.Second)
		done <- res{b, err, time.Now()}
	}()
	// Proposed once the poll is surely waiting on the source.
	time.Sleep(300 * time.Millisecond)
	proposed := time.Now()
	if _, err := c.engines[0].Propose(ctx, 1, kvCmd("late")); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.b.Entries) == 0 || r.b.Entries[0].Index != next {
		t.Fatalf("long poll: %+v, %v", r.b, r.err)
	}
	if d := r.at.Sub(proposed); d > 2*time.Second {
		t.Fatalf("long poll woke %v after the commit", d)
	}

	// Snapshot and compact the whole log: index 1 is gone.
	g := c.hosts[0].groups[1]
	if _, err := g.nh.SyncRequestSnapshot(ctx, g.shardID, dragonboat.SnapshotOption{OverrideCompactionOverhead: true, CompactionOverhead: 0}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := cl.Entries(ctx, 1, 1, 1<<20, 0)
		var ce *link.CompactedError
		if errors.Is(err, link.ErrCompacted) && errors.As(err, &ce) && ce.First > 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ErrCompacted after compaction: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A wrong link token, or the raft token, gets ErrRefused from the client.
func TestLinkClientRefusedToken(t *testing.T) {
	c, _ := linkTestNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tok := range []string{"wrong", "r4ft-test-token", ""} {
		cl := link.NewClient([]string{c.peers[0].RaftAddr}, tok, nil)
		if _, err := cl.Info(ctx, 0); !errors.Is(err, link.ErrRefused) {
			t.Fatalf("token %q: %v", tok, err)
		}
		cl.Close()
	}
}

// A link snapshot taken while entries keep being applied holds exactly
// the state of the index it names: every key written at or below it, none
// written after.
func TestLinkSnapshotIsExactlyAtItsIndex(t *testing.T) {
	c, cl := linkTestNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	key := func(i int) string { return fmt.Sprintf("snapkey-%05d-end", i) }
	stop := make(chan struct{})
	written := make(chan int, 1)
	go func() {
		i := 0
		defer func() { written <- i }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.engines[0].Propose(ctx, 1, kvCmd(key(i))); err != nil {
				return
			}
			i++
		}
	}()
	type taken struct {
		index uint64
		body  []byte
	}
	var snaps []taken
	for len(snaps) < 3 {
		time.Sleep(100 * time.Millisecond)
		index, body, err := cl.Snapshot(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, err = buf.ReadFrom(body)
		body.Close()
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, taken{index, buf.Bytes()})
	}
	close(stop)
	n := <-written
	// Which index wrote each key, from the log itself.
	ents, _ := readAll(ctx, t, cl, 1, 1)
	at := map[string]uint64{}
	for _, e := range ents {
		if e.Skip {
			continue
		}
		pe, err := wire.ParseEntry(e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		for {
			cmd, ok := pe.Next()
			if !ok {
				break
			}
			if cmd.Kind == wire.KindKV {
				kc, err := wire.DecodeKVCmd(cmd.Body)
				if err == nil && len(kc.Ops) == 1 {
					at[string(kc.Ops[0].Key)] = e.Index
				}
			}
		}
	}
	if n < 10 || len(at) < n {
		t.Fatalf("%d keys written, %d found in the log", n, len(at))
	}
	inside := 0
	for _, s := range snaps {
		for i := 0; i < n; i++ {
			idx, ok := at[key(i)]
			if !ok {
				t.Fatalf("key %d not in the log", i)
			}
			has := bytes.Contains(s.body, []byte(key(i)))
			if has != (idx <= s.index) {
				t.Fatalf("snapshot at %d: key written at %d present=%v", s.index, idx, has)
			}
			if has {
				inside++
			}
		}
	}
	if inside == 0 || snaps[0].index == 0 {
		t.Fatalf("snapshots hold none of the keys (indexes %d..%d)", snaps[0].index, snaps[len(snaps)-1].index)
	}
	t.Logf("%d keys written; snapshots at %d, %d, %d", n, snaps[0].index, snaps[1].index, snaps[2].index)
}
