package wire

import (
	"bytes"
	"testing"
)

func TestLinkSnapshotCmdsRoundTrip(t *testing.T) {
	c := LinkSnapshotChunkCmd{ID: 9, Seq: 3, Data: []byte("stream")}
	got, err := DecodeLinkSnapshotChunkCmd(c.Encode(nil))
	if err != nil || got.ID != 9 || got.Seq != 3 || !bytes.Equal(got.Data, c.Data) {
		t.Fatalf("%+v %v", got, err)
	}
	d := LinkSnapshotDoneCmd{ID: 9, Chunks: 4, Bytes: 1 << 33, CRC: 0xdeadbeef, SourceIndex: 77, Source: "a:7400,b:7400"}
	gd, err := DecodeLinkSnapshotDoneCmd(d.Encode(nil))
	if err != nil || gd != d {
		t.Fatalf("%+v %v", gd, err)
	}
	for _, bad := range [][]byte{
		(&LinkSnapshotChunkCmd{ID: 0, Data: []byte("x")}).Encode(nil),
		(&LinkSnapshotChunkCmd{ID: 1}).Encode(nil),
		(&LinkSnapshotChunkCmd{ID: 1, Data: make([]byte, MaxLinkSnapshotChunk+1)}).Encode(nil),
		append(c.Encode(nil), 0),
	} {
		if _, err := DecodeLinkSnapshotChunkCmd(bad); err == nil {
			t.Fatalf("accepted %x", bad[:min(len(bad), 16)])
		}
	}
	if _, err := DecodeLinkSnapshotDoneCmd((&LinkSnapshotDoneCmd{ID: 1}).Encode(nil)); err == nil {
		t.Fatal("accepted a done without chunks")
	}
}
