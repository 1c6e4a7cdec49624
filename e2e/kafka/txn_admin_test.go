package kafka

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// The admin APIs operators find hanging transactions with (KIP-664:
// DescribeProducers, DescribeTransactions, ListTransactions), driven by
// kadm against three real nodes, each answer compared with what the
// producing clients know and with what Kafka answers.

// txnAdminTimeout is the transaction timeout the transactional producer
// asks for: long enough that a busy machine never sees the coordinator
// abort the open transaction under the test.
const txnAdminTimeout = 2 * time.Minute

// nodeAt is the harness node whose Kafka listener is host:port.
func nodeAt(t *testing.T, c *harness.Cluster, host string, port int32) *harness.Node {
	t.Helper()
	addr := host + ":" + strconv.Itoa(int(port))
	for _, n := range c.Nodes {
		if n.KafkaAddr == addr {
			return n
		}
	}
	t.Fatalf("no node listens on %s", addr)
	return nil
}

// producerView is a described producer as the test compares it: what a
// client knows of itself and where its open transaction starts.
type producerView struct {
	epoch    int16
	lastSeq  int32
	txnStart int64
}

// describedProducers is each partition's producers through kadm (which
// asks each partition's leader), every partition answered without error.
func describedProducers(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, partitions ...int32) map[int32]map[int64]producerView {
	t.Helper()
	set := kadm.TopicsSet{}
	set.Add(topic, partitions...)
	described, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		t.Fatalf("describe producers: %v", err)
	}
	out := map[int32]map[int64]producerView{}
	for _, p := range described[topic].Partitions {
		if p.Err != nil {
			t.Fatalf("describe producers of %s/%d: %v", topic, p.Partition, p.Err)
		}
		out[p.Partition] = map[int64]producerView{}
		for id, ap := range p.ActiveProducers {
			if ap.LastTimestamp <= 0 {
				t.Fatalf("%s/%d: producer %d appended at %d", topic, p.Partition, id, ap.LastTimestamp)
			}
			out[p.Partition][id] = producerView{ap.ProducerEpoch, ap.LastSequence, ap.CurrentTxnStartOffset}
		}
	}
	return out
}

// describedTxn is one transactional id described through kadm.
func describedTxn(ctx context.Context, t *testing.T, adm *kadm.Client, id string) kadm.DescribedTransaction {
	t.Helper()
	described, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	d, ok := described[id]
	if !ok || d.Err != nil {
		t.Fatalf("describe %s: %+v", id, d)
	}
	return d
}

// listedStates is the state of id in kadm's ListTransactions with the
// given filters ("" when not listed).
func listedState(ctx context.Context, t *testing.T, adm *kadm.Client, id string, producerIDs []int64, states ...string) string {
	t.Helper()
	listed, err := adm.ListTransactions(ctx, producerIDs, states)
	if err != nil {
		t.Fatalf("list transactions (producers %v, states %v): %v", producerIDs, states, err)
	}
	return listed[id].State
}

// partitionsOf is a described transaction's partitions as "topic/p".
func partitionsOf(d kadm.DescribedTransaction) []string {
	var out []string
	for _, tp := range d.Topics.Sorted() {
		for _, p := range tp.Partitions {
			out = append(out, fmt.Sprintf("%s/%d", tp.Topic, p))
		}
	}
	return out
}

