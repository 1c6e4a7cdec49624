package storage

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

// pushFlagged pushes recs to queue/Default with the given push flags.
func (h *harness) pushFlagged(queue string, flags uint8, recs ...wire.Record) wire.PushResult {
	h.t.Helper()
	var body []byte
	for i := range recs {
		body = wire.AppendRecord(body, &recs[i])
	}
	return h.applyPush(queue, "Default", flags, len(recs), body)
}

// A push from a node that holds the key but sealed nothing (its view of
// the options lagged a configure) is refused by the state machine, for
// every replica alike, once this group's options say encryptionEnabled;
// sealed records, and pushes from a node without a key, are stored.
func TestUnsealedPushToAnEncryptedQueueIsRefused(t *testing.T) {
	h := newHarness(t)
	h.alloc("vault", "Default")
	plain := wire.Record{Flags: wire.FlagJSON, MsgID: h.nextID(), Payload: []byte(`"before"`)}
	if r := h.pushFlagged("vault", wire.PushKeyHeld, plain); r.Code != wire.CodeOK {
		t.Fatalf("push before encryption was turned on: %+v", r)
	}
	h.configure("vault", wire.OptEncryptionEnabled, wire.QueueConfig{EncryptionEnabled: true})

	plain = wire.Record{Flags: wire.FlagJSON | wire.FlagTxnID, MsgID: h.nextID(), TxnID: []byte("t1"), Payload: []byte(`"clear"`)}
	if r := h.pushFlagged("vault", wire.PushKeyHeld, plain); r.Code != wire.CodeSealRequired {
		t.Fatalf("unsealed push after encryption was turned on: %+v", r)
	}
	if p, ok := h.s.PartitionByIndex(wire.DefaultTenant, "vault", 0); !ok || p.HighWatermark() != 1 {
		t.Fatalf("the refused push changed the partition: %v %d", ok, p.HighWatermark())
	}
	// The refused record's transaction id was not indexed: the sealed
	// retry is stored, not answered as a duplicate.
	sealed := wire.Record{Flags: wire.FlagEncrypted | wire.FlagSealed | wire.FlagTxnID, MsgID: plain.MsgID, TxnID: []byte("t1"),
		Payload: []byte(`{"encrypted":"AA==","iv":"AAAAAAAAAAAAAAAAAAAAAA==","authTag":"AAAAAAAAAAAAAAAAAAAAAA=="}`)}
	if r := h.pushFlagged("vault", wire.PushKeyHeld, sealed); r.Code != wire.CodeOK || len(r.Dups) != 0 || r.BaseOffset != 1 {
		t.Fatalf("sealed retry: %+v", r)
	}
	// A node without a key stores what it sends (spec §5.3: no key, no
	// encryption), as does an entry proposed before the check existed.
	other := wire.Record{Flags: wire.FlagJSON, MsgID: h.nextID(), Payload: []byte(`"nokey"`)}
	if r := h.pushFlagged("vault", 0, other); r.Code != wire.CodeOK {
		t.Fatalf("push without the key flag: %+v", r)
	}
}

// The same check guards Kafka produce, before the producer's sequence
// moves: the sealed retry of the same batch is accepted at that sequence.
func TestUnsealedKafkaProduceToAnEncryptedTopicIsRefused(t *testing.T) {
	h := newHarness(t)
	h.allocTopic("vault", 1)
	h.configure("vault", wire.OptEncryptionEnabled, wire.QueueConfig{EncryptionEnabled: true})
	produce := func(rec wire.Record) wire.KafkaProduceResult {
		t.Helper()
		c := wire.KafkaProduceCmd{ProducerID: 7 << 8, BaseSeq: 0, StateTTLMs: 60_000,
			Push: wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "vault", PartitionIndex: 0, Flags: wire.PushKeyHeld, Count: 1,
				Records: wire.AppendRecord(nil, &rec)}}
		r, err := wire.DecodeKafkaProduceResult(h.apply(wire.KindKafkaProduce, c.Encode(nil)))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	id := h.nextID()
	if r := produce(wire.Record{Flags: wire.FlagKey, MsgID: id, Key: []byte("k"), Payload: []byte("v")}); r.Code != wire.CodeSealRequired {
		t.Fatalf("unsealed produce: %+v", r)
	}
	sealed := wire.Record{Flags: wire.FlagEncrypted | wire.FlagSealed, MsgID: id,
		Payload: []byte(`{"encrypted":"AA==","iv":"AAAAAAAAAAAAAAAAAAAAAA==","authTag":"AAAAAAAAAAAAAAAAAAAAAA=="}`)}
	if r := produce(sealed); r.Code != wire.CodeOK || r.BaseOffset != 0 {
		t.Fatalf("sealed produce at the same sequence: %+v", r)
	}
}
