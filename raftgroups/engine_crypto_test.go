package raftgroups_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/queen-mq/queen/crypto/envelope"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/wire"
)

// readBack reads a partition's stored records, as stored.
func readBack(t *testing.T, e *raftgroups.Engine, queue string) []wire.Record {
	t.Helper()
	p, ok := e.PartitionNamed(wire.DefaultTenant, queue, "Default")
	if !ok {
		t.Fatal("partition missing")
	}
	var bodies [][]byte // parsed after the read: a test stopped inside it would leak its iterator
	err := p.Store().ReadRange(p, p.LogStart(), p.HighWatermark(), func(_ uint64, _ int64, body []byte) bool {
		bodies = append(bodies, bytes.Clone(body))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]wire.Record, len(bodies))
	for i, b := range bodies {
		if out[i], err = wire.ParseRecord(b); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Every field of a record pushed to an encrypted queue but its ids is
// sealed: the key, header names and values, trace id, producer subject
// and payload are nowhere in the node's files (raft logs, store, segments),
// and OpenRecord gives the record back as it was pushed.
func TestPushToEncryptedQueueSealsEveryField(t *testing.T) {
	host, e, dir := raftgroupstest.StartKeyed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.Configure(ctx, &wire.ConfigureCmd{Tenant: wire.DefaultTenant, Queue: "vault",
		Set: wire.OptEncryptionEnabled, Config: wire.QueueConfig{EncryptionEnabled: true}}); err != nil {
		t.Fatal(err)
	}
	in := wire.Record{Flags: wire.FlagJSON | wire.FlagKey | wire.FlagHeaders | wire.FlagTimestamp | wire.FlagTrace | wire.FlagSub | wire.FlagTxnID,
		MsgID: wire.ID{0x01, 0x9a, 15: 1}, TxnID: []byte("txn-visible"), Key: []byte("KEY-MARKER-7f3a"),
		Headers:   []wire.Header{{Key: "HDRNAME-MARKER-7f3a", Value: []byte("HDRVAL-MARKER-7f3a")}},
		Timestamp: 1_700_000_000_123, TraceID: []byte("TRACE-MARKER-7f3a"), ProducerSub: []byte("SUB-MARKER-7f3a"),
		Payload: []byte(`"PAYLOAD-MARKER-7f3a"`)}
	cmd := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "vault", Partition: "Default", PartitionIndex: -1,
		Flags: wire.PushIndexTxn, Count: 1, Records: wire.AppendRecord(nil, &in)}
	outs, err := e.Push(ctx, wire.DefaultTenant, []wire.PushCmd{cmd})
	if err != nil || outs[0].Err != nil || outs[0].Code != wire.CodeOK {
		t.Fatalf("push: %v %+v", err, outs)
	}
	recs := readBack(t, e, "vault")
	if len(recs) != 1 || recs[0].Flags&(wire.FlagEncrypted|wire.FlagSealed) != wire.FlagEncrypted|wire.FlagSealed {
		t.Fatalf("stored: %+v", recs)
	}
	e.OpenRecord(&recs[0])
	if !reflect.DeepEqual(recs[0], in) {
		t.Fatalf("opened:\n got %+v\nwant %+v", recs[0], in)
	}
	// A retry of the same transaction id is still found a duplicate.
	outs, err = e.Push(ctx, wire.DefaultTenant, []wire.PushCmd{cmd})
	if err != nil || outs[0].Code != wire.CodeOK || len(outs[0].Dups) != 1 {
		t.Fatalf("repeated push: %v %+v", err, outs)
	}
	// Closed, every store has flushed what it holds.
	host.Close()
	for _, m := range []string{"KEY-MARKER", "HDRNAME-MARKER", "HDRVAL-MARKER", "TRACE-MARKER", "SUB-MARKER", "PAYLOAD-MARKER"} {
		if hits := raftgroupstest.FilesContaining(t, dir, []byte(m)); len(hits) != 0 {
			t.Errorf("%s in clear on disk: %v", m, hits)
		}
	}
	// The transaction id stays in clear (dedup and acks look it up in
	// the state machine, docs/security.md): the scan does find what is
	// on disk.
	if hits := raftgroupstest.FilesContaining(t, dir, []byte("txn-visible")); len(hits) == 0 {
		t.Error("the scan finds nothing, so its silence above means nothing")
	}
}

// Records stored before every field was sealed (payload only, FlagEncrypted
// without FlagSealed) still open: data written by the earlier release reads.
func TestPayloadOnlySealedRecordStillOpens(t *testing.T) {
	_, e, _ := raftgroupstest.StartKeyed(t)
	k, _ := envelope.ParseKey(raftgroupstest.KeyHex)
	sealed, err := k.Seal([]byte(`{"old":true}`))
	if err != nil {
		t.Fatal(err)
	}
	rec := wire.Record{Flags: wire.FlagJSON | wire.FlagEncrypted | wire.FlagTrace, MsgID: wire.ID{1}, TraceID: []byte("tr"), Payload: sealed}
	e.OpenRecord(&rec)
	if string(rec.Payload) != `{"old":true}` || rec.Flags != wire.FlagJSON|wire.FlagTrace || string(rec.TraceID) != "tr" {
		t.Fatalf("opened: %+v", rec)
	}
	// A text sealed for an encrypted queue opens; any other text is
	// served as it is.
	st, err := e.SealText([]byte("boom"))
	if err != nil || bytes.Contains(st, []byte("boom")) {
		t.Fatalf("sealed text: %v %s", err, st)
	}
	if got := string(e.OpenText(st)); got != "boom" {
		t.Fatalf("opened text: %q", got)
	}
	if got := string(e.OpenText([]byte(`{"encrypted":"x"}`))); got != `{"encrypted":"x"}` {
		t.Fatalf("not an envelope: %q", got)
	}
}
