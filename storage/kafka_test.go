package storage

import (
	"fmt"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// kafkaRecords returns n stored Kafka records with fresh message ids.
func (h *harness) kafkaRecords(n int) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		recs = wire.AppendRecord(recs, &wire.Record{Flags: wire.FlagKey | wire.FlagTimestamp, MsgID: h.nextID(),
			Key: []byte("k"), Timestamp: int64(i), Payload: []byte(fmt.Sprintf("v%d", i))})
	}
	return recs
}

func (h *harness) produceCmd(topic string, index int32, producer int64, epoch int16, seq int32, n int) wire.KafkaProduceCmd {
	h.allocTopic(topic, 2)
	return wire.KafkaProduceCmd{ProducerID: producer, Epoch: epoch, BaseSeq: seq, StateTTLMs: 60000,
		Push: wire.PushCmd{Tenant: wire.DefaultTenant, Queue: topic, PartitionIndex: index, Count: n, Records: h.kafkaRecords(n)}}
}

func (h *harness) produce(c wire.KafkaProduceCmd) wire.KafkaProduceResult {
	h.t.Helper()
	r, err := wire.DecodeKafkaProduceResult(h.apply(wire.KindKafkaProduce, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) code(kind wire.Kind, body []byte) wire.Code {
	h.t.Helper()
	c, _ := wire.ResultCode(h.apply(kind, body))
	return c
}

func TestKafkaProduceAppendsByIndex(t *testing.T) {
	h := newHarness(t)
	c := wire.KafkaProduceCmd{ProducerID: wire.NoProducer, Push: wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "orders",
		PartitionIndex: 1, Count: 1, Records: h.kafkaRecords(1)}}
	if r := h.produce(c); r.Code != wire.CodeQueueNotFound {
		t.Fatalf("a produce never creates its topic: %+v", r)
	}
	r := h.produce(h.produceCmd("orders", 1, wire.NoProducer, 0, 0, 3))
	if r.Code != wire.CodeOK || r.BaseOffset != 0 {
		t.Fatalf("%+v", r)
	}
	r = h.produce(h.produceCmd("orders", 1, wire.NoProducer, 0, 0, 2))
	if r.Code != wire.CodeOK || r.BaseOffset != 3 {
		t.Fatalf("%+v", r)
	}
	if r := h.produce(h.produceCmd("orders", 2, wire.NoProducer, 0, 0, 1)); r.Code != wire.CodePartitionNotFound {
		t.Fatalf("%+v", r)
	}
	topic, ok := h.s.KafkaTopic(wire.DefaultTenant, "orders")
	if !ok || !topic.Kafka || topic.Partitions != 2 {
		t.Fatalf("%+v", topic)
	}
	p, _ := h.s.PartitionByIndex(wire.DefaultTenant, "orders", 1)
	var bases []uint64
	if _, err := h.s.ReadChunks(p, 4, func(c *StoredChunk) bool {
		bases = append(bases, c.Base)
		return true
	}); err != nil || fmt.Sprint(bases) != "[3]" {
		t.Fatalf("%v %v", err, bases)
	}
}

func TestKafkaIdempotentSequences(t *testing.T) {
	h := newHarness(t)
	const pid = 42
	first := h.produceCmd("t", 0, pid, 0, 0, 5)
	if r := h.produce(first); r.Code != wire.CodeOK || r.BaseOffset != 0 {
		t.Fatalf("%+v", r)
	}
	// The same batch again (a client retry, a new leader): the original offset.
	if r := h.produce(first); r.Code != wire.CodeDuplicate || r.BaseOffset != 0 {
		t.Fatalf("duplicate: %+v", r)
	}
	if r := h.produce(h.produceCmd("t", 0, pid, 0, 5, 2)); r.Code != wire.CodeOK || r.BaseOffset != 5 {
		t.Fatalf("%+v", r)
	}
	// A batch past the next sequence: an earlier batch of the producer is
	// still on its way (a proposal retried across a leadership change lands
	// after a later one). Refused retriably, nothing stored; once the
	// missing batch lands the later one is accepted in order.
	if r := h.produce(h.produceCmd("t", 0, pid, 0, 9, 1)); r.Code != wire.CodeSequenceAhead {
		t.Fatalf("gap: %+v", r)
	}
	// A sequence behind what is remembered can never become valid.
	if r := h.produce(h.produceCmd("t", 0, pid, 0, 3, 1)); r.Code != wire.CodeOutOfOrder {
		t.Fatalf("behind: %+v", r)
	}
	if r := h.produce(h.produceCmd("t", 0, 43, 0, 3, 1)); r.Code != wire.CodeUnknownProducer || r.LogStart != 0 {
		t.Fatalf("unknown producer mid-stream: %+v", r)
	}
	// A bumped epoch starts again at 0 and fences the old one.
	if r := h.produce(h.produceCmd("t", 0, pid, 1, 0, 1)); r.Code != wire.CodeOK || r.BaseOffset != 7 {
		t.Fatalf("new epoch: %+v", r)
	}
	if r := h.produce(h.produceCmd("t", 0, pid, 0, 7, 1)); r.Code != wire.CodeFenced {
		t.Fatalf("old epoch: %+v", r)
	}
	// The state is durable: after a reopen the duplicate is still known.
	h.s.Close()
	h.open()
	again := h.produceCmd("t", 0, pid, 1, 0, 1)
	if r := h.produce(again); r.Code != wire.CodeDuplicate || r.BaseOffset != 7 {
		t.Fatalf("after reopen: %+v", r)
	}
	// Past the state's TTL the producer is forgotten and swept.
	h.now += 61000
	if r := h.produce(h.produceCmd("t", 0, pid, 1, 1, 1)); r.Code != wire.CodeUnknownProducer {
		t.Fatalf("expired: %+v", r)
	}
	if !h.s.TickDue(h.now) {
		t.Fatal("sweep not due")
	}
	h.apply(wire.KindTick, nil)
	p, _ := h.s.PartitionByIndex(wire.DefaultTenant, "t", 0)
	if _, ok := h.s.KafkaProducer(p, pid); ok || h.s.TickDue(h.now) {
		t.Fatal("expired state not swept")
	}
}

// Batches of one producer applied out of order, as when the proposals of a
// pipelining client are retried across a leadership change: the later
// batch is refused retriably, changes nothing, and is accepted once its
// predecessor has landed, with the offsets of the producer's order.
func TestKafkaSequenceAheadThenInOrder(t *testing.T) {
	h := newHarness(t)
	const pid = 7
	if r := h.produce(h.produceCmd("t", 0, pid, 0, 0, 2)); r.Code != wire.CodeOK {
		t.Fatalf("%+v", r)
	}
	later := h.produceCmd("t", 0, pid, 0, 3, 1)
	if r := h.produce(later); r.Code != wire.CodeSequenceAhead {
		t.Fatalf("ahead: %+v", r)
	}
	if r := h.produce(h.produceCmd("t", 0, pid, 0, 2, 1)); r.Code != wire.CodeOK || r.BaseOffset != 2 {
		t.Fatalf("the missing batch: %+v", r)
	}
	if r := h.produce(later); r.Code != wire.CodeOK || r.BaseOffset != 3 {
		t.Fatalf("the later batch after its predecessor: %+v", r)
	}
	// A new epoch must still start at 0.
	if r := h.produce(h.produceCmd("t", 0, pid, 1, 4, 1)); r.Code != wire.CodeOutOfOrder {
		t.Fatalf("new epoch past 0: %+v", r)
	}
}

func TestKafkaRetriedProposalNotStoredTwice(t *testing.T) {
	h := newHarness(t)
	c := h.produceCmd("t", 0, wire.NoProducer, 0, 0, 3)
	entry := wire.AppendEntry(nil, h.now, []wire.Command{{Kind: wire.KindKafkaProduce, Body: c.Encode(nil)}})
	h.applyEntry(entry)
	h.produce(h.produceCmd("t", 0, wire.NoProducer, 0, 0, 1)) // someone else's batch in between
	r, err := wire.DecodeKafkaProduceResult(h.applyEntry(wire.MarkRetry(entry)))
	if err != nil || r.Code != wire.CodeDuplicate || r.BaseOffset != 0 {
		t.Fatalf("%v %+v", err, r)
	}
	p, _ := h.s.PartitionByIndex(wire.DefaultTenant, "t", 0)
	if p.HighWatermark() != 4 {
		t.Fatalf("hwm %d", p.HighWatermark())
	}
}

func TestKafkaTopicAdmin(t *testing.T) {
	h := newHarness(t)
	create := wire.CreateTopicCmd{Tenant: wire.DefaultTenant, Name: "t", Partitions: 3, ReqID: wire.ID{1}, Place: testPlace,
		Configs: []wire.ConfigEntry{{Name: "retention.ms", Value: "60000"}, {Name: "cleanup.policy", Value: "delete"}}}
	if c := h.code(wire.KindKafkaCreateTopic, create.Encode(nil)); c != wire.CodeOK {
		t.Fatal(c)
	}
	if c := h.code(wire.KindKafkaCreateTopic, create.Encode(nil)); c != wire.CodeOK {
		t.Fatalf("same request again: %v", c)
	}
	create.ReqID = wire.ID{2}
	if c := h.code(wire.KindKafkaCreateTopic, create.Encode(nil)); c != wire.CodeExists {
		t.Fatal(c)
	}
	q, _ := h.s.Queue(wire.DefaultTenant, "t")
	if !q.Kafka || q.Partitions != 3 || !q.Config.RetentionEnabled || q.Config.RetentionSec != 60 || h.s.timed[q.ID] == nil {
		t.Fatalf("%+v", q)
	}
	cfg := wire.TopicConfigCmd{Tenant: wire.DefaultTenant, Name: "t", Ops: []wire.ConfigOp{{Op: wire.ConfigDelete, Name: "retention.ms"}}}
	if c := h.code(wire.KindKafkaTopicConfig, cfg.Encode(nil)); c != wire.CodeOK {
		t.Fatal(c)
	}
	configs, kafka, _ := h.s.TopicConfigs(wire.DefaultTenant, "t")
	if q, _ := h.s.Queue(wire.DefaultTenant, "t"); q.Config.RetentionEnabled || h.s.timed[q.ID] != nil || !kafka || len(configs) != 1 || configs[0].Name != "cleanup.policy" {
		t.Fatalf("%+v %+v", q, configs)
	}
	cfg.Ops = []wire.ConfigOp{{Op: wire.ConfigSet, Name: "retention.ms", Value: "x"}}
	if c := h.code(wire.KindKafkaTopicConfig, cfg.Encode(nil)); c != wire.CodeBadRequest {
		t.Fatal(c)
	}
	// A queue created over HTTP refuses Kafka config changes.
	h.push("http", "p", `1`)
	cfg.Name, cfg.Ops = "http", []wire.ConfigOp{{Op: wire.ConfigSet, Name: "retention.ms", Value: "1"}}
	if c := h.code(wire.KindKafkaTopicConfig, cfg.Encode(nil)); c != wire.CodeConflict {
		t.Fatal(c)
	}
	grow := wire.CreatePartitionsCmd{Tenant: wire.DefaultTenant, Name: "t", Count: 5}
	if c := h.code(wire.KindKafkaCreatePartitions, grow.Encode(nil)); c != wire.CodeOK {
		t.Fatal(c)
	}
	if c := h.code(wire.KindKafkaCreatePartitions, grow.Encode(nil)); c != wire.CodeInvalidPartitions {
		t.Fatal(c)
	}
	retry := wire.MarkRetry(wire.AppendEntry(nil, h.now, []wire.Command{{Kind: wire.KindKafkaCreatePartitions, Body: grow.Encode(nil)}}))
	if c, _ := wire.ResultCode(h.applyEntry(retry)); c != wire.CodeOK {
		t.Fatalf("retried grow: %v", c)
	}
	if p, ok := h.s.PartitionByIndex(wire.DefaultTenant, "t", 4); !ok || p.Name != "4" {
		t.Fatalf("%+v", p)
	}
	h.produce(h.produceCmd("t", 4, 9, 0, 0, 1))
	del := wire.DeleteTopicCmd{Tenant: wire.DefaultTenant, Name: "t"}
	if c := h.code(wire.KindKafkaDeleteTopic, del.Encode(nil)); c != wire.CodeOK {
		t.Fatal(c)
	}
	if c := h.code(wire.KindKafkaDeleteTopic, del.Encode(nil)); c != wire.CodeQueueNotFound {
		t.Fatal(c)
	}
	if len(h.s.kafka.producers) != 0 || len(h.s.kafka.topics) != 0 {
		t.Fatalf("bookkeeping left: %v %v", h.s.kafka.producers, h.s.kafka.topics)
	}
	reg := wire.RegisterNodeCmd{NodeID: 3, KafkaAddr: "h:1"}
	h.apply(wire.KindKafkaRegisterNode, reg.Encode(nil))
	h.s.Close()
	h.open()
	if n := h.s.KafkaNodes(); len(n) != 1 || n[0].KafkaAddr != "h:1" {
		t.Fatalf("%+v", n)
	}
}

func (h *harness) initProducer(txnID string, req byte) wire.InitProducerResult {
	h.t.Helper()
	c := wire.InitProducerCmd{Tenant: wire.DefaultTenant, Transactional: txnID != "", TxnID: txnID, TimeoutMs: 1000, ReqID: wire.ID{req}}
	r, err := wire.DecodeInitProducerResult(h.apply(wire.KindKafkaInitProducer, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) kafkaTxn(kind wire.Kind, body []byte) wire.KafkaTxnResult {
	h.t.Helper()
	r, err := wire.DecodeKafkaTxnResult(h.apply(kind, body))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) stage(xid wire.ID, c wire.KafkaStageCmd) wire.KafkaProduceResult {
	h.t.Helper()
	c.XID, c.Coord, c.DeadlineMs = xid, 0, h.now+60000
	r, err := wire.DecodeKafkaProduceResult(h.apply(wire.KindKafkaStage, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// end decides a Kafka transaction at this coordinator and resolves the
// part staged here, as the engine's TxnEnd does.
func (h *harness) end(xid wire.ID, c wire.TxnEndCmd) (wire.KafkaTxnResult, bool) {
	h.t.Helper()
	d := wire.XDecideCmd{ID: xid, Commit: c.Commit, Participants: []uint16{0}, Own: wire.Command{Kind: wire.KindKafkaTxnEnd, Body: c.Encode(nil)}}
	dr, err := wire.DecodeXDecideResult(h.apply(wire.KindXDecide, d.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	r, _ := wire.DecodeKafkaTxnResult(dr.Own)
	res := wire.XResolveCmd{ID: xid, Commit: dr.Commit}
	h.apply(wire.KindXResolve, res.Encode(nil))
	if info, _ := h.s.KafkaTxn(wire.DefaultTenant, c.TxnID); !info.Unsettled.IsZero() {
		h.settle(c.TxnID)
	}
	return r, dr.Commit
}

func TestKafkaTransactions(t *testing.T) {
	h := newHarness(t)
	if a, b := h.initProducer("", 1), h.initProducer("", 2); a.ProducerID == b.ProducerID {
		t.Fatal("idempotent producers share an id")
	}
	ini := h.initProducer("tx", 3)
	if again := h.initProducer("tx", 3); again != ini {
		t.Fatalf("retried init bumped: %+v %+v", ini, again)
	}
	h.produce(h.produceCmd("t", 0, wire.NoProducer, 0, 0, 4))
	begin := wire.TxnBeginCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, Groups: 1}
	b := h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil))
	if b.Code != wire.CodeOK || b.TxnSeq != 1 || h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil)).TxnSeq != 1 {
		t.Fatalf("%+v", b)
	}
	if info, _ := h.s.KafkaTxn(wire.DefaultTenant, "tx"); info.Groups != 1 || !info.Ongoing {
		t.Fatalf("state %+v", info)
	}
	batch := func(seq int32, n int) wire.KafkaStageCmd {
		c := h.produceCmd("t", 1, ini.ProducerID, ini.Epoch, seq, n)
		return wire.KafkaStageCmd{TxnID: "tx", Produce: c}
	}
	x1 := wire.ID{0: 1, 15: 1}
	for _, c := range []wire.KafkaStageCmd{batch(0, 2), batch(2, 1)} {
		if r := h.stage(x1, c); r.Code != wire.CodeOK {
			t.Fatalf("stage: %+v", r)
		}
	}
	if r := h.stage(x1, batch(2, 1)); r.Code != wire.CodeDuplicate {
		t.Fatalf("a retried batch: %+v", r)
	}
	if r := h.stage(x1, wire.KafkaStageCmd{TxnID: "tx", Produce: wire.KafkaProduceCmd{Push: wire.PushCmd{Tenant: wire.DefaultTenant}},
		Offsets: []wire.TxnOffset{{Group: "g", Queue: "t", PartitionIndex: 0, Offset: 2}}}); r.Code != wire.CodeOK {
		t.Fatalf("stage offsets: %+v", r)
	}
	// The batches are in the log at their offsets, held back from readers
	// by the last stable offset until the transaction ends.
	p1, _ := h.s.PartitionByIndex(wire.DefaultTenant, "t", 1)
	popP1 := func() []wire.Claim {
		return h.popWith(wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "t", Group: "g2", Partition: p1.Name, Batch: 100,
			SubMode: wire.SubAll, CommitOnDelivery: true}).Claims
	}
	if v := h.s.Txns(p1, 0, p1.HighWatermark()); p1.HighWatermark() != 3 || v.LastStable != 0 || len(popP1()) != 0 {
		t.Fatalf("open transaction: hwm %d, %+v", p1.HighWatermark(), v)
	}
	end := wire.TxnEndCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, TxnSeq: 1, Commit: true}
	if r, committed := h.end(x1, end); r.Code != wire.CodeOK || !committed {
		t.Fatalf("commit: %+v %v", r, committed)
	}
	if r, committed := h.end(x1, end); r.Code != wire.CodeOK || !committed {
		t.Fatalf("retried commit: %+v %v", r, committed)
	}
	// The commit appended its marker, once.
	if v := h.s.Txns(p1, 0, p1.HighWatermark()); p1.HighWatermark() != 4 || v.LastStable != 4 || len(v.Aborted) != 0 {
		t.Fatalf("committed: hwm %d, %+v", p1.HighWatermark(), v)
	}
	if st, ok := h.s.KafkaProducer(p1, ini.ProducerID); !ok || st.LastSeq != 2 || len(st.Batches) != 2 || st.Batches[1][2] != 2 {
		t.Fatalf("%+v", st)
	}
	if p0 := h.s.queues[queueKeyT{wire.DefaultTenant, "t"}].parts[0]; p0.cursors.get("g") == nil || p0.cursors.get("g").pos != 2 {
		t.Fatal("offset not committed")
	}
	// An HTTP consumer gets the records, never the marker.
	if got := popP1(); len(got) != 1 || got[0].From != 0 || got[0].To != 3 || len(popP1()) != 0 {
		t.Fatalf("pops after the commit: %+v", got)
	}
	if r := h.stage(x1, batch(3, 1)); r.Code != wire.CodeConflict {
		t.Fatalf("a piece staged after the end: %+v", r)
	}
	// An abort leaves its batches in the log, listed as aborted and never
	// popped; the producer's sequence has moved past them.
	b = h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil))
	x2 := wire.ID{0: 1, 15: 2}
	if r := h.stage(x2, batch(3, 2)); r.Code != wire.CodeOK || r.BaseOffset != 4 {
		t.Fatalf("stage: %+v", r)
	}
	abort := end
	abort.Commit, abort.TxnSeq = false, b.TxnSeq
	if r, committed := h.end(x2, abort); r.Code != wire.CodeOK || committed {
		t.Fatalf("abort: %+v %v", r, committed)
	}
	v := h.s.Txns(p1, 0, p1.HighWatermark())
	if p1.HighWatermark() != 7 || v.LastStable != 7 || fmt.Sprint(v.Aborted) != fmt.Sprintf("[{%d 4 6}]", ini.ProducerID) ||
		fmt.Sprint(v.Skips) != "[{3 4} {4 6} {6 7}]" {
		t.Fatalf("aborted: hwm %d, %+v", p1.HighWatermark(), v)
	}
	if got := popP1(); len(got) != 0 {
		t.Fatalf("an aborted transaction popped: %+v", got)
	}
	if st, _ := h.s.KafkaProducer(p1, ini.ProducerID); st.LastSeq != 4 {
		t.Fatalf("sequence not moved past the aborted batches: %+v", st)
	}
	// A new init fences the old epoch: its commit is an abort.
	b = h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil))
	next := h.initProducer("tx", 4)
	if next.Epoch != ini.Epoch+1 || next.ProducerID != ini.ProducerID {
		t.Fatalf("%+v", next)
	}
	x3 := wire.ID{0: 1, 15: 3}
	if r := h.stage(x3, batch(5, 1)); r.Code != wire.CodeOK {
		t.Fatalf("stage: %+v", r) // the partition knows nothing of the new epoch yet
	}
	end.TxnSeq = b.TxnSeq
	if r, committed := h.end(x3, end); r.Code != wire.CodeFenced || committed {
		t.Fatalf("zombie commit: %+v %v", r, committed)
	}
	if v := h.s.Txns(p1, 0, p1.HighWatermark()); p1.HighWatermark() != 9 || len(v.Aborted) != 2 || len(popP1()) != 0 {
		t.Fatalf("a fenced commit: hwm %d, %+v", p1.HighWatermark(), v)
	}
	if info, _ := h.s.KafkaTxn(wire.DefaultTenant, "tx"); info.Ongoing {
		t.Fatal("init left the transaction open")
	}
	// A participant that gave up waiting decided abort first: the late
	// commit is an abort, and the state says so.
	begin.Epoch = next.Epoch
	b = h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil))
	x4 := wire.ID{0: 1, 15: 4}
	gaveUp := wire.XDecideCmd{ID: x4}
	h.apply(wire.KindXDecide, gaveUp.Encode(nil))
	end.Epoch, end.TxnSeq = next.Epoch, b.TxnSeq
	if _, committed := h.end(x4, end); committed {
		t.Fatal("a commit after a recorded abort")
	}
	if info, _ := h.s.KafkaTxn(wire.DefaultTenant, "tx"); info.Ongoing || info.LastCommitted {
		t.Fatalf("state after the late commit: %+v", info)
	}
	if len(h.s.KafkaOpenTxns()) != 0 {
		t.Fatal("transaction left open")
	}
}

