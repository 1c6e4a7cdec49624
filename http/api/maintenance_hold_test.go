package api

import (
	"bytes"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// A held push decodes to the commands it was made of, every record with
// an explicit transaction id (its message id when it had none), and a
// truncated or altered entry is refused, never a panic.
func TestHeldPushRoundTrip(t *testing.T) {
	tenant := wire.ID{7}
	items := []pushItem{
		{Queue: "q", Partition: "a", Payload: []byte(`1`)},
		{Queue: "q", Partition: "b", Payload: []byte(`2`), TransactionID: "mine"},
		{Queue: "q", Partition: "a", Payload: []byte(`3`)},
	}
	cmds, _, ids, err := buildPushCommands(tenant, items, "")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := encodeHeld(tenant, cmds)
	if err != nil {
		t.Fatal(err)
	}
	gotTenant, got, n, err := decodeHeld(enc)
	if err != nil || gotTenant != tenant || n != 3 || len(got) != 2 {
		t.Fatalf("decode: %v %v %d %d", err, gotTenant, n, len(got))
	}
	want := map[string]string{ids[0].String(): ids[0].String(), ids[1].String(): "mine", ids[2].String(): ids[2].String()}
	for _, c := range got {
		if c.Tenant != tenant || c.PartitionIndex != -1 || c.Flags != wire.PushIndexTxn {
			t.Fatalf("command %+v", c)
		}
		it := wire.NewRecordIter(c.Records)
		for k := 0; ; k++ {
			body, _, ok := it.Next()
			if !ok {
				if k != c.Count {
					t.Fatalf("%s/%s: %d records, count %d", c.Queue, c.Partition, k, c.Count)
				}
				break
			}
			rec, err := wire.ParseRecord(body)
			if err != nil || rec.Flags&wire.FlagTxnID == 0 || string(rec.TxnID) != want[rec.MsgID.String()] {
				t.Fatalf("record %+v: %v", rec, err)
			}
		}
	}
	for i := range enc {
		// Every prefix is refused: the last command's records are cut.
		if _, _, _, err := decodeHeld(enc[:i]); err == nil {
			t.Fatalf("a %d-byte prefix of %d decoded", i, len(enc))
		}
	}
	bad := bytes.Clone(enc)
	bad[16] = 0xff // the command count, now absurd
	if _, _, _, err := decodeHeld(bad); err == nil {
		t.Fatal("an absurd command count decoded")
	}
}

func FuzzDecodeHeld(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 17))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, cmds, n, err := decodeHeld(b)
		if err != nil {
			return
		}
		total := 0
		for _, c := range cmds {
			total += c.Count
		}
		if total != n {
			t.Fatalf("count %d, commands hold %d", n, total)
		}
	})
}
