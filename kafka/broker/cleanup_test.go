package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/wire"
)

// An HTTP queue's partition removed as idle keeps its index out of use:
// Metadata lists it without a leader (retriable for clients), ListOffsets
// answers it UNKNOWN_TOPIC_OR_PARTITION, and the others are as before.
func TestMetadataShowsARemovedPartitionWithoutLeader(t *testing.T) {
	n := startNode(t, nil)
	ctx := ctxFor(t)
	const queue = "churn"
	if _, _, err := n.engine.EnsureQueue(ctx, wire.DefaultTenant, queue, 3, true, false); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"0", "2"} {
		httpPush(t, n.engine, wire.PushCmd{Tenant: wire.DefaultTenant, Queue: queue, Partition: name, PartitionIndex: -1, Count: 1,
			Records: wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: wire.ID{1, name[0]}, Payload: []byte(`1`)})})
	}
	g := raftGroupsOf(t, n.engine, queue, 3)[1]
	tick := wire.TickCmd{PartitionCleanupMs: 1}
	for {
		if _, ok := n.engine.GroupStore(g).PartitionByIndex(wire.DefaultTenant, queue, 1); !ok {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("partition 1 was never removed")
		}
		if _, err := n.engine.Propose(ctx, g, wire.Command{Kind: wire.KindTick, Body: tick.Encode(nil)}); err != nil {
			t.Fatal(err)
		}
	}
	// The shard's leader tells the home within a reconcile (5 s).
	for {
		if _, ok := n.engine.DirByIndex(wire.DefaultTenant, queue, 1); !ok {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the home never dropped partition 1")
		}
		time.Sleep(20 * time.Millisecond) // polling the reconciler's effect, bounded by ctx
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(queue)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, n.client())
	if err != nil {
		t.Fatal(err)
	}
	ps := resp.Topics[0].Partitions
	if len(ps) != 3 {
		t.Fatalf("partitions: %+v", ps)
	}
	for i, p := range ps {
		want := int16(0)
		if i == 1 {
			want = kerr.LeaderNotAvailable.Code
		}
		if p.Partition != int32(i) || p.ErrorCode != want || (want == 0) != (p.Leader == 1) {
			t.Fatalf("partition %d: %+v", i, p)
		}
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = queue
	for i := range int32(3) {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = i, -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	lo.Topics = append(lo.Topics, lt)
	raw, err := n.client().Broker(1).Request(ctx, lo) // straight to the broker: the client would refuse a partition without a leader
	if err != nil {
		t.Fatal(err)
	}
	lr := raw.(*kmsg.ListOffsetsResponse)
	for i, p := range lr.Topics[0].Partitions {
		want, wantOffset := int16(0), int64(1)
		if i == 1 {
			want, wantOffset = kerr.UnknownTopicOrPartition.Code, -1
		}
		if p.ErrorCode != want || p.Offset != wantOffset {
			t.Fatalf("list offsets of partition %d: %+v", i, p)
		}
	}
}