func TestOffsetForTime(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 10; i++ {
		h.produce(h.produceCmd("t", 0, wire.NoProducer, 0, 0, 2)) // offsets 2i, 2i+1 at now+100i
		h.now += 100
	}
	p, _ := h.s.PartitionByIndex(wire.DefaultTenant, "t", 0)
	start := h.now - 1000
	for _, c := range []struct {
		ms    int64
		want  uint64
		found bool
	}{{0, 0, true}, {start, 0, true}, {start + 1, 2, true}, {start + 450, 10, true}, {start + 900, 18, true}, {start + 901, 20, false}} {
		off, _, found, err := h.s.OffsetForTime(p, c.ms)
		if err != nil || off != c.want || found != c.found {
			t.Fatalf("ms %d: got %d %v %v, want %d %v", c.ms, off, found, err, c.want, c.found)
		}
	}
}

// FuzzApplyKafka feeds mutated Kafka commands to one store: the apply loop
// answers every one and never fails or panics.
func FuzzApplyKafka(f *testing.F) {
	h := &harness{now: 1}
	rec := wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagKey, MsgID: wire.ID{1}, Key: []byte("k"), Payload: []byte("v")})
	alloc := wire.AllocCmd{Tenant: wire.DefaultTenant, Queue: "t", Flags: wire.AllocCreate | wire.AllocKafka, Place: testPlace, Count: 1}
	prod := wire.KafkaProduceCmd{ProducerID: 1, StateTTLMs: 1000, Push: wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "t",
		Count: 1, Records: rec}}
	end := wire.TxnEndCmd{Tenant: wire.DefaultTenant, TxnID: "x", ProducerID: 1, TxnSeq: 1, Commit: true}
	stage := wire.KafkaStageCmd{XID: wire.ID{9}, TxnID: "x", Produce: prod, Offsets: []wire.TxnOffset{{Group: "g", Queue: "t"}}}
	decide := wire.XDecideCmd{ID: wire.ID{9}, Commit: true, Participants: []uint16{0}, Own: wire.Command{Kind: wire.KindKafkaTxnEnd, Body: end.Encode(nil)}}
	resolve := wire.XResolveCmd{ID: wire.ID{9}, Commit: true}
	ini := wire.InitProducerCmd{Tenant: wire.DefaultTenant, Transactional: true, TxnID: "x"}
	begin := wire.TxnBeginCmd{Tenant: wire.DefaultTenant, TxnID: "x", ProducerID: 1}
	cfg := wire.TopicConfigCmd{Tenant: wire.DefaultTenant, Name: "t", Ops: []wire.ConfigOp{{Name: "retention.ms", Value: "1"}}}
	clean := wire.LogCleanCmd{Tenant: wire.DefaultTenant, PartitionID: 1, StartAt: 1, Drop: []wire.OffsetRange{{From: 0, To: 1}}}
	f.Add(wire.AppendEntry(nil, h.now, []wire.Command{{Kind: wire.KindAlloc, Body: alloc.Encode(nil)}, {Kind: wire.KindKafkaProduce, Body: prod.Encode(nil)},
		{Kind: wire.KindKafkaInitProducer, Body: ini.Encode(nil)}, {Kind: wire.KindKafkaTxnBegin, Body: begin.Encode(nil)},
		{Kind: wire.KindKafkaStage, Body: stage.Encode(nil)}, {Kind: wire.KindXDecide, Body: decide.Encode(nil)},
		{Kind: wire.KindXResolve, Body: resolve.Encode(nil)}, {Kind: wire.KindKafkaTxnEnd, Body: end.Encode(nil)},
		{Kind: wire.KindKafkaTopicConfig, Body: cfg.Encode(nil)}, {Kind: wire.KindKafkaLogClean, Body: clean.Encode(nil)}}))
	// A transaction aborted after its batch was appended, then popped over
	// HTTP past its marker.
	abort := wire.XResolveCmd{ID: wire.ID{9}}
	pop := wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "t", Group: "g", Batch: 5, SubMode: wire.SubAll, CommitOnDelivery: true}
	f.Add(wire.AppendEntry(nil, h.now, []wire.Command{{Kind: wire.KindAlloc, Body: alloc.Encode(nil)},
		{Kind: wire.KindKafkaStage, Body: stage.Encode(nil)}, {Kind: wire.KindXResolve, Body: abort.Encode(nil)},
		{Kind: wire.KindPop, Body: pop.Encode(nil)}, {Kind: wire.KindPop, Body: pop.Encode(nil)}}))
	fuzzApply(f)
}

