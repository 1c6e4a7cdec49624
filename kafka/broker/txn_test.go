package broker

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/wire"
)

func createTopic(t *testing.T, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, -1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// noStagedParts fails unless every raft group of e has resolved every
// piece staged in it: a transaction that ended leaves nothing behind.
func noStagedParts(t *testing.T, e *raftgroups.Engine) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		left := 0
		for _, st := range e.Stores() {
			left += len(st.PreparedParts())
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d staged parts left unresolved", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// consumeValues reads a topic from the start at an isolation level until
// want records arrived, and returns their values, sorted.
func consumeValues(t *testing.T, n *testNode, topic string, level kgo.IsolationLevel, want int) []string {
	t.Helper()
	cons := n.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
	var out []string
	for _, r := range consume(t, cons, want) {
		out = append(out, string(r.Value))
	}
	sort.Strings(out)
	return out
}

func TestTransactionCommittedAndAborted(t *testing.T) {
	n := startNode(t, nil)
	admin := n.client()
	const parts = 3
	createTopic(t, admin, "tx", parts)
	if g := raftGroupsOf(t, n.engine, "tx", parts); distinct(g) != parts {
		t.Fatalf("partitions in raft groups %v: the transaction would not cross every group", g)
	}
	prod := n.client(kgo.TransactionalID("txp"), kgo.DefaultProduceTopic("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := ctxFor(t)
	const perTxn = 12
	produce := func(prefix string, commit kgo.TransactionEndTry) {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < perTxn; i++ {
			r := &kgo.Record{Partition: int32(i % parts), Value: []byte(fmt.Sprintf("%s-%02d", prefix, i))}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := prod.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
		noStagedParts(t, n.engine)
	}
	produce("committed", kgo.TryCommit)
	produce("aborted", kgo.TryAbort)
	produce("again", kgo.TryCommit)
	var want []string
	for _, prefix := range []string{"committed", "again"} {
		for i := 0; i < perTxn; i++ {
			want = append(want, fmt.Sprintf("%s-%02d", prefix, i))
		}
	}
	sort.Strings(want)
	// Every transaction reached every partition, so every raft group: its
	// records and its marker.
	for i := uint32(0); i < parts; i++ {
		if h := hwm(n, "tx", i); h != 3*(perTxn/parts+1) {
			t.Fatalf("partition %d holds %d offsets, want %d", i, h, 3*(perTxn/parts+1))
		}
	}
	if got := consumeValues(t, n, "tx", kgo.ReadCommitted(), len(want)); !slices.Equal(got, want) {
		t.Fatalf("read_committed consumed %v\nwant %v", got, want)
	}
	// read_uncommitted sees the aborted records too, as from Kafka.
	for i := 0; i < perTxn; i++ {
		want = append(want, fmt.Sprintf("aborted-%02d", i))
	}
	sort.Strings(want)
	if got := consumeValues(t, n, "tx", kgo.ReadUncommitted(), len(want)); !slices.Equal(got, want) {
		t.Fatalf("read_uncommitted consumed %v\nwant %v", got, want)
	}
}

// lastStable is a partition's last stable offset on node n.
func lastStable(n *testNode, topic string, index uint32) uint64 {
	p, _ := n.engine.PartitionAt(wire.DefaultTenant, topic, index)
	hwm := p.HighWatermark()
	return p.Store().Txns(p, hwm, hwm).LastStable
}

// txnClient drives the transaction APIs by hand.
type txnClient struct {
	t     *testing.T
	cl    *kgo.Client
	id    string
	pid   int64
	epoch int16
	seqs  map[string]int32 // the next sequence, by "topic/partition"
}

func (x *txnClient) init(timeoutMs int32) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(x.id), timeoutMs
	resp, err := req.RequestWith(ctxFor(x.t), x.cl)
	if err != nil || resp.ErrorCode != 0 {
		x.t.Fatalf("init: %v %d", err, resp.ErrorCode)
	}
	x.pid, x.epoch, x.seqs = resp.ProducerID, resp.ProducerEpoch, map[string]int32{}
}

func (x *txnClient) addPartition(topic string, p int32) int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = x.id, x.pid, x.epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{p}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxFor(x.t), x.cl)
	if err != nil {
		x.t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func (x *txnClient) addOffsets(group string) int16 {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = x.id, x.pid, x.epoch, group
	resp, err := req.RequestWith(ctxFor(x.t), x.cl)
	if err != nil {
		x.t.Fatal(err)
	}
	return resp.ErrorCode
}

// commitOffsets sends a TxnOffsetCommit of topic's offsets, by partition,
// and returns each partition's answer.
func (x *txnClient) commitOffsets(group, topic string, offsets map[int32]int64) map[int32]int16 {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = x.id, group, x.pid, x.epoch
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	for p, off := range offsets {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, off
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxFor(x.t), x.cl)
	if err != nil {
		x.t.Fatal(err)
	}
	out := map[int32]int16{}
	for _, p := range resp.Topics[0].Partitions {
		out[p.Partition] = p.ErrorCode
	}
	return out
}

func (x *txnClient) produce(topic string, values ...string) int16 {
	return x.produceTo(topic, 0, values...)
}

// produceTo sends one transactional batch of values to a partition and
// returns its answer; the partition's sequence moves on when it is taken.
func (x *txnClient) produceTo(topic string, partition int32, values ...string) int16 {
	var recs []records.Record
	for i, v := range values {
		recs = append(recs, records.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	key := fmt.Sprintf("%s/%d", topic, partition)
	opts := records.NewBatchOptions(0)
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = x.pid, x.epoch, x.seqs[key], true
	batch, err := records.AppendBatch(nil, opts, recs)
	if err != nil {
		x.t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis, req.TransactionID = -1, 5000, kmsg.StringPtr(x.id)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxFor(x.t), x.cl)
	if err != nil {
		x.t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return p.ErrorCode
	}
	if p.BaseOffset < 0 {
		x.t.Fatalf("a transactional batch answered offset %d", p.BaseOffset)
	}
	x.seqs[key] += int32(len(values))
	return 0
}

func (x *txnClient) end(commit bool) int16 {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = x.id, x.pid, x.epoch, commit
	resp, err := req.RequestWith(ctxFor(x.t), x.cl)
	if err != nil {
		x.t.Fatal(err)
	}
	return resp.ErrorCode
}

func TestTransactionProtocolEdges(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client()
	createTopic(t, cl, "edges", 2)
	if g := raftGroupsOf(t, n.engine, "edges", 2); g[0] == g[1] {
		t.Fatalf("both partitions in raft group %d", g[0])
	}
	x := &txnClient{t: t, cl: cl, id: "edge"}
	x.init(60000)
	if x.addPartition("nope", 0) != kerr.UnknownTopicOrPartition.Code {
		t.Fatal("added a partition of an unknown topic")
	}
	if code := x.produce("edges", "a"); code != kerr.InvalidTxnState.Code {
		t.Fatalf("produce without a transaction: %d", code)
	}
	if code := x.addPartition("edges", 0); code != 0 {
		t.Fatal(code)
	}
	// Partition 1 lives in a raft group the transaction did not add.
	if code := x.produceTo("edges", 1, "x"); code != kerr.InvalidTxnState.Code {
		t.Fatalf("produce to a partition not added: %d", code)
	}
	if x.produce("edges", "a", "b") != 0 || x.produce("edges", "c") != 0 {
		t.Fatal("staging refused")
	}
	// A retried batch is staged once; a batch past a gap is refused
	// retriably (an earlier one may still be on its way).
	x.seqs["edges/0"] = 0
	if code := x.produce("edges", "a", "b"); code != 0 {
		t.Fatalf("retried batch: %d", code)
	}
	x.seqs["edges/0"] = 9
	if code := x.produce("edges", "z"); code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("gap: %d", code)
	}
	if hwm(n, "edges", 0) != 3 || lastStable(n, "edges", 0) != 0 {
		t.Fatal("an open transaction's records are not held back by the last stable offset")
	}
	if code := x.end(true); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if hwm(n, "edges", 0) != 4 || lastStable(n, "edges", 0) != 4 {
		t.Fatalf("hwm %d after commit, want 3 records and the marker", hwm(n, "edges", 0))
	}
	if code := x.end(true); code != 0 {
		t.Fatalf("retried commit: %d", code)
	}
	if code := x.end(false); code != kerr.InvalidTxnState.Code {
		t.Fatalf("abort after commit: %d", code)
	}
	noStagedParts(t, n.engine)

	// An abort marks its batches aborted, in every group; the producer's
	// sequences move past them, as in Kafka's log.
	x.seqs["edges/0"] = 3
	if x.addPartition("edges", 0) != 0 || x.addPartition("edges", 1) != 0 ||
		x.produce("edges", "dropped") != 0 || x.produceTo("edges", 1, "dropped") != 0 {
		t.Fatal("second transaction")
	}
	if code := x.end(false); code != 0 {
		t.Fatalf("abort: %d", code)
	}
	if code := x.end(false); code != 0 {
		t.Fatalf("retried abort: %d", code)
	}
	if code := x.end(true); code != kerr.InvalidTxnState.Code {
		t.Fatalf("commit after abort: %d", code)
	}
	if hwm(n, "edges", 0) != 6 || hwm(n, "edges", 1) != 2 || lastStable(n, "edges", 0) != 6 || lastStable(n, "edges", 1) != 2 {
		t.Fatal("an aborted transaction's records and markers are not in the log")
	}
	noStagedParts(t, n.engine)
	if x.addPartition("edges", 0) != 0 || x.produce("edges", "d") != 0 || x.end(true) != 0 {
		t.Fatal("a transaction after the abort")
	}
	if hwm(n, "edges", 0) != 8 {
		t.Fatalf("hwm %d after the third transaction, want 8", hwm(n, "edges", 0))
	}

	// A zombie with the old epoch is fenced, and an unknown producer id is
	// no transaction's.
	zombie := *x
	x.init(60000)
	if code := zombie.addPartition("edges", 0); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("zombie add: %d", code)
	}
	if x.addPartition("edges", 0) != 0 {
		t.Fatal("add after the fence")
	}
	zombie.seqs = map[string]int32{}
	if code := zombie.produce("edges", "zombie"); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("zombie produce: %d", code)
	}
	stranger := *x
	stranger.pid++
	if code := stranger.end(true); code != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("end by another producer id: %d", code)
	}
}

// TestTransactionSurvivesItsCoordinator checks that no broker holds any of
// a transaction: one begun and staged through a broker is carried on and
// committed through another on the same engine (as after a change of
// coordinator leader).
func TestTransactionSurvivesItsCoordinator(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client()
	createTopic(t, cl, "durable", 2)
	x := &txnClient{t: t, cl: cl, id: "durable"}
	x.init(60000)
	if x.addPartition("durable", 0) != 0 || x.produce("durable", "a", "b") != 0 ||
		x.addOffsets("g") != 0 || x.commitOffsets("g", "durable", map[int32]int64{0: 0})[0] != 0 {
		t.Fatal("staging through the first broker")
	}
	if err := n.broker.Close(); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	b, err := New(Config{Listener: kafka.Config{Addr: addr}, NodeID: 1, AdvertisedAddr: addr, LogDir: "/data"}, n.engine, quiet)
	if err == nil {
		err = b.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	n.broker, n.addr = b, addr
	x.cl = n.client()
	if x.addPartition("durable", 1) != 0 || x.produce("durable", "c") != 0 || x.produceTo("durable", 1, "d") != 0 {
		t.Fatal("staging through the second broker")
	}
	if code := x.end(true); code != 0 {
		t.Fatalf("commit through the second broker: %d", code)
	}
	if h0, h1 := hwm(n, "durable", 0), hwm(n, "durable", 1); h0 != 4 || h1 != 2 {
		t.Fatalf("partitions hold %d and %d offsets, want 3 and 1 records and a marker each", h0, h1)
	}
	p, _ := n.engine.PartitionAt(wire.DefaultTenant, "durable", 0)
	if pos, ok := p.Store().GroupPosition(p, "g"); !ok || pos != 0 {
		t.Fatalf("group position %d %v", pos, ok)
	}
	noStagedParts(t, n.engine)
}

func TestTransactionTimeoutAborts(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client()
	createTopic(t, cl, "slow", 1)
	x := &txnClient{t: t, cl: cl, id: "slow"}
	x.init(1000)
	if x.addPartition("slow", 0) != 0 || x.produce("slow", "v") != 0 {
		t.Fatal("staging")
	}
	n.broker.reapTxnsOnce(n.engine.NowMs())
	if info, _ := n.engine.KafkaTxn(wire.DefaultTenant, "slow"); !info.Ongoing {
		t.Fatal("aborted before its timeout")
	}
	n.broker.reapTxnsOnce(n.engine.NowMs() + 2000)
	if info, _ := n.engine.KafkaTxn(wire.DefaultTenant, "slow"); info.Ongoing || info.Epoch != x.epoch+1 {
		t.Fatalf("not aborted and fenced: %+v", info)
	}
	if code := x.end(true); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("commit after the timeout: %d", code)
	}
	if hwm(n, "slow", 0) != 2 || lastStable(n, "slow", 0) != 2 {
		t.Fatal("the timed-out transaction was not marked aborted")
	}
	noStagedParts(t, n.engine)
}

func TestTxnOffsetCommitIsPartOfTheCommit(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "in", 2)
	if g := raftGroupsOf(t, n.engine, "in", 2); g[0] == g[1] {
		t.Fatalf("both partitions in raft group %d", g[0])
	}
	for i := 0; i < 6; i++ {
		if err := cl.ProduceSync(ctxFor(t), &kgo.Record{Topic: "in", Partition: int32(i % 2), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	position := func(partition uint32) (uint64, bool) {
		p, _ := n.engine.PartitionAt(wire.DefaultTenant, "in", partition)
		return p.Store().GroupPosition(p, "g")
	}
	x := &txnClient{t: t, cl: cl, id: "eos"}
	x.init(60000)
	if code := x.commitOffsets("g", "in", map[int32]int64{0: 1})[0]; code != kerr.InvalidTxnState.Code {
		t.Fatalf("offsets without a transaction: %d", code)
	}
	if code := x.addOffsets("g"); code != 0 {
		t.Fatal(code)
	}
	if codes := x.commitOffsets("g", "in", map[int32]int64{0: 1, 1: 2}); codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("staging offsets: %v", codes)
	}
	if _, ok := position(0); ok {
		t.Fatal("a staged offset is visible before the commit")
	}
	if code := x.end(true); code != 0 {
		t.Fatal(code)
	}
	for i, want := range []uint64{1, 2} {
		if pos, ok := position(uint32(i)); !ok || pos != want {
			t.Fatalf("partition %d: group position %d %v, want %d", i, pos, ok, want)
		}
	}
	// Offsets of an aborted transaction are never applied.
	if x.addOffsets("g") != 0 {
		t.Fatal("second transaction")
	}
	if codes := x.commitOffsets("g", "in", map[int32]int64{0: 3, 1: 3}); codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("staging offsets: %v", codes)
	}
	if code := x.end(false); code != 0 {
		t.Fatal(code)
	}
	for i, want := range []uint64{1, 2} {
		if pos, ok := position(uint32(i)); !ok || pos != want {
			t.Fatalf("partition %d after the abort: group position %d %v, want %d", i, pos, ok, want)
		}
	}
	noStagedParts(t, n.engine)
}

func TestIdempotentRetryGetsTheOriginalOffset(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client()
	createTopic(t, cl, "idem", 1)
	init := kmsg.NewPtrInitProducerIDRequest()
	ir, err := init.RequestWith(ctxFor(t), cl)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatal(err, ir.ErrorCode)
	}
	batch := func(seq int32, values ...string) []byte {
		var recs []records.Record
		for i, v := range values {
			recs = append(recs, records.Record{OffsetDelta: int32(i), Value: []byte(v)})
		}
		opts := records.NewBatchOptions(0)
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = ir.ProducerID, ir.ProducerEpoch, seq
		b, err := records.AppendBatch(nil, opts, recs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := batch(0, "a", "b")
	for _, c := range []struct {
		data []byte
		code int16
		off  int64
	}{
		{first, 0, 0}, {batch(2, "c"), 0, 2}, {first, 0, 0}, {batch(5, "x"), kerr.NotEnoughReplicas.Code, -1},
		{batch(1, "y"), kerr.OutOfOrderSequenceNumber.Code, -1}, // behind, never a remembered batch
	} {
		p := rawProduce(t, cl, "idem", c.data, -1)
		if p.ErrorCode != c.code || (c.code == 0 && p.BaseOffset != c.off) {
			t.Fatalf("got %d@%d, want %d@%d", p.ErrorCode, p.BaseOffset, c.code, c.off)
		}
	}
	if hwm(n, "idem", 0) != 3 {
		t.Fatal("a duplicate was stored")
	}
}

// The timeout reaper reads the cluster's clock, which stamped the
// transaction's start, not the node's wall clock: on a node whose clock
// reads an hour behind its wall clock, a transaction that just began is
// not aborted (issue 32, finding 5: it compared time.Now() with BeganMs).
func TestTheTxnReaperReadsTheClusterClock(t *testing.T) {
	h, e := raftgroupstest.StartWith(t, func(c *raftgroups.Config) { c.ClockTestOffset = -time.Hour })
	n := serveBroker(t, h, e, nil)
	cl := n.client()
	createTopic(t, cl, "skew", 1)
	x := &txnClient{t: t, cl: cl, id: "skew"}
	x.init(60_000)
	if x.addPartition("skew", 0) != 0 || x.produce("skew", "v") != 0 {
		t.Fatal("staging")
	}
	n.broker.reapNow()
	if info, _ := n.engine.KafkaTxn(wire.DefaultTenant, "skew"); !info.Ongoing {
		t.Fatalf("a transaction that began now was aborted by the reaper: %+v", info)
	}
	if code := x.end(true); code != 0 {
		t.Fatalf("commit: %d", code)
	}
}
