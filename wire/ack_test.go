package wire

import (
	"reflect"
	"testing"
)

// An item resolved by its proposer carries its offset and lease range; an
// item without them encodes byte for byte as before the field existed.
func TestAckItemsRoundTrip(t *testing.T) {
	plain := AckCmd{Tenant: DefaultTenant, Group: "g", Items: []AckItem{{PartitionID: 3, TxnID: []byte("t"), LeaseID: ID{1}, Status: AckCompleted}}}
	old := []byte{}
	old = append(old, DefaultTenant[:]...)
	old = append(old, 1, 'g', 1, 3, 1, 't')
	old = append(old, plain.Items[0].LeaseID[:]...)
	old = append(old, AckCompleted, 0)
	if got := plain.Encode(nil); string(got) != string(old) {
		t.Fatalf("an unresolved item encodes as %x, want %x", got, old)
	}
	c := AckCmd{Tenant: DefaultTenant, Group: "g", Items: []AckItem{plain.Items[0],
		{PartitionID: 3, TxnID: []byte("u"), LeaseID: ID{1}, Status: AckFailed, Error: "boom", Resolved: true, Offset: 1 << 40, LeaseFrom: 1<<40 - 2, LeaseTo: 1<<40 + 5}}}
	got, err := DecodeAckCmd(c.Encode(nil))
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, got, c)
	}
}