// A partition's transactions (open, aborted, skipped offsets) are kept
// across a reopen and a snapshot.
func TestKafkaPartitionTransactionsPersist(t *testing.T) {
	h := newHarness(t)
	ini := h.initProducer("tx", 1)
	begin := wire.TxnBeginCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, Groups: 1}
	stage := func(xid wire.ID, seq int32) {
		h.kafkaTxn(wire.KindKafkaTxnBegin, begin.Encode(nil))
		c := wire.KafkaStageCmd{TxnID: "tx", Produce: h.produceCmd("t", 0, ini.ProducerID, ini.Epoch, seq, 2)}
		if r := h.stage(xid, c); r.Code != wire.CodeOK {
			t.Fatalf("stage: %+v", r)
		}
	}
	stage(wire.ID{15: 1}, 0)
	info, _ := h.s.KafkaTxn(wire.DefaultTenant, "tx")
	h.end(wire.ID{15: 1}, wire.TxnEndCmd{Tenant: wire.DefaultTenant, TxnID: "tx", ProducerID: ini.ProducerID, Epoch: ini.Epoch, TxnSeq: info.TxnSeq})
	stage(wire.ID{15: 2}, 2) // left open
	p, _ := h.s.PartitionByIndex(wire.DefaultTenant, "t", 0)
	want := fmt.Sprintf("%+v", h.s.Txns(p, 0, p.HighWatermark()))
	if want != fmt.Sprintf("{LastStable:3 Aborted:[{ProducerID:%d First:0 Last:2}] Skips:[{From:0 To:2} {From:2 To:3}]}", ini.ProducerID) {
		t.Fatal(want)
	}
	h.s.Close()
	h.open()
	p, _ = h.s.PartitionByIndex(wire.DefaultTenant, "t", 0)
	if got := fmt.Sprintf("%+v", h.s.Txns(p, 0, p.HighWatermark())); got != want {
		t.Fatalf("after a reopen %s, want %s", got, want)
	}
	other := newHarness(t)
	h.snapshotTo(other)
	p, _ = other.s.PartitionByIndex(wire.DefaultTenant, "t", 0)
	if got := fmt.Sprintf("%+v", other.s.Txns(p, 0, p.HighWatermark())); got != want {
		t.Fatalf("after a snapshot %s, want %s", got, want)
	}
}
