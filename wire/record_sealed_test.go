package wire

import (
	"bytes"
	"reflect"
	"testing"
)

// A sealed record's fields survive AppendSealedFields and
// ParseSealedFields, and the clear flags of the outer record do not leak
// into the fields (or back).
func TestSealedFieldsRoundTrip(t *testing.T) {
	in := Record{Flags: FlagKey | FlagHeaders | FlagTimestamp | FlagTrace | FlagSub | FlagTxnID | FlagJSON,
		MsgID: ID{1, 2, 3}, TxnID: []byte("txn-1"), Key: []byte("k"), Timestamp: -5,
		Headers: []Header{{Key: "h1", Value: []byte("v1")}, {Key: "nil"}},
		TraceID: []byte("trace"), ProducerSub: []byte("sub"), Payload: []byte(`{"a":1}`)}
	fields := AppendSealedFields(nil, &in)
	if len(fields) != SealedFieldsLen(&in) {
		t.Fatalf("SealedFieldsLen %d, wrote %d", SealedFieldsLen(&in), len(fields))
	}
	if bytes.Contains(fields, in.TxnID) {
		t.Fatal("the transaction id is sealed too; it stays in the clear record")
	}
	outer := Record{Flags: FlagTxnID | FlagEncrypted | FlagSealed, MsgID: in.MsgID, TxnID: in.TxnID, Payload: []byte("envelope")}
	if err := ParseSealedFields(fields, &outer); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(outer, in) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", outer, in)
	}
	// Without a transaction id in the clear record, none comes back.
	in.Flags &^= FlagTxnID
	in.TxnID = nil
	outer = Record{Flags: FlagEncrypted | FlagSealed, MsgID: in.MsgID}
	if err := ParseSealedFields(AppendSealedFields(nil, &in), &outer); err != nil || !reflect.DeepEqual(outer, in) {
		t.Fatalf("without txn: %v %+v", err, outer)
	}
	// Trailing bytes are refused, and the record is left as stored
	// (OpenRecord serves it so).
	stored := Record{Flags: FlagEncrypted | FlagSealed, MsgID: in.MsgID, Payload: []byte("envelope")}
	outer = stored
	if err := ParseSealedFields(append(AppendSealedFields(nil, &in), 0), &outer); err == nil {
		t.Fatal("trailing byte accepted")
	}
	if !reflect.DeepEqual(outer, stored) {
		t.Fatalf("a refused parse changed the record: %+v", outer)
	}
}
