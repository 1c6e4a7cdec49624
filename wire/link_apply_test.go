package wire

import (
	"reflect"
	"testing"
)

func TestLinkApplyRoundTrip(t *testing.T) {
	c := LinkApplyCmd{Source: "10.0.0.1:7400", FirstSourceIndex: 5, LastSourceIndex: 7, Entries: []LinkEntry{
		{StampMs: 1700000000000, Payload: AppendEntry(nil, 1700000000000, nil)},
		{Skip: true},
		{StampMs: 1700000000001, Payload: []byte("x")},
	}}
	got, err := DecodeLinkApplyCmd(c.Encode(nil))
	if err != nil {
		t.Fatal(err)
	}
	for i := range got.Entries { // an empty payload decodes as empty, not nil
		if len(got.Entries[i].Payload) == 0 {
			got.Entries[i].Payload = nil
		}
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("got %+v want %+v", got, c)
	}
	if _, err := DecodeLinkPromoteCmd((&LinkPromoteCmd{}).Encode(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeLinkPromoteCmd([]byte{1}); err == nil {
		t.Fatal("trailing bytes accepted")
	}
}

func TestLinkApplyRefusesBadSpans(t *testing.T) {
	for name, c := range map[string]LinkApplyCmd{
		"none":      {FirstSourceIndex: 1, LastSourceIndex: 1},
		"zero":      {FirstSourceIndex: 0, LastSourceIndex: 0, Entries: []LinkEntry{{}}},
		"short":     {FirstSourceIndex: 1, LastSourceIndex: 3, Entries: []LinkEntry{{}}},
		"backwards": {FirstSourceIndex: 3, LastSourceIndex: 2, Entries: []LinkEntry{{}}},
	} {
		if _, err := DecodeLinkApplyCmd(c.Encode(nil)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzDecodeLinkApply(f *testing.F) {
	c := LinkApplyCmd{Source: "s", FirstSourceIndex: 1, LastSourceIndex: 2, Entries: []LinkEntry{{StampMs: 1, Payload: []byte("a")}, {Skip: true}}}
	f.Add(c.Encode(nil))
	f.Add([]byte{0, 1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeLinkApplyCmd(b)
		if err != nil {
			return
		}
		if c.LastSourceIndex-c.FirstSourceIndex != uint64(len(c.Entries)-1) {
			t.Fatalf("span %d..%d with %d entries", c.FirstSourceIndex, c.LastSourceIndex, len(c.Entries))
		}
		again, err := DecodeLinkApplyCmd(c.Encode(nil))
		if err != nil || len(again.Entries) != len(c.Entries) {
			t.Fatalf("re-encode: %v", err)
		}
	})
}
