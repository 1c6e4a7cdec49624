package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchOffsets sends an OffsetFetch of topic's partitions for group and
// returns each partition's offset and error code.
func fetchOffsets(t *testing.T, cl *kgo.Client, group, topic string, requireStable bool, partitions ...int32) map[int32][2]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = group, requireStable
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, partitions
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("offset fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	out := map[int32][2]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[rp.Partition] = [2]int64{rp.Offset, int64(rp.ErrorCode)}
		}
	}
	return out
}

// A consumer that asks for stable offsets (KIP-447, franz-go always does)
// must not start from a position a transaction is about to move: while a
// partition has offsets staged by a transaction not yet resolved there,
// OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for it,
// and the client asks again. Answering the old position instead let a new
// read-process-write session copy again what a committed transaction had
// copied (the exactly-once fault test found it after a coordinator kill).
func TestOffsetFetchRequireStableWaitsForStagedOffsets(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "in", 2)
	for i := 0; i < 10; i++ { // a position is never past the partition's end
		if err := cl.ProduceSync(ctxFor(t), &kgo.Record{Topic: "in", Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	x := &txnClient{t: t, cl: cl, id: "copier"}
	x.init(60000)
	if code := x.addOffsets("g"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if codes := x.commitOffsets("g", "in", map[int32]int64{0: 5}); codes[0] != 0 {
		t.Fatalf("staging offsets: %v", codes)
	}

	got := fetchOffsets(t, cl, "g", "in", true, 0, 1)
	if got[0][1] != int64(kerr.UnstableOffsetCommit.Code) {
		t.Fatalf("require_stable, partition 0 with a staged offset: offset %d code %d, want UNSTABLE_OFFSET_COMMIT", got[0][0], got[0][1])
	}
	if got[1] != [2]int64{-1, 0} {
		t.Fatalf("require_stable, partition 1 untouched: offset %d code %d, want -1 and no error", got[1][0], got[1][1])
	}
	// Without require_stable, Kafka answers the last committed position.
	if got := fetchOffsets(t, cl, "g", "in", false, 0); got[0] != [2]int64{-1, 0} {
		t.Fatalf("read_uncommitted-style fetch: offset %d code %d, want -1 and no error", got[0][0], got[0][1])
	}
	// Another group's positions are not held up by this transaction.
	if got := fetchOffsets(t, cl, "other", "in", true, 0); got[0] != [2]int64{-1, 0} {
		t.Fatalf("another group: offset %d code %d", got[0][0], got[0][1])
	}

	if code := x.end(true); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if got := fetchOffsets(t, cl, "g", "in", true, 0); got[0] != [2]int64{5, 0} {
		t.Fatalf("after the commit: offset %d code %d, want 5", got[0][0], got[0][1])
	}

	// An aborted transaction's staged offsets stop holding the partition.
	if code := x.addOffsets("g"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if codes := x.commitOffsets("g", "in", map[int32]int64{0: 9}); codes[0] != 0 {
		t.Fatalf("staging offsets: %v", codes)
	}
	if got := fetchOffsets(t, cl, "g", "in", true, 0); got[0][1] != int64(kerr.UnstableOffsetCommit.Code) {
		t.Fatalf("second transaction staged: offset %d code %d", got[0][0], got[0][1])
	}
	if code := x.end(false); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if got := fetchOffsets(t, cl, "g", "in", true, 0); got[0] != [2]int64{5, 0} {
		t.Fatalf("after the abort: offset %d code %d, want 5", got[0][0], got[0][1])
	}
}
