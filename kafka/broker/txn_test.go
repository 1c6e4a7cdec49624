package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka/records"
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

func TestTransactionCommittedAndAborted(t *testing.T) {
	n := startNode(t, nil)
	admin := n.client()
	createTopic(t, admin, "tx", 2)
	prod := n.client(kgo.TransactionalID("txp"), kgo.DefaultProduceTopic("tx"))
	ctx := ctxFor(t)
	produce := func(prefix string, commit kgo.TransactionEndTry) {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10; i++ {
			r := &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := prod.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	produce("committed", kgo.TryCommit)
	produce("aborted", kgo.TryAbort)
	produce("again", kgo.TryCommit)
	for _, level := range []kgo.IsolationLevel{kgo.ReadCommitted(), kgo.ReadUncommitted()} {
		cons := n.client(kgo.ConsumeTopics("tx"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
		got := consume(t, cons, 20)
		for _, r := range got {
			if v := string(r.Value); v[:3] == "abo" {
				t.Fatalf("aborted record %s consumed", v)
			}
		}
	}
	// Nothing more than the 20 committed records is in the log, over the
	// two partitions' raft groups.
	if g := raftGroupsOf(t, n.engine, "tx", 2); g[0] == g[1] {
		t.Fatalf("both partitions in raft group %d: the commit crossed no groups", g[0])
	}
	if total := hwm(n, "tx", 0) + hwm(n, "tx", 1); total != 20 {
		t.Fatalf("%d records stored, want 20", total)
	}
	if n.broker.txns.bytes != 0 {
		t.Fatalf("%d staged bytes left", n.broker.txns.bytes)
	}
}

// txnClient drives the transaction APIs by hand.
type txnClient struct {
	t      *testing.T
	cl     *kgo.Client
	id     string
	pid    int64
	epoch  int16
	nextSq int32
}

func (x *txnClient) init(timeoutMs int32) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(x.id), timeoutMs
	resp, err := req.RequestWith(ctxFor(x.t), x.cl)
	if err != nil || resp.ErrorCode != 0 {
		x.t.Fatalf("init: %v %d", err, resp.ErrorCode)
	}
	x.pid, x.epoch, x.nextSq = resp.ProducerID, resp.ProducerEpoch, 0
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

func (x *txnClient) produce(topic string, values ...string) int16 {
	var recs []records.Record
	for i, v := range values {
		recs = append(recs, records.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	opts := records.NewBatchOptions(0)
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = x.pid, x.epoch, x.nextSq, true
	batch, err := records.AppendBatch(nil, opts, recs)
	if err != nil {
		x.t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis, req.TransactionID = -1, 5000, kmsg.StringPtr(x.id)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxFor(x.t), x.cl)
	if err != nil {
		x.t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		return code
	}
	x.nextSq += int32(len(values))
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
	createTopic(t, cl, "edges", 1)
	x := &txnClient{t: t, cl: cl, id: "edge"}
	x.init(60000)
	// Producing to a partition not added to the transaction is refused.
	if x.addPartition("nope", 0) != kerr.UnknownTopicOrPartition.Code {
		t.Fatal("added a partition of an unknown topic")
	}
	if code := x.produce("edges", "a"); code != kerr.InvalidTxnState.Code {
		t.Fatalf("produce without a transaction: %d", code)
	}
	if code := x.addPartition("edges", 0); code != 0 {
		t.Fatal(code)
	}
	if x.produce("edges", "a", "b") != 0 || x.produce("edges", "c") != 0 {
		t.Fatal("staging refused")
	}
	// A retried batch is staged once; a gap is refused.
	x.nextSq = 0
	if code := x.produce("edges", "a", "b"); code != 0 {
		t.Fatalf("retried batch: %d", code)
	}
	x.nextSq = 9
	if code := x.produce("edges", "z"); code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap: %d", code)
	}
	if hwm(n, "edges", 0) != 0 {
		t.Fatal("staged records reached the log before the commit")
	}
	if code := x.end(true); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if hwm(n, "edges", 0) != 3 {
		t.Fatalf("hwm %d after commit, want 3", hwm(n, "edges", 0))
	}
	if code := x.end(true); code != 0 {
		t.Fatalf("retried commit: %d", code)
	}
	if code := x.end(false); code != kerr.InvalidTxnState.Code {
		t.Fatalf("abort after commit: %d", code)
	}

	// Staged records lost (as with a leader change): the commit fails, the
	// producer is fenced, nothing is written, and a re-init recovers.
	x.nextSq = 3
	if x.addPartition("edges", 0) != 0 || x.produce("edges", "lost") != 0 {
		t.Fatal("second transaction")
	}
	n.broker.txns.dropKey(txnKey{wire.DefaultTenant, "edge"})
	if code := x.end(true); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("commit of a lost transaction: %d", code)
	}
	if hwm(n, "edges", 0) != 3 {
		t.Fatal("a lost transaction wrote records")
	}
	old := x.epoch
	x.init(60000)
	if x.epoch <= old+1 {
		t.Fatalf("epoch %d after the fence at %d", x.epoch, old+1)
	}

	// A zombie with the old epoch is fenced.
	zombie := *x
	x.init(60000)
	if code := zombie.addPartition("edges", 0); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("zombie add: %d", code)
	}
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
	n.broker.txns.reapOnce(time.Now().Add(2 * time.Second))
	if info, _ := n.engine.KafkaTxn(wire.DefaultTenant, "slow"); info.Ongoing || info.Epoch != x.epoch+1 {
		t.Fatalf("not aborted and fenced: %+v", info)
	}
	if code := x.end(true); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("commit after the timeout: %d", code)
	}
	if hwm(n, "slow", 0) != 0 {
		t.Fatal("timed-out transaction wrote records")
	}
}

func TestTxnOffsetCommitIsPartOfTheCommit(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client()
	createTopic(t, cl, "in", 1)
	x := &txnClient{t: t, cl: cl, id: "eos"}
	x.init(60000)
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "eos", x.pid, x.epoch, "g"
	if resp, err := add.RequestWith(ctxFor(t), cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("%v %+v", err, resp)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = "eos", "g", x.pid, x.epoch
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "in"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 0
	rt.Partitions = append(rt.Partitions, rp)
	commit.Topics = append(commit.Topics, rt)
	resp, err := commit.RequestWith(ctxFor(t), cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("%v %+v", err, resp)
	}
	if code := x.end(true); code != 0 {
		t.Fatal(code)
	}
	p, _ := n.engine.PartitionAt(wire.DefaultTenant, "in", 0)
	if pos, ok := p.Store().GroupPosition(p, "g"); !ok || pos != 0 {
		t.Fatalf("group position %d %v", pos, ok)
	}
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
		{first, 0, 0}, {batch(2, "c"), 0, 2}, {first, 0, 0}, {batch(5, "x"), kerr.OutOfOrderSequenceNumber.Code, -1},
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
