package link

import (
	"bytes"
	"testing"

	"github.com/lni/dragonboat/v4/client"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

func TestFramesRoundTrip(t *testing.T) {
	in := []Entry{{Index: 7, StampMs: 1700000000000, Payload: []byte("abc")}, {Index: 8, Skip: true}, {Index: 9, StampMs: 1, Payload: []byte{0}}}
	var b []byte
	for _, e := range in {
		b = appendFrame(b, e)
	}
	out, err := parseFrames(b)
	if err != nil || len(out) != 3 {
		t.Fatalf("%v %v", out, err)
	}
	for i := range in {
		if out[i].Index != in[i].Index || out[i].StampMs != in[i].StampMs || out[i].Skip != in[i].Skip || !bytes.Equal(out[i].Payload, in[i].Payload) {
			t.Fatalf("entry %d: %+v, want %+v", i, out[i], in[i])
		}
	}
	// Truncated, a gap, and a payload longer than the body are refused.
	for _, bad := range [][]byte{b[:len(b)-1], append(appendFrame(nil, in[0]), appendFrame(nil, in[2])...), {1, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x01}} {
		if _, err := parseFrames(bad); err == nil {
			t.Fatalf("accepted %x", bad)
		}
	}
}

// Dragonboat's encoding is undone as its rsm does: an encoded entry
// without compression is its payload after the header byte; membership,
// empty and session entries are skips; a compressed entry is an error.
func TestToEntry(t *testing.T) {
	noop := func(e pb.Entry) pb.Entry { e.ClientID, e.SeriesID = 42, client.NoOPSeriesID; return e }
	for name, c := range map[string]struct {
		e       pb.Entry
		skip    bool
		payload string
		err     bool
	}{
		"application": {e: noop(pb.Entry{Index: 1, Type: pb.ApplicationEntry, Cmd: []byte("cmd")}), payload: "cmd"},
		"encoded":     {e: noop(pb.Entry{Index: 1, Type: pb.EncodedEntry, Cmd: []byte{0, 'c', 'm', 'd'}}), payload: "cmd"},
		"snappy":      {e: noop(pb.Entry{Index: 1, Type: pb.EncodedEntry, Cmd: []byte{1 << 1, 3, 'x'}}), err: true},
		"config":      {e: pb.Entry{Index: 1, Type: pb.ConfigChangeEntry, Cmd: []byte("cc")}, skip: true},
		"empty":       {e: pb.Entry{Index: 1, Type: pb.ApplicationEntry}, skip: true},
		"metadata":    {e: noop(pb.Entry{Index: 1, Type: pb.MetadataEntry, Cmd: []byte("m")}), skip: true},
		"register":    {e: pb.Entry{Index: 1, Type: pb.ApplicationEntry, ClientID: 42, SeriesID: client.SeriesIDForRegister}, skip: true},
	} {
		got, err := toEntry(c.e)
		if (err != nil) != c.err || got.Skip != c.skip || string(got.Payload) != c.payload {
			t.Fatalf("%s: %+v, %v", name, got, err)
		}
	}
}
