package raftgroups

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// oneNodeThreeGroups starts a ready one-node host of three raft groups,
// for tests of how queues spread over groups, and a context bounding the
// test.
func oneNodeThreeGroups(t *testing.T) (*Engine, context.Context) {
	t.Helper()
	c := newTestCluster(t, 1, 3)
	c.waitReady()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c.engines[0], ctx
}

func pushTo(ctx context.Context, t *testing.T, e *Engine, queue, partition string, payloads ...string) []PushOutcome {
	t.Helper()
	var recs []byte
	for i, p := range payloads {
		id := wire.ID{0: 9, 1: byte(len(partition)), 14: byte(i >> 8), 15: byte(i)}
		copy(id[2:12], partition)
		recs = wire.AppendRecord(recs, &wire.Record{Flags: wire.FlagJSON, MsgID: id, Payload: []byte(p)})
	}
	out, err := e.Push(ctx, wire.DefaultTenant, []wire.PushCmd{{Tenant: wire.DefaultTenant, Queue: queue, Partition: partition,
		PartitionIndex: -1, Flags: wire.PushIndexTxn, Count: len(payloads), Records: recs}})
	if err != nil || out[0].Err != nil || out[0].Code != wire.CodeOK {
		t.Fatalf("push %s/%s: %v %+v", queue, partition, err, out)
	}
	return out
}

// One queue's partitions spread over every group; a pop without a
// partition finds messages in all of them, one lease per partition; acks
// route by partition id and views show the queue whole.
func TestQueueSpreadsOverGroupsAndPopsFindEveryPartition(t *testing.T) {
	e, ctx := oneNodeThreeGroups(t)
	groups := map[int]bool{}
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("p%d", i)
		out := pushTo(ctx, t, e, "spread", name, `1`, `2`)
		groups[wire.GroupOfID(out[0].PartitionID)] = true
		d, ok := e.DirByName(wire.DefaultTenant, "spread", name)
		if !ok || int(d.Group) != wire.GroupOfID(out[0].PartitionID) || d.Index != uint32(i) {
			t.Fatalf("directory entry %+v for partition id %d", d, out[0].PartitionID)
		}
	}
	if len(groups) != 3 {
		t.Fatalf("6 partitions in groups %v", groups)
	}
	seen := map[uint64]int{}
	for round := 0; round < 10 && len(seen) < 6; round++ {
		ids := make([]wire.ID, 4)
		for i := range ids {
			ids[i] = wire.ID{0: byte(round), 1: byte(i), 2: 1}
		}
		res, err := e.Pop(ctx, &wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "spread", Group: "g", Batch: 100, SubMode: wire.SubAll, LeaseIDs: ids})
		if err != nil {
			t.Fatal(err)
		}
		for _, cl := range res.Claims {
			if wire.GroupOfTag(cl.LeaseID) != wire.GroupOfID(cl.PartitionID) {
				t.Fatalf("lease %s of a partition in group %d", cl.LeaseID, wire.GroupOfID(cl.PartitionID))
			}
			seen[cl.PartitionID] += int(cl.To - cl.From)
		}
	}
	if len(seen) != 6 {
		t.Fatalf("pops reached %d of 6 partitions: %v", len(seen), seen)
	}
	for pid, n := range seen {
		if n != 2 {
			t.Fatalf("partition %d delivered %d of 2", pid, n)
		}
	}
	views := e.Queues(wire.DefaultTenant, storageFilter("spread"), time.Now().UnixMilli())
	if len(views) != 1 || len(views[0].Partitions) != 6 || views[0].Partitions[5].Index != 5 {
		t.Fatalf("merged view: %+v", views)
	}
	// A page of partitions across groups: the queue's next ones by index,
	// with totals over all of them.
	f := storageFilter("spread")
	f.Partitions, f.PartitionsFrom, f.PartitionLimit = true, 2, 3
	page := e.Queues(wire.DefaultTenant, f, time.Now().UnixMilli())
	if len(page) != 1 || len(page[0].Partitions) != 3 || page[0].Partitions[0].Index != 2 || page[0].Partitions[2].Index != 4 ||
		page[0].Totals != views[0].Totals || page[0].Totals.Partitions != 6 || page[0].Totals.Processing != 12 {
		t.Fatalf("page from 2 of 3: %+v totals %+v", page, page[0].Totals)
	}
}

