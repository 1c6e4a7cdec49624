package wire

import (
	"reflect"
	"testing"
)

// TestAdminCommandsRoundTrip checks every codec of the group, DLQ and
// message administration commands, and that truncated bodies are refused.
func TestAdminCommandsRoundTrip(t *testing.T) {
	check := func(name string, enc []byte, dec func([]byte) (any, error), want any) {
		t.Helper()
		got, err := dec(enc)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %v %+v want %+v", name, err, got, want)
		}
		for n := 0; n < len(enc); n++ {
			if _, err := dec(enc[:n]); err == nil {
				t.Fatalf("%s: truncated to %d bytes decoded", name, n)
			}
		}
	}
	seek := SeekCmd{Tenant: DefaultTenant, Queue: "q", Group: "g", Partition: "p", TimestampMs: 17}
	check("seek", seek.Encode(nil), func(b []byte) (any, error) { return DecodeSeekCmd(b) }, seek)
	dg := DeleteGroupCmd{Tenant: DefaultTenant, Group: "g", Queue: "q", DeleteMetadata: true}
	check("delete group", dg.Encode(nil), func(b []byte) (any, error) { return DecodeDeleteGroupCmd(b) }, dg)
	sub := SubscriptionCmd{Tenant: DefaultTenant, Group: "g", FromMs: -5}
	check("subscription", sub.Encode(nil), func(b []byte) (any, error) { return DecodeSubscriptionCmd(b) }, sub)
	cr := CountResult{Code: CodeOK, N: 9, More: true}
	check("count", cr.Encode(nil), func(b []byte) (any, error) { return DecodeCountResult(b) }, cr)
	pg := DLQPurgeCmd{Tenant: DefaultTenant, Queue: "q", Group: "g"}
	check("purge", pg.Encode(nil), func(b []byte) (any, error) { return DecodeDLQPurgeCmd(b) }, pg)
	rp := DLQReplayCmd{Tenant: DefaultTenant, ID: 3, MsgID: ID{1}, Queue: "q", Partition: "p"}
	check("replay", rp.Encode(nil), func(b []byte) (any, error) { return DecodeDLQReplayCmd(b) }, rp)
	rr := DLQReplayResult{Code: CodeOK, Duplicate: true, Queue: "q", Partition: "p", PartitionID: 4, Offset: 5, MsgID: ID{2}}
	check("replay result", rr.Encode(nil), func(b []byte) (any, error) { return DecodeDLQReplayResult(b) }, rr)
	dm := DeleteMessageCmd{Tenant: DefaultTenant, PartitionID: 8, TxnID: []byte("t")}
	check("delete message", dm.Encode(nil), func(b []byte) (any, error) { return DecodeDeleteMessageCmd(b) }, dm)
}
