package wire

import (
	"reflect"
	"testing"
)

// The placement and cross-group commands re-encode to the same bytes, and
// their decoders survive any truncation.
func TestPlacementCommandsRoundTrip(t *testing.T) {
	place := Placement{Groups: []uint16{0, 2, 5}, Start: 1}
	cat := Catalog{Inc: GroupID(7, 2), CfgVer: 3, Cfg: DefaultQueueConfig(), Namespace: "n", Task: "t", Kafka: true,
		CreatedMs: 9, Place: place, Partitions: 4, Groups: 0b100101}
	dir := []DirEntry{{Index: 0, Name: "a", Group: 2, CreatedMs: 5}, {Index: 1, Name: "b", Group: 5, CreatedMs: 6}}
	txn := TxnCmd{Tenant: DefaultTenant, ID: ID{3}, Ops: []TxnOp{{Kind: TxnOpKV, Body: []byte{1}}}}
	cases := []struct {
		body   []byte
		decode func([]byte) ([]byte, error)
	}{
		{(&AllocCmd{Tenant: DefaultTenant, Queue: "q", Flags: AllocCreate | AllocKafka, Namespace: "n", Task: "t", Place: place,
			Names: []string{"a", "b"}, Count: 3}).Encode(nil), func(b []byte) ([]byte, error) { c, err := DecodeAllocCmd(b); return c.Encode(nil), err }},
		{AllocResult{Code: CodeOK, Created: true, Catalog: cat, Parts: dir}.Encode(nil),
			func(b []byte) ([]byte, error) { r, err := DecodeAllocResult(b); return r.Encode(nil), err }},
		{(&EnsureShardCmd{Tenant: DefaultTenant, Queue: "q", Catalog: cat, Parts: dir,
			Subs: []SubEntry{{Group: "g", Sub: Subscription{Mode: SubFrom, FromMs: 4, CreatedMs: 8}}}}).Encode(nil),
			func(b []byte) ([]byte, error) { c, err := DecodeEnsureShardCmd(b); return c.Encode(nil), err }},
		{(&DropShardCmd{Tenant: DefaultTenant, Queue: "q", Inc: 11}).Encode(nil),
			func(b []byte) ([]byte, error) { c, err := DecodeDropShardCmd(b); return c.Encode(nil), err }},
		{(&SubscribeCmd{Tenant: DefaultTenant, Queue: "q", Group: "g", Mode: SubAll, FromMs: 3}).Encode(nil),
			func(b []byte) ([]byte, error) { c, err := DecodeSubscribeCmd(b); return c.Encode(nil), err }},
		{DeleteQueueResult{Code: CodeOK, Inc: 5, Groups: 6}.Encode(nil),
			func(b []byte) ([]byte, error) { r, err := DecodeDeleteQueueResult(b); return r.Encode(nil), err }},
		{(&XPrepareCmd{ID: ID{1}, Coord: 3, DeadlineMs: 77, Sub: Command{Kind: KindTransaction, Body: txn.Encode(nil)}}).Encode(nil),
			func(b []byte) ([]byte, error) { c, err := DecodeXPrepareCmd(b); return c.Encode(nil), err }},
		{(&XDecideCmd{ID: ID{1}, Commit: true, Participants: []uint16{1, 4}, Own: Command{Kind: KindTransaction, Body: []byte{9}}}).Encode(nil),
			func(b []byte) ([]byte, error) { c, err := DecodeXDecideCmd(b); return c.Encode(nil), err }},
		{(&XResolveCmd{ID: ID{1}, Commit: true}).Encode(nil),
			func(b []byte) ([]byte, error) { c, err := DecodeXResolveCmd(b); return c.Encode(nil), err }},
		{(&XForgetCmd{IDs: []ID{{1}, {2}}}).Encode(nil),
			func(b []byte) ([]byte, error) { c, err := DecodeXForgetCmd(b); return c.Encode(nil), err }},
		{(&TimerFiredCmd{Tenant: DefaultTenant, Queue: "q", Key: "k", DueMs: 5, Code: CodeBadRequest}).Encode(nil),
			func(b []byte) ([]byte, error) { c, err := DecodeTimerFiredCmd(b); return c.Encode(nil), err }},
	}
	for i, tc := range cases {
		again, err := tc.decode(tc.body)
		if err != nil || !reflect.DeepEqual(again, tc.body) {
			t.Fatalf("case %d: %v\n%x\n%x", i, err, tc.body, again)
		}
		// Every truncation is refused (or, for a trailing empty field,
		// read as that), never a panic.
		for cut := 0; cut < len(tc.body); cut++ {
			_, _ = tc.decode(tc.body[:cut])
		}
	}
	if GroupOfID(GroupID(12345, 7)) != 7 || GroupOfTag(TagID(ID{1, 2, 3}, 9)) != 9 {
		t.Fatal("group tags")
	}
	if place.GroupOf(0) != 2 || place.GroupOf(2) != 0 || place.Home() != 2 {
		t.Fatalf("placement %d %d %d", place.GroupOf(0), place.GroupOf(2), place.Home())
	}
}
