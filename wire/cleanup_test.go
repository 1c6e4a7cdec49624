package wire

import (
	"reflect"
	"testing"
)

func TestCleanupCommandsRoundTrip(t *testing.T) {
	for _, c := range []TickCmd{{}, {PartitionCleanupMs: 30 * 86400000}, {TraceRetentionMs: 3_600_000}, {PartitionCleanupMs: 1, TraceRetentionMs: 2}} {
		got, err := DecodeTickCmd(c.Encode(nil))
		if err != nil || got != c {
			t.Fatalf("tick %+v: %+v %v", c, got, err)
		}
	}
	if got, err := DecodeTickCmd(nil); err != nil || got != (TickCmd{}) {
		t.Fatalf("a tick without a body: %+v %v", got, err)
	}
	neg := Writer{}
	neg.Varint(-5)
	if _, err := DecodeTickCmd(neg.B); err == nil {
		t.Fatal("a negative cleanup age decoded")
	}
	zero := Writer{}
	zero.Varint(0)
	zero.Varint(0)
	if _, err := DecodeTickCmd(zero.B); err == nil {
		t.Fatal("a tick with a zero trace retention decoded")
	}
	d := DropDirCmd{Tenant: DefaultTenant, Queue: "q", Inc: 7, Group: 3, Indexes: []uint32{1, 4, 1 << 31}}
	if got, err := DecodeDropDirCmd(d.Encode(nil)); err != nil || !reflect.DeepEqual(got, d) {
		t.Fatalf("drop dir: %+v %v", got, err)
	}
	// AllocCmd without gone indexes encodes as before there were any.
	a := AllocCmd{Tenant: DefaultTenant, Queue: "q", Names: []string{"a"}, Count: 2}
	plain := a.Encode(nil)
	a.Gone = []uint32{5, 9}
	withGone := a.Encode(nil)
	if len(withGone) <= len(plain) || string(withGone[:len(plain)]) != string(plain) {
		t.Fatal("gone indexes are not an optional tail")
	}
	if got, err := DecodeAllocCmd(withGone); err != nil || !reflect.DeepEqual(got.Gone, a.Gone) {
		t.Fatalf("alloc with gone: %+v %v", got, err)
	}
	if got, err := DecodeAllocCmd(plain); err != nil || got.Gone != nil {
		t.Fatalf("alloc without gone: %+v %v", got, err)
	}
}
