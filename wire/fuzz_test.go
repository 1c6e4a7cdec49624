package wire

import (
	"reflect"
	"testing"
)

// sampleEntry is a valid entry with one command of every kind, used as a
// fuzz seed and round-trip check.
func sampleEntry() []byte {
	rec := AppendRecord(nil, &Record{Flags: FlagJSON | FlagTxnID | FlagKey | FlagHeaders | FlagTimestamp,
		MsgID: ID{1}, TxnID: []byte("t"), Key: []byte("k"), Headers: []Header{{"h", []byte("v")}, {"n", nil}},
		Timestamp: 42, Payload: []byte(`{"a":1}`)})
	push := PushCmd{Tenant: DefaultTenant, Queue: "q", Partition: "p", PartitionIndex: -1, Count: 1, Records: rec}
	pop := PopCmd{Tenant: DefaultTenant, Queue: "q", Group: "g", Batch: 10, LeaseIDs: []ID{{9}}}
	ack := AckCmd{Tenant: DefaultTenant, Group: "g", Items: []AckItem{{PartitionID: 1, TxnID: []byte("t"), Status: AckFailed, Error: "e"},
		{PartitionID: 1, TxnID: []byte("u"), Status: AckCompleted, Resolved: true, Offset: 7, LeaseFrom: 5, LeaseTo: 9}}}
	ext := ExtendLeaseCmd{Tenant: DefaultTenant, LeaseID: ID{9}, Ms: 1000}
	pos := CommitPositionCmd{Tenant: DefaultTenant, Queue: "q", Group: "g", PartitionIndex: 0, Offset: 3}
	cfg := ConfigureCmd{Tenant: DefaultTenant, Queue: "q", Set: OptLeaseTime, Config: DefaultQueueConfig()}
	del := DeleteQueueCmd{Tenant: DefaultTenant, Queue: "q"}
	return AppendEntry(nil, 1700000000000, []Command{
		{Kind: KindPush, Body: push.Encode(nil)}, {Kind: KindPop, Body: pop.Encode(nil)}, {Kind: KindAck, Body: ack.Encode(nil)},
		{Kind: KindExtendLease, Body: ext.Encode(nil)}, {Kind: KindCommitPosition, Body: pos.Encode(nil)},
		{Kind: KindConfigure, Body: cfg.Encode(nil)}, {Kind: KindDeleteQueue, Body: del.Encode(nil)},
	})
}

// decodeAny runs the decoder of a command's kind.
func decodeAny(c Command) error {
	var err error
	switch c.Kind {
	case KindPush:
		var p PushCmd
		if p, err = DecodePushCmd(c.Body); err == nil {
			it := NewRecordIter(p.Records)
			for body, _, ok := it.Next(); ok; body, _, ok = it.Next() {
				_, _ = ParseRecord(body)
			}
		}
	case KindPop:
		_, err = DecodePopCmd(c.Body)
	case KindAck:
		_, err = DecodeAckCmd(c.Body)
	case KindExtendLease:
		_, err = DecodeExtendLeaseCmd(c.Body)
	case KindCommitPosition:
		_, err = DecodeCommitPositionCmd(c.Body)
	case KindConfigure:
		_, err = DecodeConfigureCmd(c.Body)
	case KindDeleteQueue:
		_, err = DecodeDeleteQueueCmd(c.Body)
	case KindTransaction:
		err = decodeTxn(c.Body)
	}
	return err
}

func TestSampleEntryRoundTrips(t *testing.T) {
	e, err := ParseEntry(sampleEntry())
	if err != nil || e.NowMs != 1700000000000 || e.Count != 7 {
		t.Fatalf("%v %+v", err, e)
	}
	n := 0
	for c, ok := e.Next(); ok; c, ok = e.Next() {
		if err := decodeAny(c); err != nil {
			t.Fatalf("kind %d: %v", c.Kind, err)
		}
		n++
	}
	if n != 7 || e.Err() != nil {
		t.Fatalf("%d commands, %v", n, e.Err())
	}
	if r, _ := ParseEntry(MarkRetry(sampleEntry())); !r.Retry {
		t.Fatal("retry flag lost")
	}
}

func FuzzParseEntry(f *testing.F) {
	f.Add(sampleEntry())
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseEntry(b)
		if err != nil {
			return
		}
		for c, ok := e.Next(); ok; c, ok = e.Next() {
			_ = decodeAny(c)
		}
		_ = e.Err()
	})
}

func FuzzParseRecord(f *testing.F) {
	rec := AppendRecord(nil, &Record{Flags: FlagKey | FlagHeaders | FlagTrace | FlagSub, MsgID: ID{3},
		Key: []byte{}, Headers: []Header{{"a", []byte("b")}}, TraceID: []byte("tr"), ProducerSub: []byte("s"), Payload: []byte{0xff}})
	f.Add(rec[1:])
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRecord(b)
		if err != nil {
			return
		}
		// What parses re-encodes to a record that parses the same.
		again := AppendRecord(nil, &r)
		it := NewRecordIter(again)
		body, _, ok := it.Next()
		if !ok {
			t.Fatalf("re-encoded record does not frame: %x", again)
		}
		r2, err := ParseRecord(body)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("re-encoding differs: %v\n%+v\n%+v", err, r, r2)
		}
	})
}