// An auto-ack pop gathers partitions across groups up to MaxPartitions,
// each a distinct partition, consuming each message once.
func TestAutoAckPopSpansGroupsUpToItsPartitions(t *testing.T) {
	e, ctx := oneNodeThreeGroups(t)
	for i := 0; i < 12; i++ {
		pushTo(ctx, t, e, "sparse", fmt.Sprintf("p%02d", i), `1`)
	}
	seen := map[uint64]bool{}
	for _, want := range []int{5, 5, 2} {
		res, err := e.Pop(ctx, &wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "sparse", Group: "g", Batch: 100,
			SubMode: wire.SubAll, CommitOnDelivery: true, MaxPartitions: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Claims) != want {
			t.Fatalf("pop answered %d claims, want %d: %+v", len(res.Claims), want, res.Claims)
		}
		for _, cl := range res.Claims {
			if seen[cl.PartitionID] {
				t.Fatalf("partition %d delivered twice", cl.PartitionID)
			}
			seen[cl.PartitionID] = true
		}
	}
}

// Options changed at a queue's home reach every group holding its
// partitions; a delete drops them everywhere.
func TestConfigureAndDeleteReachEveryGroup(t *testing.T) {
	e, ctx := oneNodeThreeGroups(t)
	for i := 0; i < 3; i++ {
		pushTo(ctx, t, e, "cfg", fmt.Sprintf("p%d", i), `1`)
	}
	cfg := wire.DefaultQueueConfig()
	cfg.LeaseTimeSec = 11
	if _, err := e.Configure(ctx, &wire.ConfigureCmd{Tenant: wire.DefaultTenant, Queue: "cfg", Set: wire.OptLeaseTime, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	for g := 0; g < 3; g++ {
		q, ok := e.GroupStore(g).Queue(wire.DefaultTenant, "cfg")
		if !ok || q.Config.LeaseTimeSec != 11 {
			t.Fatalf("group %d: %v %+v", g, ok, q.Config)
		}
	}
	if _, err := e.DeleteQueue(ctx, &wire.DeleteQueueCmd{Tenant: wire.DefaultTenant, Queue: "cfg"}); err != nil {
		t.Fatal(err)
	}
	for g := 0; g < 3; g++ {
		if _, _, ok := e.GroupStore(g).Catalog(wire.DefaultTenant, "cfg"); ok {
			t.Fatalf("group %d kept the deleted queue", g)
		}
	}
}

// A shard left behind by a delete that did not reach its group is dropped
// by the reconciler; one of the live incarnation is not.
func TestReconcilerDropsOrphanShards(t *testing.T) {
	e, ctx := oneNodeThreeGroups(t)
	var other int
	for i := 0; ; i++ {
		out := pushTo(ctx, t, e, "orphan", fmt.Sprintf("p%d", i), `1`)
		if g := wire.GroupOfID(out[0].PartitionID); g != e.Home(wire.DefaultTenant, "orphan") {
			other = g
			break
		}
	}
	// Delete at the home only, as if the drop never reached the other group.
	if _, err := proposeOne(ctx, e, e.Home(wire.DefaultTenant, "orphan"), wire.KindDeleteQueue,
		(&wire.DeleteQueueCmd{Tenant: wire.DefaultTenant, Queue: "orphan"}).Encode(nil), wire.DecodeDeleteQueueResult); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := e.GroupStore(other).Catalog(wire.DefaultTenant, "orphan"); !ok {
		t.Fatal("the shard is already gone")
	}
	pushTo(ctx, t, e, "alive", "p", `1`)
	e.reconcile()
	if _, _, ok := e.GroupStore(other).Catalog(wire.DefaultTenant, "orphan"); ok {
		t.Fatal("the reconciler kept a deleted queue's shard")
	}
	if _, ok := e.PartitionNamed(wire.DefaultTenant, "alive", "p"); !ok {
		t.Fatal("the reconciler touched a live queue")
	}
}

// An HTTP transaction over groups commits everywhere, or, when one part is
// refused, nowhere.
func TestTransactionAcrossGroupsIsAllOrNothing(t *testing.T) {
	e, ctx := oneNodeThreeGroups(t)
	pushTo(ctx, t, e, "in", "p", `"a"`, `"b"`)
	pop, err := e.Pop(ctx, &wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "in", Partition: "p", Group: "g", Batch: 1,
		SubMode: wire.SubAll, LeaseIDs: []wire.ID{{1, 2, 3}}})
	if err != nil || len(pop.Claims) != 1 {
		t.Fatalf("pop: %v %+v", err, pop)
	}
	cl := pop.Claims[0]
	inGroup := wire.GroupOfID(cl.PartitionID)
	// An output partition in another group than the input's.
	var outPart string
	for i := 0; ; i++ {
		name := fmt.Sprintf("o%d", i)
		pushTo(ctx, t, e, "out", name, `0`)
		if d, _ := e.DirByName(wire.DefaultTenant, "out", name); int(d.Group) != inGroup {
			outPart = name
			break
		}
	}
	p, _ := e.PartitionByID(wire.DefaultTenant, cl.PartitionID)
	var txn0 string
	_ = p.Store().ReadRange(p, cl.From, cl.From+1, func(_ uint64, _ int64, body []byte) bool {
		r, _ := wire.ParseRecord(body)
		txn0 = r.MsgID.String()
		return false
	})
	ack := wire.AckCmd{Tenant: wire.DefaultTenant, Group: "g", Items: []wire.AckItem{{PartitionID: cl.PartitionID, TxnID: []byte(txn0), LeaseID: cl.LeaseID}}}
	push := func(v string) wire.TxnOp {
		rec := wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: wire.ID{0: 0xee, 15: v[0]}, Payload: []byte(v)})
		pc := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "out", Partition: outPart, PartitionIndex: -1, Flags: wire.PushIndexTxn, Count: 1, Records: rec}
		return wire.TxnOp{Kind: wire.TxnOpPush, Body: pc.Encode(nil)}
	}
	kv := func(expect uint64) wire.TxnOp {
		k := wire.KVCmd{Tenant: wire.DefaultTenant, Ops: []wire.KVOp{{Op: wire.KVPut, NS: "app", Key: []byte("k"), Value: []byte(`1`),
			HasExpect: true, Expect: expect, Required: true}}}
		return wire.TxnOp{Kind: wire.TxnOpKV, Body: k.Encode(nil)}
	}
	// Refused: the KV precondition fails, so neither the ack nor the push
	// happens, wherever they live.
	bad := wire.TxnCmd{Tenant: wire.DefaultTenant, ID: wire.ID{0: 1, 15: 1}, RequiredLeases: []wire.ID{cl.LeaseID},
		Ops: []wire.TxnOp{{Kind: wire.TxnOpAck, Body: ack.Encode(nil)}, push(`9`), kv(5)}}
	r, err := e.Transaction(ctx, &bad)
	if err != nil || r.Code == wire.CodeOK || r.FailedOp != 2 {
		t.Fatalf("refused transaction: %v %+v", err, r)
	}
	hwm := func() uint64 { q, _ := e.PartitionNamed(wire.DefaultTenant, "out", outPart); return q.HighWatermark() }
	if hwm() != 1 {
		t.Fatalf("a refused transaction pushed: hwm %d", hwm())
	}
	good := wire.TxnCmd{Tenant: wire.DefaultTenant, ID: wire.ID{0: 1, 15: 2}, RequiredLeases: []wire.ID{cl.LeaseID},
		Ops: []wire.TxnOp{{Kind: wire.TxnOpAck, Body: ack.Encode(nil)}, push(`7`), kv(0)}}
	r, err = e.Transaction(ctx, &good)
	if err != nil || r.Code != wire.CodeOK || len(r.Ops) != 3 {
		t.Fatalf("transaction: %v %+v", err, r)
	}
	if a, _ := wire.DecodeAckResult(r.Ops[0]); a.Items[0].Code != wire.CodeOK {
		t.Fatalf("ack result %+v", a)
	}
	if hwm() != 2 {
		t.Fatalf("pushed: hwm %d", hwm())
	}
	if it, ok, _ := e.KVStore(wire.DefaultTenant).KVGet(wire.DefaultTenant, "app", []byte("k")); !ok || it.Version == 0 {
		t.Fatalf("kv: %+v %v", it, ok)
	}
	next, _ := e.Pop(ctx, &wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "in", Partition: "p", Group: "g", Batch: 5,
		SubMode: wire.SubAll, LeaseIDs: []wire.ID{{4, 5, 6}}})
	if len(next.Claims) != 1 || next.Claims[0].From != 1 {
		t.Fatalf("after the committed ack: %+v", next)
	}
}

