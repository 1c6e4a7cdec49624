package wire

import (
	"reflect"
	"testing"
)

func TestDeleteOffsetsRoundTrip(t *testing.T) {
	c := DeleteOffsetsCmd{Tenant: DefaultTenant, Group: "g", Items: []PartitionRef{{"a", 0}, {"b", 7}}}
	got, err := DecodeDeleteOffsetsCmd(c.Encode(nil))
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("%+v %v", got, err)
	}
	r := CodesResult{Codes: []Code{CodeOK, CodeQueueNotFound}}
	gotR, err := DecodeCodesResult(r.Encode(nil))
	if err != nil || !reflect.DeepEqual(gotR, r) {
		t.Fatalf("%+v %v", gotR, err)
	}
}

// FuzzDecodeDeleteOffsets: a forged body never panics nor allocates more
// than its length justifies, and what decodes re-encodes to the same bytes.
func FuzzDecodeDeleteOffsets(f *testing.F) {
	c := DeleteOffsetsCmd{Tenant: DefaultTenant, Group: "g", Items: []PartitionRef{{"q", 3}}}
	f.Add(c.Encode(nil))
	f.Add(CodesResult{Codes: []Code{CodeOK}}.Encode(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := DecodeDeleteOffsetsCmd(b); err == nil {
			if again, err := DecodeDeleteOffsetsCmd(c.Encode(nil)); err != nil || !reflect.DeepEqual(again, c) {
				t.Fatalf("re-encoding changed %+v: %+v %v", c, again, err)
			}
		}
		_, _ = DecodeCodesResult(b)
	})
}
