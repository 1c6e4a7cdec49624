package storage

import (
	"github.com/queen-mq/queen/kafka/records"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/queen-mq/queen/wire"
)

// FuzzApply feeds arbitrary raft entries to one store: whatever a peer
// proposes, the apply loop answers and never fails (a failed Update stops
// the replica) or panics.
func FuzzApply(f *testing.F) {
	rec := wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON | wire.FlagTxnID, MsgID: wire.ID{1}, TxnID: []byte("t"), Payload: []byte("1")})
	alloc := wire.AllocCmd{Tenant: wire.DefaultTenant, Queue: "q", Flags: wire.AllocCreate, Place: testPlace, Names: []string{"p"}}
	push := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "q", Partition: "p", PartitionIndex: -1,
		Flags: wire.PushIndexTxn, Count: 1, Records: rec}
	pop := wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g", Batch: 5, SubMode: wire.SubAll, LeaseIDs: []wire.ID{{7}}}
	ack := wire.AckCmd{Tenant: wire.DefaultTenant, Group: "g", Items: []wire.AckItem{{PartitionID: 1, TxnID: []byte("t"), Status: wire.AckFailed},
		{PartitionID: 1, TxnID: []byte("t"), LeaseID: wire.ID{7}, Resolved: true, Offset: 0, LeaseFrom: 0, LeaseTo: 1}}}
	f.Add(wire.AppendEntry(nil, 1, []wire.Command{{Kind: wire.KindAlloc, Body: alloc.Encode(nil)}, {Kind: wire.KindPush, Body: push.Encode(nil)},
		{Kind: wire.KindPop, Body: pop.Encode(nil)}, {Kind: wire.KindAck, Body: ack.Encode(nil)}}))
	txn := wire.TxnCmd{Tenant: wire.DefaultTenant, ID: wire.ID{3}, RequiredLeases: []wire.ID{{7}}, Ops: []wire.TxnOp{
		{Kind: wire.TxnOpPush, Body: push.Encode(nil)}, {Kind: wire.TxnOpAck, Body: ack.Encode(nil)},
		{Kind: wire.TxnOpPosition, Body: (&wire.PositionOp{Queue: "q", Group: "g", Partition: "p", Offset: 1}).Encode(nil)}}}
	f.Add(wire.AppendEntry(nil, 2, []wire.Command{{Kind: wire.KindTransaction, Body: txn.Encode(nil)}, {Kind: wire.KindTick}}))
	// A Kafka batch kept as produced, popped and acknowledged over HTTP.
	topic := wire.AllocCmd{Tenant: wire.DefaultTenant, Queue: "t", Flags: wire.AllocCreate | wire.AllocKafka, Place: testPlace, Count: 1}
	batch, _ := records.AppendBatch(nil, records.NewBatchOptions(0), []records.Record{{Key: []byte("k"), Value: []byte("v")}})
	produce := wire.KafkaProduceCmd{ProducerID: wire.NoProducer, Push: wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "t",
		Flags: wire.PushKafkaBatch, Count: 1, Records: wire.AppendKafkaBatch(nil, wire.ID{9}, 8, batch)}}
	popT := wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "t", Group: "g", Batch: 5, SubMode: wire.SubAll, LeaseIDs: []wire.ID{{8}}}
	f.Add(wire.AppendEntry(nil, 3, []wire.Command{{Kind: wire.KindAlloc, Body: topic.Encode(nil)},
		{Kind: wire.KindKafkaProduce, Body: produce.Encode(nil)}, {Kind: wire.KindPop, Body: popT.Encode(nil)}}))
	// Idle partitions removed by a tick, their directory entries dropped.
	tick := wire.TickCmd{PartitionCleanupMs: 1}
	drop := wire.DropDirCmd{Tenant: wire.DefaultTenant, Queue: "q", Inc: 1, Indexes: []uint32{0, 1}}
	gone := alloc
	gone.Gone = []uint32{0}
	f.Add(wire.AppendEntry(nil, 1<<40, []wire.Command{{Kind: wire.KindTick, Body: tick.Encode(nil)}, {Kind: wire.KindDropDir, Body: drop.Encode(nil)},
		{Kind: wire.KindForgetDrops, Body: drop.Encode(nil)}, {Kind: wire.KindAlloc, Body: gone.Encode(nil)}, {Kind: wire.KindPush, Body: push.Encode(nil)}}))
	fuzzApply(f)
}

// fuzzApply applies every fuzz input as one raft entry to one store and
// checks the entry is answered. The store keeps one partition in memory,
// so inputs also read partitions back, and the test build checks every
// partition leaving memory against what reading it back gives.
func fuzzApply(f *testing.F) {
	dir := f.TempDir()
	s := New(Config{Dir: dir, PartitionCache: 1})
	index, err := s.Open(make(chan struct{}))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, b []byte) {
		index++
		out, err := s.Update([]sm.Entry{{Index: index, Cmd: b}})
		if err != nil {
			t.Fatalf("apply failed: %v", err)
		}
		if _, err := wire.SplitResults(out[0].Result.Data); err != nil {
			t.Fatalf("results do not frame: %v", err)
		}
	})
}