// A participant left prepared with no decision (its coordinator died
// before deciding) records an abort at the coordinator and lets go.
func TestInDoubtPartIsAbortedAfterItsDeadline(t *testing.T) {
	e, ctx := oneNodeThreeGroups(t)
	pushTo(ctx, t, e, "in", "p", `"a"`)
	pop, _ := e.Pop(ctx, &wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "in", Partition: "p", Group: "g", Batch: 1,
		SubMode: wire.SubAll, LeaseIDs: []wire.ID{{7, 7, 7}}})
	cl := pop.Claims[0]
	g := wire.GroupOfID(cl.PartitionID)
	coord := (g + 1) % 3
	xid := wire.ID{0: 1, 15: 9}
	part := wire.TxnCmd{Tenant: wire.DefaultTenant, ID: xid, RequiredLeases: []wire.ID{cl.LeaseID}}
	prep := wire.XPrepareCmd{ID: xid, Coord: uint16(coord), DeadlineMs: time.Now().UnixMilli() - 1,
		Sub: wire.Command{Kind: wire.KindTransaction, Body: part.Encode(nil)}}
	if _, err := e.Propose(ctx, g, wire.Command{Kind: wire.KindXPrepare, Body: prep.Encode(nil)}); err != nil {
		t.Fatal(err)
	}
	if len(e.GroupStore(g).PreparedParts()) != 1 {
		t.Fatal("not prepared")
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(e.GroupStore(g).PreparedParts()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the in-doubt part was never resolved")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d, ok := e.GroupStore(coord).XDecision(xid); !ok || d.Commit {
		t.Fatalf("decision at the coordinator: %+v %v", d, ok)
	}
	// A commit arriving now finds the abort.
	decide := wire.XDecideCmd{ID: xid, Commit: true}
	res, err := proposeOne(ctx, e, coord, wire.KindXDecide, decide.Encode(nil), wire.DecodeXDecideResult)
	if err != nil || res.Commit {
		t.Fatalf("late commit: %v %+v", err, res)
	}
}

