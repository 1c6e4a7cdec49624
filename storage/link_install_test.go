package storage

import (
	"bufio"
	"bytes"
	"hash/crc32"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/queen-mq/queen/wire"
)

// streamPairs parses a snapshot stream into its keys and values, leaving
// out the keys that are the group's own (applied index, format, link,
// clock).
func streamPairs(t *testing.T, stream []byte) map[string]string {
	t.Helper()
	r := bufio.NewReader(bytes.NewReader(stream[len(snapshotMagic):]))
	out := map[string]string{}
	for {
		k, err := readField(r, true)
		if err != nil {
			t.Fatal(err)
		}
		if k == nil {
			return out
		}
		v, err := readField(r, false)
		if err != nil {
			t.Fatal(err)
		}
		switch string(k) {
		case string(keyApplied), string(keyActiveFormat), string(keyLink), string(keyClock):
			// The clock too: the standby's own entries move it; the
			// source's is kept in the link state.
			continue
		}
		if ownRegistryKey(k) {
			continue // the standby's own nodes
		}
		out[string(k)] = string(v)
	}
}

func linkCopy(t *testing.T, s *Store) (uint64, []byte) {
	t.Helper()
	snap, err := s.CaptureLinkSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.WriteTo(&buf, nil); err != nil {
		t.Fatal(err)
	}
	return snap.Index(), buf.Bytes()
}

// applyEntryN applies one entry of several commands and returns their
// results.
func (h *harness) applyEntryN(data []byte) [][]byte {
	h.t.Helper()
	h.index++
	out, err := h.s.Update([]sm.Entry{{Index: h.index, Cmd: data}})
	if err != nil {
		h.t.Fatal(err)
	}
	res, err := wire.SplitResults(out[0].Result.Data)
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

func linkEntryOf(h *harness, kind wire.Kind, body []byte) sm.Entry {
	h.index++
	return sm.Entry{Index: h.index, Cmd: wire.AppendEntry(nil, h.now, []wire.Command{{Kind: kind, Body: body}})}
}

// A source store's link snapshot, proposed in chunks and a Done into a
// fresh store, makes that store hold what the source held (queues,
// messages, consumer positions, leases, KV), at the standby's own applied
// index, following the source from the snapshot's index; a Done in the
// same batch as its last chunk and entries after it apply as in batches of
// their own; a restart keeps it all.
func TestLinkSnapshotInstallsTheSourceState(t *testing.T) {
	src := newHarness(t)
	for i := 0; i < 30; i++ {
		src.push("orders", "p1", `{"n":`+string(rune('0'+i%10))+`}`)
	}
	src.push("orders", "p2", `"a"`, `"b"`)
	pr := src.pop("orders", "g1", 5, 60_000)
	if pr.Code != wire.CodeOK || len(pr.Claims) == 0 {
		t.Fatalf("pop: %+v", pr)
	}
	_, txns := src.payloads(pr.Claims[0])
	src.ack("g1", pr.Claims[0], txns[0], wire.AckCompleted)
	src.pop("orders", "g2", 3, 60_000) // a lease left open
	src.apply(wire.KindKV, kvPut(wire.DefaultTenant, "k1", `"v1"`))
	src.apply(wire.KindKV, kvPut(otherTenant, "k2", `{"x":2}`))
	src.apply(wire.KindKafkaRegisterNode, (&wire.RegisterNodeCmd{NodeID: 1, KafkaAddr: "source:9092"}).Encode(nil))
	index, stream := linkCopy(t, src.s)
	if !bytes.Contains(stream, []byte("source:9092")) {
		t.Fatal("the source's copy has no node registry")
	}
	if index != src.index {
		t.Fatalf("copy at %d, source applied %d", index, src.index)
	}

	sb := newHarness(t)
	sb.now += 10_000_000
	sb.apply(wire.KindKafkaRegisterNode, (&wire.RegisterNodeCmd{NodeID: 1, KafkaAddr: "standby:9092"}).Encode(nil))
	const id = 0x5eed
	var chunks []sm.Entry
	crc := uint32(0)
	for seq, off := uint64(0), 0; off < len(stream); seq++ {
		end := min(off+700, len(stream))
		part := stream[off:end]
		crc = crc32.Update(crc, castagnoli, part)
		chunks = append(chunks, linkEntryOf(sb, wire.KindLinkSnapshotChunk, (&wire.LinkSnapshotChunkCmd{ID: id, Seq: seq, Data: part}).Encode(nil)))
		off = end
	}
	if len(chunks) < 3 {
		t.Fatalf("only %d chunks", len(chunks))
	}
	for _, e := range chunks[:len(chunks)-1] {
		if _, err := sb.s.Update([]sm.Entry{e}); err != nil {
			t.Fatal(err)
		}
	}
	// A chunk out of turn and a Done before the last chunk change nothing.
	if r := linkResult(t, sb.apply(wire.KindLinkSnapshotChunk, (&wire.LinkSnapshotChunkCmd{ID: id, Seq: 99, Data: []byte("x")}).Encode(nil))); r.Code != wire.CodeConflict || r.N != uint64(len(chunks)-1) {
		t.Fatalf("chunk out of turn: %+v", r)
	}
	done := wire.LinkSnapshotDoneCmd{ID: id, Chunks: uint64(len(chunks)), Bytes: uint64(len(stream)), CRC: crc, SourceIndex: index, Source: "src:7400"}
	if r := linkResult(t, sb.apply(wire.KindLinkSnapshotDone, done.Encode(nil))); r.Code != wire.CodeConflict {
		t.Fatalf("done with a chunk missing: %+v", r)
	}
	batch := []sm.Entry{chunks[len(chunks)-1], linkEntryOf(sb, wire.KindLinkSnapshotDone, done.Encode(nil)), linkEntryOf(sb, wire.KindLinkSnapshotDone, done.Encode(nil))}
	out, err := sb.s.Update(batch)
	if err != nil {
		t.Fatal(err)
	}
	results := make([]wire.CountResult, len(out))
	for i := range out {
		res, err := wire.SplitResults(out[i].Result.Data)
		if err != nil || len(res) != 1 {
			t.Fatalf("entry %d results: %v", i, err)
		}
		results[i] = linkResult(t, res[0])
	}
	if results[0].Code != wire.CodeOK || results[1].Code != wire.CodeOK || results[1].N != index || results[2].Code != wire.CodeConflict {
		t.Fatalf("last chunk, done, done again: %+v", results)
	}
	check := func(when string) {
		t.Helper()
		if got := sb.s.Applied(); got != sb.index {
			t.Fatalf("%s: applied %d, want the standby's own %d", when, got, sb.index)
		}
		if l := sb.s.Link(); !l.Linked || l.Applied != index || l.Source != "src:7400" || l.Format != src.s.ActiveFormat() || l.ClockMs != src.now {
			t.Fatalf("%s: link state %+v", when, l)
		}
		if sb.s.ActiveFormat() != wire.NewestFormat {
			t.Fatalf("%s: the standby's format became %d", when, sb.s.ActiveFormat())
		}
		_, copied := linkCopy(t, sb.s)
		if !bytes.Contains(copied, []byte("standby:9092")) || bytes.Contains(copied, []byte("source:9092")) {
			t.Fatalf("%s: the node registry is not the standby's own", when)
		}
		want, got := streamPairs(t, stream), streamPairs(t, copied)
		if len(want) != len(got) {
			t.Fatalf("%s: %d keys, the source has %d", when, len(got), len(want))
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("%s: key %x differs", when, k)
			}
		}
	}
	check("installed")
	sb.restart(false)
	check("after a restart")
	// The store's own reads see the source's queues and positions: g1
	// goes on after the message it acknowledged.
	next := sb.pop("orders", "g1", 100, 60_000)
	if next.Code != wire.CodeOK || len(next.Claims) == 0 {
		t.Fatalf("pop after install: %+v", next)
	}
	for _, cl := range next.Claims {
		_, ids := sb.payloads(cl)
		for _, id := range ids {
			if id == txns[0] {
				t.Fatal("the message g1 acknowledged on the source was delivered again")
			}
		}
	}
}