// An idempotent and a transactional producer write to a topic of three
// nodes. DescribeProducers shows each on the partitions it wrote, with the
// id, epoch and last sequence its client knows, and the open
// transaction's first offset; ListTransactions shows the transactional id
// Ongoing, then CompleteCommit and CompleteAbort, through its state,
// producer id and duration filters, and an id never used Empty;
// DescribeTransactions shows state, producer id and epoch, timeout and the
// open transaction's partitions.
// Asked directly, a node that does not coordinate the id answers
// NOT_COORDINATOR (and does not list it), one that does not lead a
// partition NOT_LEADER_OR_FOLLOWER, as Kafka's brokers do, while kadm,
// seeded with such a node, finds the right one.
func TestKafkaAdminTransactionsAndProducers(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 4*time.Minute)
	const topic, txnID, idleID = "txa", "txa-writer", "txa-idle"
	seedAll := e2etest.KgoClient(t, c)
	e2etest.WaitBrokers(ctx, t, seedAll, 3)
	adm := adminOf(seedAll)
	createTopics(ctx, t, adm, 2, topic)

	// The idempotent producer: five records in partition 0, sequences 0-4.
	idem := e2etest.KgoClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 5 {
		if err := idem.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(fmt.Sprint("idem-", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	idemID, idemEpoch, err := idem.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The transactional producer: three records in partition 0 and two in
	// partition 1 in an open transaction.
	txn := e2etest.KgoClient(t, c, kgo.TransactionalID(txnID), kgo.TransactionTimeout(txnAdminTimeout),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	firstIn := map[int32]int64{}
	for i, p := range []int32{0, 0, 0, 1, 1} {
		r := &kgo.Record{Partition: p, Value: []byte(fmt.Sprint("txn-", i))}
		if err := txn.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if _, ok := firstIn[p]; !ok {
			firstIn[p] = r.Offset
		}
	}
	if firstIn[0] != 5 || firstIn[1] != 0 {
		t.Fatalf("the transaction's first offsets %v, want 5 in partition 0 after the idempotent records", firstIn)
	}
	txnPID, txnEpoch, err := txn.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if txnPID == idemID {
		t.Fatalf("both producers have id %d", txnPID)
	}

	// DescribeProducers, each partition answered by its leader.
	got := describedProducers(ctx, t, adm, topic, 0, 1)
	want := map[int32]map[int64]producerView{
		0: {idemID: {idemEpoch, 4, -1}, txnPID: {txnEpoch, 2, firstIn[0]}},
		1: {txnPID: {txnEpoch, 1, firstIn[1]}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("producers while the transaction is open:\n got %v\nwant %v (idempotent %d, transactional %d)", got, want, idemID, txnPID)
	}

	// DescribeTransactions and ListTransactions while it is open. The
	// coordinator learns the partitions from AddPartitionsToTxn, which
	// franz-go sends before the records: they are listed at once, but
	// polled all the same (a busy machine may answer a moment late).
	wantParts := []string{topic + "/0", topic + "/1"}
	var d kadm.DescribedTransaction
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		d = describedTxn(ctx, t, adm, txnID)
		return slices.Equal(partitionsOf(d), wantParts), nil
	}); err != nil {
		t.Fatalf("the open transaction's partitions: %+v: %v", d, err)
	}
	if d.State != "Ongoing" || d.ProducerID != txnPID || d.ProducerEpoch != txnEpoch ||
		d.TimeoutMillis != int32(txnAdminTimeout.Milliseconds()) || d.StartTimestamp <= 0 || d.StartTimestamp > time.Now().UnixMilli() {
		t.Fatalf("described open: %+v (producer %d epoch %d, began about %d)", d, txnPID, txnEpoch, began.UnixMilli())
	}
	for _, tc := range []struct {
		producers []int64
		states    []string
		want      string
	}{
		{nil, nil, "Ongoing"},
		{[]int64{txnPID}, []string{"Ongoing"}, "Ongoing"},
		{nil, []string{"Ongoing", "Empty"}, "Ongoing"},
		{nil, []string{"CompleteCommit", "CompleteAbort", "Empty"}, ""},
		{[]int64{idemID}, nil, ""}, // an idempotent producer has no transactional id
	} {
		if s := listedState(ctx, t, adm, txnID, tc.producers, tc.states...); s != tc.want {
			t.Fatalf("listed with producers %v states %v as %q, want %q", tc.producers, tc.states, s, tc.want)
		}
	}

	// A transactional id initialized and never used is Empty, as in
	// Kafka: its producer, no start, no partitions; a filter on Empty
	// lists it and not the open one.
	idle := e2etest.KgoClient(t, c, kgo.TransactionalID(idleID), kgo.TransactionTimeout(txnAdminTimeout))
	idlePID, idleEpoch, err := idle.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := describedTxn(ctx, t, adm, idleID); d.State != "Empty" || d.ProducerID != idlePID || d.ProducerEpoch != idleEpoch ||
		d.StartTimestamp != -1 || len(d.Topics) != 0 || d.TimeoutMillis != int32(txnAdminTimeout.Milliseconds()) {
		t.Fatalf("described idle: %+v (producer %d epoch %d)", d, idlePID, idleEpoch)
	}
	listed, err := adm.ListTransactions(ctx, nil, []string{"Empty"})
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := listed[idleID]; !ok || l.State != "Empty" || l.ProducerID != idlePID || listed[txnID].State != "" {
		t.Fatalf("listed with the Empty filter: %+v", listed)
	}

	// Asked of each node directly, as Kafka's brokers answer.
	coords := adm.FindTxnCoordinators(ctx, txnID)
	co, ok := coords[txnID]
	if !ok || co.Err != nil {
		t.Fatalf("find coordinator: %+v", coords)
	}
	coord := nodeAt(t, c, co.Host, co.Port)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	leaderOf := map[int32]*harness.Node{}
	for _, p := range md.Topics[topic].Partitions {
		for _, b := range md.Brokers {
			if b.NodeID == p.Leader {
				leaderOf[p.Partition] = nodeAt(t, c, b.Host, b.Port)
			}
		}
	}
	if len(leaderOf) != 2 {
		t.Fatalf("partition leaders %v of %+v", leaderOf, md)
	}
	var other *harness.Node
	for _, n := range c.Nodes {
		cl := e2etest.KafkaClient(t, n)
		dreq := kmsg.NewPtrDescribeTransactionsRequest()
		dreq.TransactionalIDs = []string{txnID}
		dr := e2etest.KafkaRequest[*kmsg.DescribeTransactionsResponse](ctx, t, cl, dreq)
		lr := e2etest.KafkaRequest[*kmsg.ListTransactionsResponse](ctx, t, cl, kmsg.NewPtrListTransactionsRequest())
		lists := slices.ContainsFunc(lr.TransactionStates, func(s kmsg.ListTransactionsResponseTransactionState) bool {
			return s.TransactionalID == txnID
		})
		if n == coord {
			if st := dr.TransactionStates[0]; st.ErrorCode != 0 || st.State != "Ongoing" || st.ProducerID != txnPID {
				t.Fatalf("the coordinator %s describes %+v", n.KafkaAddr, st)
			}
			if lr.ErrorCode != 0 || !lists {
				t.Fatalf("the coordinator %s lists %+v", n.KafkaAddr, lr)
			}
		} else {
			other = n
			if st := dr.TransactionStates[0]; st.ErrorCode != kerr.NotCoordinator.Code || st.TransactionalID != txnID {
				t.Fatalf("%s, not the coordinator, describes %+v, want NOT_COORDINATOR", n.KafkaAddr, st)
			}
			if lr.ErrorCode != 0 || lists {
				t.Fatalf("%s, not the coordinator, lists %+v", n.KafkaAddr, lr)
			}
		}
		preq := kmsg.NewPtrDescribeProducersRequest()
		preq.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: topic, Partitions: []int32{0, 1}}}
		pr := e2etest.KafkaRequest[*kmsg.DescribeProducersResponse](ctx, t, cl, preq)
		for _, rp := range pr.Topics[0].Partitions {
			wantCode := kerr.NotLeaderForPartition.Code
			if leaderOf[rp.Partition] == n {
				wantCode = 0
			}
			if rp.ErrorCode != wantCode {
				t.Fatalf("%s describes the producers of %s/%d (led by %s): %+v", n.KafkaAddr, topic, rp.Partition, leaderOf[rp.Partition].KafkaAddr, rp)
			}
		}
	}
	// kadm seeded with a node that is not the coordinator finds it.
	if d := describedTxn(ctx, t, adminOf(e2etest.KafkaClient(t, other)), txnID); d.State != "Ongoing" || d.ProducerID != txnPID {
		t.Fatalf("described through %s: %+v", other.KafkaAddr, d)
	}
	// The coordinator's filters Kafka has beyond kadm's: unknown state
	// names are answered back and match nothing; v1's duration keeps only
	// transactions open longer than it.
	coordCl := e2etest.KafkaClient(t, coord)
	lreq := kmsg.NewPtrListTransactionsRequest()
	lreq.StateFilters = []string{"NoSuchState"}
	if lr := e2etest.KafkaRequest[*kmsg.ListTransactionsResponse](ctx, t, coordCl, lreq); lr.ErrorCode != 0 ||
		!slices.Equal(lr.UnknownStateFilters, []string{"NoSuchState"}) || len(lr.TransactionStates) != 0 {
		t.Fatalf("an unknown state filter: %+v", lr)
	}
	for _, tc := range []struct {
		duration int64
		listed   bool
	}{{0, true}, {time.Hour.Milliseconds(), false}} {
		lreq := kmsg.NewPtrListTransactionsRequest()
		lreq.DurationFilterMillis = tc.duration
		lr := e2etest.KafkaRequest[*kmsg.ListTransactionsResponse](ctx, t, coordCl, lreq)
		if lists := slices.ContainsFunc(lr.TransactionStates, func(s kmsg.ListTransactionsResponseTransactionState) bool {
			return s.TransactionalID == txnID
		}); lr.ErrorCode != 0 || lists != tc.listed {
			t.Fatalf("open longer than %d ms: %+v", tc.duration, lr)
		}
	}

	// Committed: CompleteCommit once every partition has its marker, no
	// partitions left, the same producer; the producers' open
	// transactions end, their last sequences stay.
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		d = describedTxn(ctx, t, adm, txnID)
		return d.State == "CompleteCommit", nil
	}); err != nil {
		t.Fatalf("the commit described: %+v: %v", d, err)
	}
	if len(d.Topics) != 0 || d.ProducerID != txnPID || d.ProducerEpoch != txnEpoch || d.TimeoutMillis != int32(txnAdminTimeout.Milliseconds()) {
		t.Fatalf("described committed: %+v", d)
	}
	if s := listedState(ctx, t, adm, txnID, []int64{txnPID}, "CompleteCommit"); s != "CompleteCommit" {
		t.Fatalf("listed committed as %q", s)
	}
	if s := listedState(ctx, t, adm, txnID, nil, "Ongoing"); s != "" {
		t.Fatalf("listed as Ongoing after the commit: %q", s)
	}
	want = map[int32]map[int64]producerView{
		0: {idemID: {idemEpoch, 4, -1}, txnPID: {txnEpoch, 2, -1}},
		1: {txnPID: {txnEpoch, 1, -1}},
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		got = describedProducers(ctx, t, adm, topic, 0, 1)
		return fmt.Sprint(got) == fmt.Sprint(want), nil
	}); err != nil {
		t.Fatalf("producers after the commit:\n got %v\nwant %v: %v", got, want, err)
	}

	// Aborted: one more record in partition 1, then CompleteAbort.
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("txn-aborted")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if d := describedTxn(ctx, t, adm, txnID); d.State != "Ongoing" || !slices.Equal(partitionsOf(d), []string{topic + "/1"}) {
		t.Fatalf("described in the second transaction: %+v", d)
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := txn.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		d = describedTxn(ctx, t, adm, txnID)
		return d.State == "CompleteAbort", nil
	}); err != nil {
		t.Fatalf("the abort described: %+v: %v", d, err)
	}
	if len(d.Topics) != 0 || d.ProducerID != pid || d.ProducerEpoch != epoch {
		t.Fatalf("described aborted: %+v (producer %d epoch %d)", d, pid, epoch)
	}
	if s := listedState(ctx, t, adm, txnID, nil, "CompleteAbort"); s != "CompleteAbort" {
		t.Fatalf("listed aborted as %q", s)
	}
	if s := listedState(ctx, t, adm, txnID, nil, "CompleteCommit"); s != "" {
		t.Fatalf("listed as CompleteCommit after the abort: %q", s)
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		got = describedProducers(ctx, t, adm, topic, 1)
		p, ok := got[1][pid]
		return ok && p.lastSeq == 2 && p.txnStart == -1, nil
	}); err != nil {
		t.Fatalf("producers of partition 1 after the abort: %v: %v", got, err)
	}
}