func storageFilter(name string) storage.QueueFilter {
	return storage.QueueFilter{Name: name, Partitions: true}
}

// A Kafka transaction over partitions in several groups commits in every
// one of them (the coordinator's EndTxn is the decision), and an aborted one
// writes nothing anywhere.
func TestKafkaTransactionAcrossGroups(t *testing.T) {
	e, ctx := oneNodeThreeGroups(t)
	if r, err := e.CreateTopic(ctx, &wire.CreateTopicCmd{Tenant: wire.DefaultTenant, Name: "kt", Partitions: 3, ReqID: wire.ID{1}}); err != nil || r.Code != wire.CodeOK {
		t.Fatalf("create: %v %+v", err, r)
	}
	groups := map[int]bool{}
	for i := uint32(0); i < 3; i++ {
		p, ok := e.PartitionAt(wire.DefaultTenant, "kt", i)
		if !ok {
			t.Fatalf("partition %d missing in its group", i)
		}
		groups[wire.GroupOfID(p.ID)] = true
	}
	if len(groups) != 3 {
		t.Fatalf("3 partitions in groups %v", groups)
	}
	ini, err := e.InitProducer(ctx, &wire.InitProducerCmd{Tenant: wire.DefaultTenant, Transactional: true, TxnID: "tx", TimeoutMs: 60000, ReqID: wire.ID{2}})
	if err != nil || ini.Code != wire.CodeOK {
		t.Fatalf("init: %v %+v", err, ini)
	}
	run := func(seq uint64, commit bool, base int32) {
		var mask uint64
		for i := uint32(0); i < 3; i++ {
			d, _ := e.DirByIndex(wire.DefaultTenant, "kt", i)
			mask |= 1 << d.Group
		}
		b, err := e.TxnBegin(ctx, &wire.TxnBeginCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, Groups: mask})
		if err != nil || b.Code != wire.CodeOK || b.TxnSeq != seq {
			t.Fatalf("begin: %v %+v", err, b)
		}
		info, _ := e.KafkaTxn(wire.DefaultTenant, "tx")
		coord := e.CoordinatorGroup(wire.DefaultTenant, 't', "tx")
		var bodies []KafkaBody
		for i := uint32(0); i < 3; i++ {
			d, _ := e.DirByIndex(wire.DefaultTenant, "kt", i)
			cat, _ := e.Catalog(wire.DefaultTenant, "kt")
			rec := wire.AppendRecord(nil, &wire.Record{MsgID: wire.ID{0: 0xab, 1: byte(seq), 15: byte(i)}, Payload: []byte(fmt.Sprint(seq))})
			st := wire.KafkaStageCmd{XID: storage.KafkaTxnXID(info), Coord: uint16(coord), DeadlineMs: KafkaStageDeadline(info), TxnID: "tx",
				Produce: wire.KafkaProduceCmd{ProducerID: ini.ProducerID, Epoch: ini.Epoch, BaseSeq: base, StateTTLMs: 60000,
					Push: wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "kt", PartitionIndex: int32(i), Inc: cat.Inc, Count: 1, Records: rec}}}
			bodies = append(bodies, KafkaBody{Group: int(d.Group), Kind: wire.KindKafkaStage, Body: st.Encode(nil)})
		}
		wait, err := e.KafkaProduce(bodies)
		if err != nil {
			t.Fatal(err)
		}
		res, err := wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Code != wire.CodeOK {
				t.Fatalf("stage %d: %+v", i, r)
			}
		}
		for i := uint32(0); i < 3; i++ {
			p, _ := e.PartitionAt(wire.DefaultTenant, "kt", i)
			if hwm := p.HighWatermark(); p.Store().Txns(p, 0, hwm).LastStable != hwm-1 {
				t.Fatalf("partition %d: the open transaction's record is not held back by the last stable offset", i)
			}
		}
		end := wire.TxnEndCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, TxnSeq: seq, Commit: commit}
		r, err := e.TxnEnd(ctx, &end)
		if err != nil || r.Code != wire.CodeOK {
			t.Fatalf("end (commit %v): %v %+v", commit, err, r)
		}
	}
	run(1, false, 0)
	run(2, true, 1)
	for i := uint32(0); i < 3; i++ {
		// The aborted record and its marker, the committed one and its.
		p, _ := e.PartitionAt(wire.DefaultTenant, "kt", i)
		v := p.Store().Txns(p, 0, p.HighWatermark())
		if p.HighWatermark() != 4 || v.LastStable != 4 || len(v.Aborted) != 1 || v.Aborted[0].First != 0 || v.Aborted[0].Last != 1 {
			t.Fatalf("partition %d holds %d offsets, %+v", i, p.HighWatermark(), v)
		}
		st, ok := p.Store().KafkaProducer(p, ini.ProducerID)
		if !ok || st.LastSeq != 1 {
			t.Fatalf("partition %d producer state %+v %v: both transactions' batches recorded", i, st, ok)
		}
	}
	info, _ := e.KafkaTxn(wire.DefaultTenant, "tx")
	if info.Ongoing || !info.LastCommitted || info.TxnSeq != 2 {
		t.Fatalf("coordinator state %+v", info)
	}
}