// What Update pays per entry for the install check on a store with nothing
// staged (every store but a standby's mid-install).
func BenchmarkLinkInstallsAtNothingStaged(b *testing.B) {
	h := newHarness(b)
	cmd := wire.AppendEntry(nil, h.now, []wire.Command{{Kind: wire.KindKV, Body: kvPut(wire.DefaultTenant, "k", `"v"`)}})
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if h.s.linkInstallsAt(cmd) {
			b.Fatal("installs")
		}
	}
}

// A Done that shares its entry with another command installs nothing and
// says every chunk is still staged (the installer proposes it again); the
// same Done alone then installs.
func TestLinkDoneBesideAnotherCommand(t *testing.T) {
	src := newHarness(t)
	src.apply(wire.KindKV, kvPut(wire.DefaultTenant, "k", `"v"`))
	index, stream := linkCopy(t, src.s)
	sb := newHarness(t)
	chunk := wire.LinkSnapshotChunkCmd{ID: 7, Seq: 0, Data: stream}
	if r := linkResult(t, sb.apply(wire.KindLinkSnapshotChunk, chunk.Encode(nil))); r.Code != wire.CodeOK || r.N != 1 {
		t.Fatalf("chunk: %+v", r)
	}
	done := wire.LinkSnapshotDoneCmd{ID: 7, Chunks: 1, Bytes: uint64(len(stream)), CRC: crc32.Update(0, castagnoli, stream), SourceIndex: index}
	two := sb.applyEntryN(wire.AppendEntry(nil, sb.now, []wire.Command{
		{Kind: wire.KindLinkSnapshotDone, Body: done.Encode(nil)}, {Kind: wire.KindKV, Body: kvPut(wire.DefaultTenant, "x", `1`)}}))
	if r := linkResult(t, two[0]); r.Code != wire.CodeConflict || r.N != 1 {
		t.Fatalf("a Done beside another command: %+v", r)
	}
	if sb.s.Link().Linked {
		t.Fatal("installed from a shared entry")
	}
	if r := linkResult(t, sb.apply(wire.KindLinkSnapshotDone, done.Encode(nil))); r.Code != wire.CodeOK || r.N != index {
		t.Fatalf("the Done alone: %+v", r)
	}
	if l := sb.s.Link(); !l.Linked || l.Applied != index || sb.s.Applied() != sb.index {
		t.Fatalf("after the install: %+v, applied %d", l, sb.s.Applied())
	}
}
