package wire

import (
	"reflect"
	"testing"
)

// decodeTxn decodes a transaction and every operation inside it.
func decodeTxn(b []byte) error {
	c, err := DecodeTxnCmd(b)
	if err != nil {
		return err
	}
	for _, op := range c.Ops {
		switch op.Kind {
		case TxnOpPush:
			_, err = DecodePushCmd(op.Body)
		case TxnOpAck:
			_, err = DecodeAckCmd(op.Body)
		case TxnOpPosition:
			_, err = DecodePositionOp(op.Body)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func sampleTxn() TxnCmd {
	rec := AppendRecord(nil, &Record{Flags: FlagJSON, MsgID: ID{1}, Payload: []byte(`1`)})
	push := PushCmd{Tenant: DefaultTenant, Queue: "out", Partition: "p", PartitionIndex: -1, Count: 1, Records: rec}
	ack := AckCmd{Tenant: DefaultTenant, Group: "g", Items: []AckItem{{PartitionID: 1, TxnID: []byte("t")}}}
	pos := PositionOp{Queue: "q", Group: "g", Partition: "p", Offset: 17, Metadata: "m", SubMode: SubAll}
	reset := PositionOp{Queue: "q", Group: "g", Partition: "p", Reset: true}
	return TxnCmd{Tenant: DefaultTenant, ID: ID{5}, RequiredLeases: []ID{{9}, {10}}, Ops: []TxnOp{
		{TxnOpPush, push.Encode(nil)}, {TxnOpAck, ack.Encode(nil)}, {TxnOpPosition, pos.Encode(nil)}, {TxnOpPosition, reset.Encode(nil)},
	}}
}

func TestTxnRoundTrips(t *testing.T) {
	c := sampleTxn()
	b := c.Encode(nil)
	got, err := DecodeTxnCmd(b)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("%v\n%+v\n%+v", err, got, c)
	}
	if err := decodeTxn(b); err != nil {
		t.Fatal(err)
	}
	pos, err := DecodePositionOp(c.Ops[3].Body)
	if err != nil || !pos.Reset || pos.Queue != "q" {
		t.Fatalf("position: %v %+v", err, pos)
	}
	res := TxnResult{Code: CodeOK, FailedLease: -1, FailedOp: -1, FailedItem: -1, Ops: [][]byte{{0}, CodeResult{}.Encode(nil)}}
	back, err := DecodeTxnResult(res.Encode(nil))
	if err != nil || !reflect.DeepEqual(back, res) {
		t.Fatalf("result: %v %+v", err, back)
	}
	fail := TxnFailure(CodeLeaseMismatch, -1, 1, 0)
	if back, err := DecodeTxnResult(fail.Encode(nil)); err != nil || back.Code != CodeLeaseMismatch || back.FailedOp != 1 || back.Ops != nil {
		t.Fatalf("failure: %v %+v", err, back)
	}
}

func FuzzDecodeTxnCmd(f *testing.F) {
	c := sampleTxn()
	f.Add(c.Encode(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeTxnCmd(b)
		if err != nil {
			return
		}
		_ = decodeTxn(b)
		// What decodes re-encodes to a command that decodes the same.
		again, err := DecodeTxnCmd(c.Encode(nil))
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("re-encoding differs: %v\n%+v\n%+v", err, again, c)
		}
	})
}