// The stores' caches and the runtime's limit share a node's budget: more
// groups get smaller caches, within their bounds, and the runtime keeps
// at least a quarter.
func TestStoreMemoryShareTheBudget(t *testing.T) {
	for _, c := range []struct {
		budget                   int64
		groups                   int
		cache, memtable, goLimit int64
	}{
		{0, 2, 64 << 20, 64 << 20, 0},
		{1 << 30, 2, 64 << 20, 64 << 20, 720 << 20},
		{1 << 30, 16, 8 << 20, 8 << 20, 720 << 20},
		{256 << 20, 16, 8 << 20, 4 << 20, 64 << 20},
		{8 << 30, 2, 64 << 20, 64 << 20, 8<<30 - 256<<20 - 48<<20},
	} {
		cache, memtable := StoreMemory(c.budget, c.groups)
		goLimit := GoMemoryLimit(c.budget, c.groups)
		if cache != c.cache || int64(memtable) != c.memtable || goLimit != c.goLimit {
			t.Errorf("budget %d MiB, %d groups: cache %d, memtable %d, go limit %d MiB; want %d, %d, %d MiB",
				c.budget>>20, c.groups, cache>>20, memtable>>20, goLimit>>20, c.cache>>20, c.memtable>>20, c.goLimit>>20)
		}
	}
}

