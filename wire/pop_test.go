package wire

import (
	"reflect"
	"testing"
)

// MaxPartitions travels only when set, so a pop encoded before it existed
// (and an auto-ack pop of one partition) has the same bytes as before.
func TestPopCmdMaxPartitionsIsOptional(t *testing.T) {
	old := PopCmd{Tenant: DefaultTenant, Queue: "q", Group: "g", Batch: 3, CommitOnDelivery: true, LeaseIDs: []ID{}}
	b := old.Encode(nil)
	if got, err := DecodePopCmd(b); err != nil || !reflect.DeepEqual(got, old) || got.PartitionLimit() != 1 {
		t.Fatalf("without MaxPartitions: %+v %v", got, err)
	}
	c := old
	c.MaxPartitions = 8
	got, err := DecodePopCmd(c.Encode(nil))
	if err != nil || !reflect.DeepEqual(got, c) || got.PartitionLimit() != 8 {
		t.Fatalf("with MaxPartitions: %+v %v", got, err)
	}
	c.MaxPartitions = MaxPopPartitions + 1
	if _, err := DecodePopCmd(c.Encode(nil)); err == nil {
		t.Fatal("a pop over more than MaxPopPartitions partitions decoded")
	}
}
