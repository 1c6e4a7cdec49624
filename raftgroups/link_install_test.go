package raftgroups

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/queen-mq/queen/storage"
)

// kvPairs is the KV keys ('v') of a store as a link copy streams them.
func kvPairs(t *testing.T, s *storage.Store) (uint64, map[string]string) {
	t.Helper()
	snap, err := s.CaptureLinkSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.WriteTo(&buf, nil); err != nil {
		t.Fatal(err)
	}
	return snap.Index(), streamKV(t, buf.Bytes())
}

// streamKV picks the KV keys out of a snapshot stream (magic, then
// uvarint-length-prefixed key and value pairs, a zero length ending it).
func streamKV(t *testing.T, b []byte) map[string]string {
	t.Helper()
	b = b[len("QSNAP2\n"):]
	out := map[string]string{}
	field := func() []byte {
		n, k := uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			t.Fatal("stream truncated")
		}
		f := b[k : k+int(n)]
		b = b[k+int(n):]
		return f
	}
	for {
		k := field()
		if len(k) == 0 {
			return out
		}
		v := field()
		if k[0] == 'v' {
			out[string(k)] = string(v)
		}
	}
}

func uvarint(b []byte) (uint64, int) {
	var x uint64
	for i, c := range b {
		if i == 10 {
			return 0, -1
		}
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x, i + 1
		}
	}
	return 0, 0
}

// A standby group installs the source group's snapshot through the link
// and its own log: its KV is the source's, and it follows the source from
// the snapshot's index.
func TestInstallLinkSnapshotFromTheSource(t *testing.T) {
	src, cl := linkTestNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i := 0; i < 200; i++ {
		if _, err := src.engines[0].Propose(ctx, 1, kvCmd(fmt.Sprintf("install-%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	sb := newTestClusterWith(t, 1, 2, 1_000_000)
	sb.waitReady()
	g := sb.hosts[0].groups[1]
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		// A tick of the (not standby) test node merged into the Done's
		// entry refuses it; the follower retries the same way.
		if err = sb.hosts[0].installLinkSnapshot(ctx, g, cl); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	l := g.store.Link()
	if !l.Linked || l.Applied == 0 {
		t.Fatalf("link state after install: %+v", l)
	}
	_, got := kvPairs(t, g.store)
	_, want := kvPairs(t, src.hosts[0].groups[1].store)
	if len(want) < 200 || len(got) != len(want) {
		t.Fatalf("standby holds %d KV keys, source %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("KV key %q differs", k)
		}
	}
}