// A partition removed as idle outside its queue's home: a push that finds
// it through the home's directory before the reconciler has dropped the
// entry is refused as gone by the shard, and the engine allocates the name
// again (a new index) and delivers; the reconciler then settles the drop.
func TestPushToARemovedPartitionAllocatesItAgain(t *testing.T) {
	e, ctx := oneNodeThreeGroups(t)
	const queue = "churn"
	home := e.Home(wire.DefaultTenant, queue)
	var name string
	var d wire.DirEntry
	for i := 0; ; i++ {
		name = fmt.Sprintf("c%d", i)
		r, err := e.resolve(ctx, allocReq{tenant: wire.DefaultTenant, queue: queue, names: []string{name}, create: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.ensureShards(ctx, r); err != nil {
			t.Fatal(err)
		}
		if d = r.parts[0]; int(d.Group) != home {
			break
		}
	}
	g := int(d.Group)
	tick := wire.TickCmd{PartitionCleanupMs: 1}
	for {
		if _, ok := e.GroupStore(g).PartitionByIndex(wire.DefaultTenant, queue, d.Index); !ok {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the idle partition was never removed")
		}
		if _, err := e.Propose(ctx, g, wire.Command{Kind: wire.KindTick, Body: tick.Encode(nil)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := e.DirByIndex(wire.DefaultTenant, queue, d.Index); !ok {
		t.Log("the reconciler dropped the entry first: the push below takes the plain path")
	}
	out := pushTo(ctx, t, e, queue, name, `1`)
	if out[0].PartitionIndex == d.Index || out[0].BaseOffset != 0 {
		t.Fatalf("pushed to index %d offset %d; the removed one was %d", out[0].PartitionIndex, out[0].BaseOffset, d.Index)
	}
	if _, ok := e.DirByIndex(wire.DefaultTenant, queue, d.Index); ok {
		t.Fatal("the home still lists the removed partition")
	}
	if p, ok := e.PartitionNamed(wire.DefaultTenant, queue, name); !ok || p.HighWatermark() != 1 {
		t.Fatalf("the name's new partition: %+v %v", p, ok)
	}
	e.reconcile()
	if got := e.GroupStore(g).PendingDrops(wire.DefaultTenant, queue); len(got) != 0 {
		t.Fatalf("drops still owed after a reconcile: %v", got)
	}
}
