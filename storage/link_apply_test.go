package storage

import (
	"testing"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// linkSource is a harness whose applied entries are kept, as a source
// group's committed log the standby reads.
type linkSource struct {
	*harness
	log [][]byte
}

func (l *linkSource) apply(kind wire.Kind, body []byte) []byte {
	l.t.Helper()
	e := wire.AppendEntry(nil, l.now, []wire.Command{{Kind: kind, Body: body}})
	l.log = append(l.log, e)
	return l.applyEntry(e)
}

// run is the source's entries from index first through last as a
// LinkApply (the harness's own entries start at index 1).
func (l *linkSource) run(first, last uint64, skip map[uint64]bool) []byte {
	c := wire.LinkApplyCmd{Source: "src:7400", FirstSourceIndex: first, LastSourceIndex: last}
	for i := first; i <= last; i++ {
		e := wire.LinkEntry{Skip: true}
		if !skip[i] {
			e = wire.LinkEntry{StampMs: uint64(l.now), Payload: l.log[i-1]}
		}
		c.Entries = append(c.Entries, e)
	}
	return c.Encode(nil)
}

func kvPut(tenant wire.ID, key, value string) []byte {
	c := wire.KVCmd{Tenant: tenant, Ops: []wire.KVOp{{Op: wire.KVPut, NS: "app", Key: []byte(key), Value: []byte(value)}}}
	return c.Encode(nil)
}

func linkResult(t *testing.T, b []byte) wire.CountResult {
	t.Helper()
	r, err := wire.DecodeCountResult(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLinkApplyAppliesAsTheSourceDid: a source at FormatV5 (per-group KV
// versions) raised to FormatV6 part way is followed by a standby at
// FormatV7; the standby's KV versions are the source's, its own format
// stays FormatV7, runs out of turn or twice change nothing, and the link
// state survives a restart and a snapshot.
func TestLinkApplyAppliesAsTheSourceDid(t *testing.T) {
	src := &linkSource{harness: &harness{t: t, dir: t.TempDir(), now: 1_700_000_000_000}}
	src.open()
	t.Cleanup(func() { src.s.Close() })
	src.apply(wire.KindSetFormat, (&wire.SetFormatCmd{Version: wire.FormatV5}).Encode(nil))
	src.apply(wire.KindKV, kvPut(wire.DefaultTenant, "a", "1"))
	src.apply(wire.KindKV, kvPut(otherTenant, "b", "1"))
	src.now += 1000
	src.apply(wire.KindKV, kvPut(wire.DefaultTenant, "a", "2"))
	src.apply(wire.KindSetFormat, (&wire.SetFormatCmd{Version: wire.FormatV6}).Encode(nil))
	src.apply(wire.KindKV, kvPut(otherTenant, "c", "1"))
	src.log = append(src.log, nil) // a membership change: no command
	n := uint64(len(src.log))

	sb := newHarness(t)
	if sb.s.ActiveFormat() < wire.FormatV7 {
		t.Fatalf("standby at format %d", sb.s.ActiveFormat())
	}
	sb.now += 5_000_000 // the standby's clock is not the source's
	if r := linkResult(t, sb.apply(wire.KindLinkApply, src.run(2, 3, nil))); r.Code != wire.CodeConflict || r.N != 0 {
		t.Fatalf("a run out of turn: %+v", r)
	}
	if r := linkResult(t, sb.apply(wire.KindLinkApply, src.run(1, 3, nil))); r.Code != wire.CodeOK || r.N != 3 {
		t.Fatalf("first run: %+v", r)
	}
	if r := linkResult(t, sb.apply(wire.KindLinkApply, src.run(1, 3, nil))); r.Code != wire.CodeConflict || r.N != 3 {
		t.Fatalf("a run applied twice: %+v", r)
	}
	if r := linkResult(t, sb.apply(wire.KindLinkApply, src.run(4, n, map[uint64]bool{n: true}))); r.Code != wire.CodeOK || r.N != n {
		t.Fatalf("second run: %+v", r)
	}
	check := func(s *Store) {
		t.Helper()
		for _, k := range []struct {
			tenant wire.ID
			key    string
		}{{wire.DefaultTenant, "a"}, {otherTenant, "b"}, {otherTenant, "c"}} {
			want, ok1, _ := src.s.KVGet(k.tenant, "app", []byte(k.key))
			got, ok2, err := s.KVGet(k.tenant, "app", []byte(k.key))
			if err != nil || !ok1 || !ok2 || string(got.Value) != string(want.Value) || got.Version != want.Version {
				t.Fatalf("key %s: standby %+v %v, source %+v", k.key, got, err, want)
			}
		}
		if s.ActiveFormat() != wire.NewestFormat {
			t.Fatalf("standby's own format %d, want %d", s.ActiveFormat(), wire.NewestFormat)
		}
		l := s.Link()
		if !l.Linked || l.Applied != n || l.Format != wire.FormatV6 || l.Source != "src:7400" || l.ClockMs != src.now {
			t.Fatalf("link state %+v", l)
		}
	}
	check(sb.s)
	sb.restart(true)
	check(sb.s)
	other := newHarness(t)
	sb.snapshotTo(other)
	check(other.s)

	if r := linkResult(t, sb.apply(wire.KindLinkPromote, nil)); r.Code != wire.CodeOK || r.N != n {
		t.Fatalf("promote: %+v", r)
	}
	if l := sb.s.Link(); l.Linked || !l.Promoted {
		t.Fatalf("after promote %+v", l)
	}
	if r := linkResult(t, sb.apply(wire.KindLinkApply, src.run(n+1, n+1, map[uint64]bool{n + 1: true}))); r.Code != wire.CodeConflict {
		t.Fatalf("a promoted group followed on: %+v", r)
	}
	// Writable: its own KV write numbers on from the source's versions.
	if r, err := wire.DecodeKVResult(sb.apply(wire.KindKV, kvPut(wire.DefaultTenant, "a", "3"))); err != nil || !r.OK {
		t.Fatalf("write after promote: %+v %v", r, err)
	}
}

// TestLinkKindsWaitForFormatV7: a group below FormatV7 applies no link
// command (a member of an older build would not know it).
func TestLinkKindsWaitForFormatV7(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir(), now: 1_700_000_000_000}
	h.open()
	t.Cleanup(func() { h.s.Close() })
	h.apply(wire.KindSetFormat, (&wire.SetFormatCmd{Version: wire.FormatV6}).Encode(nil))
	c := wire.LinkApplyCmd{FirstSourceIndex: 1, LastSourceIndex: 1, Entries: []wire.LinkEntry{{Payload: wire.AppendEntry(nil, h.now, []wire.Command{{Kind: wire.KindKV, Body: kvPut(wire.DefaultTenant, "a", "1")}})}}}
	if r := linkResult(t, h.apply(wire.KindLinkApply, c.Encode(nil))); r.Code != wire.CodeBadRequest {
		t.Fatalf("applied below FormatV7: %+v", r)
	}
	if _, ok, _ := h.s.KVGet(wire.DefaultTenant, "app", []byte("a")); ok || h.s.Link().Linked {
		t.Fatal("a refused LinkApply changed the store")
	}
	if r := linkResult(t, h.apply(wire.KindLinkPromote, nil)); r.Code != wire.CodeBadRequest {
		t.Fatalf("promote below FormatV7: %+v", r)
	}
}

// TestLinkApplyLeavesTheSourcesNodesOut: a source's node registrations
// (Kafka's advertised addresses) are not applied on its standby, whose
// registry names its own nodes.
func TestLinkApplyLeavesTheSourcesNodesOut(t *testing.T) {
	src := &linkSource{harness: newHarness(t)}
	src.apply(wire.KindKafkaRegisterNode, (&wire.RegisterNodeCmd{NodeID: 1, KafkaAddr: "source:9092"}).Encode(nil))
	src.apply(wire.KindKV, kvPut(wire.DefaultTenant, "a", "1"))
	sb := newHarness(t)
	sb.apply(wire.KindKafkaRegisterNode, (&wire.RegisterNodeCmd{NodeID: 1, KafkaAddr: "standby:9092"}).Encode(nil))
	if r := linkResult(t, sb.apply(wire.KindLinkApply, src.run(1, 2, nil))); r.Code != wire.CodeOK {
		t.Fatalf("link apply: %+v", r)
	}
	nodes := sb.s.KafkaNodes()
	if len(nodes) != 1 || nodes[0].KafkaAddr != "standby:9092" {
		t.Fatalf("standby's node registry %+v", nodes)
	}
	if _, ok, _ := sb.s.KVGet(wire.DefaultTenant, "app", []byte("a")); !ok {
		t.Fatal("the entry after the registration was not applied")
	}
}

// TestLinkApplyRefusesAChain: a source's own link commands (a source that
// is itself a standby) are not applied by its standby; the rest of the
// run is.
func TestLinkApplyRefusesAChain(t *testing.T) {
	inner := wire.LinkApplyCmd{FirstSourceIndex: 1, LastSourceIndex: 1, Entries: []wire.LinkEntry{{Payload: wire.AppendEntry(nil, 1,
		[]wire.Command{{Kind: wire.KindKV, Body: kvPut(wire.DefaultTenant, "chained", "1")}})}}}
	src := &linkSource{harness: newHarness(t)}
	src.log = append(src.log, wire.AppendEntry(nil, src.now, []wire.Command{{Kind: wire.KindLinkApply, Body: inner.Encode(nil)}}))
	src.apply(wire.KindKV, kvPut(wire.DefaultTenant, "a", "1"))
	sb := newHarness(t)
	if r := linkResult(t, sb.apply(wire.KindLinkApply, src.run(1, 2, nil))); r.Code != wire.CodeOK || r.N != 2 {
		t.Fatalf("link apply: %+v", r)
	}
	if _, ok, _ := sb.s.KVGet(wire.DefaultTenant, "app", []byte("chained")); ok {
		t.Fatal("a link command inside a source entry was applied")
	}
	if l := sb.s.Link(); l.Applied != 2 {
		t.Fatalf("link state %+v", l)
	}
	if _, ok, _ := sb.s.KVGet(wire.DefaultTenant, "app", []byte("a")); !ok {
		t.Fatal("the entry after the chained one was not applied")
	}
}

// TestLinkPromoteDropsAStagedInstall: chunks of a source snapshot staged
// when the group is promoted are dropped: it can never be installed.
func TestLinkPromoteDropsAStagedInstall(t *testing.T) {
	sb := newHarness(t)
	chunk := wire.LinkSnapshotChunkCmd{ID: 7, Seq: 0, Data: []byte("staged bytes")}
	if r := linkResult(t, sb.apply(wire.KindLinkSnapshotChunk, chunk.Encode(nil))); r.Code != wire.CodeOK {
		t.Fatalf("stage a chunk: %+v", r)
	}
	staged := func() int {
		n := 0
		for _, p := range [][]byte{keyLinkStage, linkChunkPrefix} {
			it := sb.s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
			for ok := it.First(); ok; ok = it.Next() {
				n++
			}
			it.Close()
		}
		return n
	}
	if staged() != 2 {
		t.Fatalf("%d keys staged, want the stage and one chunk", staged())
	}
	if r := linkResult(t, sb.apply(wire.KindLinkPromote, nil)); r.Code != wire.CodeOK {
		t.Fatalf("promote: %+v", r)
	}
	if n := staged(); n != 0 {
		t.Fatalf("%d staged keys left after promotion", n)
	}
}
