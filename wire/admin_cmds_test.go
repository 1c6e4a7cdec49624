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

// A stepped seek, group delete and their answer carry their steps as an
// optional tail: a body cut inside the tail is refused, and a body without
// it (every entry written before steps existed) decodes as one whole walk.
func TestStepsAreAnOptionalTail(t *testing.T) {
	// A walk's start rides at the very end, optional too: steps without it
	// read as before.
	since := DeleteGroupCmd{Tenant: DefaultTenant, Group: "g", Steps: Steps{Limit: 4, Queue: 3, Index: 2, Since: 1_700_000_000_000}}
	if got, err := DecodeDeleteGroupCmd(since.Encode(nil)); err != nil || got != since {
		t.Fatalf("steps with a start: %+v %v", got, err)
	}
	zero := Writer{}
	zero.Uvarint(1)
	zero.Uvarint(0)
	zero.Uvarint(0)
	zero.Varint(0)
	r := Reader{b: zero.B}
	if s := decodeSteps(&r); r.Done() == nil {
		t.Fatalf("a zero start decoded: %+v", s)
	}
	steps := Steps{Limit: GroupStepLimit, Queue: 300, Index: 70_000}
	type codec struct {
		name      string
		whole     []byte // without steps
		stepped   []byte
		dec       func([]byte) (any, error)
		wantWhole any
		want      any
	}
	seek := SeekCmd{Tenant: DefaultTenant, Queue: "q", Group: "g", ToEnd: true}
	seekStepped := seek
	seekStepped.Steps = steps
	dg := DeleteGroupCmd{Tenant: DefaultTenant, Group: "g", DeleteMetadata: true}
	dgStepped := dg
	dgStepped.Steps = steps
	cr := CountResult{Code: CodeOK, N: 9, More: true}
	crStepped := cr
	crStepped.Next = steps
	for _, c := range []codec{
		{"seek", seek.Encode(nil), seekStepped.Encode(nil), func(b []byte) (any, error) { return DecodeSeekCmd(b) }, seek, seekStepped},
		{"delete group", dg.Encode(nil), dgStepped.Encode(nil), func(b []byte) (any, error) { return DecodeDeleteGroupCmd(b) }, dg, dgStepped},
		{"count", cr.Encode(nil), crStepped.Encode(nil), func(b []byte) (any, error) { return DecodeCountResult(b) }, cr, crStepped},
	} {
		if got, err := c.dec(c.stepped); err != nil || !reflect.DeepEqual(got, c.want) {
			t.Fatalf("%s: %v %+v want %+v", c.name, err, got, c.want)
		}
		if got, err := c.dec(c.whole); err != nil || !reflect.DeepEqual(got, c.wantWhole) {
			t.Fatalf("%s without steps: %v %+v want %+v", c.name, err, got, c.wantWhole)
		}
		if len(c.stepped) <= len(c.whole) {
			t.Fatalf("%s: steps added no bytes", c.name)
		}
		for n := len(c.whole) + 1; n < len(c.stepped); n++ {
			if _, err := c.dec(c.stepped[:n]); err == nil {
				t.Fatalf("%s: cut inside its steps (%d of %d bytes) decoded", c.name, n, len(c.stepped))
			}
		}
	}
}
