package broker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-mq/queen/wire"
)

// The admin APIs operators find hanging transactions with (KIP-664), as
// kafka-transactions.sh and kadm call them.

// describeTxn describes one transactional id through kadm, which asks the
// id's coordinator.
func describeTxn(t *testing.T, adm *kadm.Client, id string) kadm.DescribedTransaction {
	t.Helper()
	described, err := adm.DescribeTransactions(ctxFor(t), id)
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	d, ok := described[id]
	if !ok {
		t.Fatalf("describe %s: not in the answer %+v", id, described)
	}
	return d
}

// listTxns lists the transactions of every node through kadm.
func listTxns(t *testing.T, adm *kadm.Client) kadm.ListedTransactions {
	t.Helper()
	listed, err := adm.ListTransactions(ctxFor(t), nil, nil)
	if err != nil {
		t.Fatalf("list transactions: %v", err)
	}
	return listed
}

// producersOf describes the producers of a topic's partitions through
// kadm, which asks each partition's leader.
func producersOf(t *testing.T, adm *kadm.Client, topic string, partitions ...int32) map[int32]kadm.DescribedProducers {
	t.Helper()
	set := kadm.TopicsSet{}
	set.Add(topic, partitions...)
	described, err := adm.DescribeProducers(ctxFor(t), set)
	if err != nil {
		t.Fatalf("describe producers: %v", err)
	}
	out := map[int32]kadm.DescribedProducers{}
	for _, p := range described[topic].Partitions {
		if p.Err != nil {
			t.Fatalf("describe producers of %s/%d: %v", topic, p.Partition, p.Err)
		}
		out[p.Partition] = p.ActiveProducers
	}
	return out
}

// txnStartIn is producer's current transaction start offset in partition
// as DescribeProducers answers it; -2 when the producer is not listed.
func txnStartIn(t *testing.T, adm *kadm.Client, topic string, partition int32, producer int64) int64 {
	t.Helper()
	p, ok := producersOf(t, adm, topic, partition)[partition][producer]
	if !ok {
		return -2
	}
	return p.CurrentTxnStartOffset
}

// topicsOf is a described transaction's partitions as "topic/partition".
func topicsOf(d kadm.DescribedTransaction) []string {
	var out []string
	for _, tp := range d.Topics.Sorted() {
		for _, p := range tp.Partitions {
			out = append(out, fmt.Sprintf("%s/%d", tp.Topic, p))
		}
	}
	return out
}

// direct sends req to the node cl is seeded with, without the client's
// routing, and returns the node's answer.
func direct[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.SeedBrokers()[0].Request(ctxFor(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(R)
}

func describeProducersReq(topic string, partitions ...int32) *kmsg.DescribeProducersRequest {
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, partitions
	req.Topics = append(req.Topics, rt)
	return req
}

func describeTxnsReq(ids ...string) *kmsg.DescribeTransactionsRequest {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = ids
	return req
}

// listedIDs is a ListTransactions answer's ids as "id:state".
func listedIDs(resp *kmsg.ListTransactionsResponse) []string {
	var out []string
	for _, s := range resp.TransactionStates {
		out = append(out, s.TransactionalID+":"+s.TransactionState)
	}
	slices.Sort(out)
	return out
}

// TestDescribeAndListTransactions follows a transactional id through an
// open transaction, its commit and an abort in DescribeTransactions,
// ListTransactions and DescribeProducers, on one node.
func TestDescribeAndListTransactions(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client()
	adm := kadm.NewClient(cl)
	createTopic(t, cl, "hang", 2)
	// An idempotent producer's record first: the transaction starts at
	// offset 1 in partition 0, and that producer has none open.
	idem := n.client(kgo.DefaultProduceTopic("hang"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := idem.ProduceSync(ctxFor(t), &kgo.Record{Partition: 0, Value: []byte("plain")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	idemID, _, err := idem.ProducerID(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}

	x := &txnClient{t: t, cl: cl, id: "hanging"}
	x.init(60000)
	if x.addPartition("hang", 0) != 0 || x.addPartition("hang", 1) != 0 ||
		x.produce("hang", "a", "b") != 0 || x.produceTo("hang", 1, "c") != 0 {
		t.Fatal("staging the transaction")
	}
	d := describeTxn(t, adm, "hanging")
	if d.Err != nil || d.State != "Ongoing" || d.ProducerID != x.pid || d.ProducerEpoch != x.epoch ||
		d.TimeoutMillis != 60000 || d.StartTimestamp <= 0 || d.Coordinator != 1 {
		t.Fatalf("an open transaction described as %+v", d)
	}
	if got := topicsOf(d); !slices.Equal(got, []string{"hang/0", "hang/1"}) {
		t.Fatalf("an open transaction's partitions: %v", got)
	}
	began := d.StartTimestamp
	if l, ok := listTxns(t, adm)["hanging"]; !ok || l.State != "Ongoing" || l.ProducerID != x.pid {
		t.Fatalf("an open transaction listed as %+v (%v)", l, ok)
	}
	producers := producersOf(t, adm, "hang", 0, 1)
	p0, p1 := producers[0][x.pid], producers[1][x.pid]
	if p0.CurrentTxnStartOffset != 1 || p0.LastSequence != 1 || p0.ProducerEpoch != x.epoch || p0.LastTimestamp <= 0 ||
		p0.CoordinatorEpoch != -1 || p1.CurrentTxnStartOffset != 0 || p1.LastSequence != 0 {
		t.Fatalf("the transactional producer in partitions 0 and 1: %+v %+v", p0, p1)
	}
	if p := producers[0][idemID]; p.ProducerID != idemID || p.CurrentTxnStartOffset != -1 || p.LastSequence != 0 {
		t.Fatalf("the idempotent producer in partition 0: %+v", p)
	}
	if _, ok := producers[1][idemID]; ok || len(producers[1]) != 1 {
		t.Fatalf("partition 1 lists producers %+v", producers[1])
	}

	// Committed: no partition waits for the transaction any more.
	if code := x.end(true); code != 0 {
		t.Fatalf("commit: %s", codeName(code))
	}
	waitFor(t, "the commit described", func() bool { return describeTxn(t, adm, "hanging").State == "CompleteCommit" })
	if d := describeTxn(t, adm, "hanging"); len(d.Topics) != 0 || d.StartTimestamp != began || d.ProducerID != x.pid {
		t.Fatalf("a committed transaction described as %+v", d)
	}
	waitFor(t, "no transaction start after the commit", func() bool { return txnStartIn(t, adm, "hang", 0, x.pid) == -1 })
	if start := txnStartIn(t, adm, "hang", 1, x.pid); start != -1 {
		t.Fatalf("partition 1 still has the committed transaction open at %d", start)
	}
	if l := listTxns(t, adm)["hanging"]; l.State != "CompleteCommit" {
		t.Fatalf("a committed transaction listed as %+v", l)
	}

	// The next transaction writes partition 0 only, after the commit's
	// marker at offset 3, and is aborted.
	if x.addPartition("hang", 0) != 0 || x.produce("hang", "d") != 0 {
		t.Fatal("staging the second transaction")
	}
	if d := describeTxn(t, adm, "hanging"); d.State != "Ongoing" || !slices.Equal(topicsOf(d), []string{"hang/0"}) {
		t.Fatalf("the second transaction described as %+v", d)
	}
	if start := txnStartIn(t, adm, "hang", 0, x.pid); start != 4 {
		t.Fatalf("the second transaction starts at %d, want 4", start)
	}
	if code := x.end(false); code != 0 {
		t.Fatalf("abort: %s", codeName(code))
	}
	waitFor(t, "the abort described", func() bool { return describeTxn(t, adm, "hanging").State == "CompleteAbort" })
	waitFor(t, "no transaction start after the abort", func() bool { return txnStartIn(t, adm, "hang", 0, x.pid) == -1 })

	// An id that began no transaction is Empty; one never seen is not found.
	y := &txnClient{t: t, cl: cl, id: "idle"}
	y.init(30000)
	if d := describeTxn(t, adm, "idle"); d.Err != nil || d.State != "Empty" || d.StartTimestamp != -1 || d.ProducerID != y.pid || d.TimeoutMillis != 30000 {
		t.Fatalf("an idle id described as %+v", d)
	}
	if d := describeTxn(t, adm, "nobody"); d.Err != kerr.TransactionalIDNotFound {
		t.Fatalf("an unknown id described as %+v", d)
	}
	both := describeTxnsReq("idle", "nobody")
	if r := direct[*kmsg.DescribeTransactionsResponse](t, cl, both); len(r.TransactionStates) != 2 ||
		r.TransactionStates[0].ErrorCode != 0 || r.TransactionStates[1].ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("two ids described as %+v", r.TransactionStates)
	}

	// ListTransactions' filters.
	for _, c := range []struct {
		name    string
		edit    func(*kmsg.ListTransactionsRequest)
		want    []string
		unknown []string
		code    int16
	}{
		{"none", func(*kmsg.ListTransactionsRequest) {}, []string{"hanging:CompleteAbort", "idle:Empty"}, nil, 0},
		{"state", func(r *kmsg.ListTransactionsRequest) { r.StateFilters = []string{"CompleteAbort", "Ongoing"} },
			[]string{"hanging:CompleteAbort"}, nil, 0},
		{"unknown state", func(r *kmsg.ListTransactionsRequest) { r.StateFilters = []string{"Bogus"} }, nil, []string{"Bogus"}, 0},
		{"producer", func(r *kmsg.ListTransactionsRequest) { r.ProducerIDFilters = []int64{y.pid} }, []string{"idle:Empty"}, nil, 0},
		{"duration", func(r *kmsg.ListTransactionsRequest) { r.DurationFilterMillis = 3600_000 }, []string{"idle:Empty"}, nil, 0},
		{"pattern", func(r *kmsg.ListTransactionsRequest) { r.TransactionalIDPattern = kmsg.StringPtr("hang.*") },
			[]string{"hanging:CompleteAbort"}, nil, 0},
		{"partial pattern", func(r *kmsg.ListTransactionsRequest) { r.TransactionalIDPattern = kmsg.StringPtr("ang") }, nil, nil, 0},
		{"bad pattern", func(r *kmsg.ListTransactionsRequest) { r.TransactionalIDPattern = kmsg.StringPtr("(") },
			nil, nil, kerr.InvalidRegularExpression.Code},
	} {
		req := kmsg.NewPtrListTransactionsRequest()
		req.SetVersion(2)
		c.edit(req)
		r := direct[*kmsg.ListTransactionsResponse](t, cl, req)
		if got := listedIDs(r); r.ErrorCode != c.code || !slices.Equal(got, c.want) || !slices.Equal(r.UnknownStateFilters, c.unknown) {
			t.Errorf("%s filter: error %d, listed %v, unknown states %v; want %d, %v, %v",
				c.name, r.ErrorCode, got, r.UnknownStateFilters, c.code, c.want, c.unknown)
		}
	}

	// DescribeProducers of partitions that do not exist; an internal
	// topic's partitions have none.
	r := direct[*kmsg.DescribeProducersResponse](t, cl, describeProducersReq("hang", 0, 9))
	if ps := r.Topics[0].Partitions; len(ps) != 2 || ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("partitions 0 and 9 described as %+v", ps)
	}
	r = direct[*kmsg.DescribeProducersResponse](t, cl, describeProducersReq("nope", 0))
	if p := r.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("an unknown topic's partition described as %+v", p)
	}
	r = direct[*kmsg.DescribeProducersResponse](t, cl, describeProducersReq("__transaction_state", 0))
	if p := r.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.ActiveProducers) != 0 {
		t.Fatalf("an internal topic's partition described as %+v", p)
	}
}

// TestTransactionAdminIsPerTenant: in tenancy mode a tenant sees its own
// transactional ids and producers only, even under the same names.
func TestTransactionAdminIsPerTenant(t *testing.T) {
	const a, b = "5d1e7c2a-3b4f-4a6e-8c9d-0e1f2a3b4c5d", "9a8b7c6d-5e4f-4a3b-9c1d-2e3f4a5b6c7d"
	n := startNode(t, func(c *Config) { c.Listener.Authenticate = StaticUsers(map[string]string{a: "pw", b: "pw"}, true) })
	login := func(user string) *kgo.Client {
		return n.client(kgo.SASL(plain.Auth{User: user, Pass: "pw"}.AsMechanism()))
	}
	clA, clB := login(a), login(b)
	admA, admB := kadm.NewClient(clA), kadm.NewClient(clB)
	createTopic(t, clA, "private", 1)
	x := &txnClient{t: t, cl: clA, id: "same-name"}
	x.init(60000)
	if x.addPartition("private", 0) != 0 || x.produce("private", "a") != 0 {
		t.Fatal("staging tenant a's transaction")
	}
	if d := describeTxn(t, admA, "same-name"); d.State != "Ongoing" || d.ProducerID != x.pid {
		t.Fatalf("tenant a's own transaction described as %+v", d)
	}
	if listed := listTxns(t, admB); len(listed) != 0 {
		t.Fatalf("tenant b lists %+v", listed)
	}
	if d := describeTxn(t, admB, "same-name"); d.Err != kerr.TransactionalIDNotFound {
		t.Fatalf("tenant b describes tenant a's id as %+v", d)
	}
	r := direct[*kmsg.DescribeProducersResponse](t, clB, describeProducersReq("private", 0))
	if p := r.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code || len(p.ActiveProducers) != 0 {
		t.Fatalf("tenant b describes the producers of tenant a's partition as %+v", p)
	}

	// Tenant b's id and topic of the same names are its own.
	createTopic(t, clB, "private", 1)
	y := &txnClient{t: t, cl: clB, id: "same-name"}
	y.init(60000)
	if d := describeTxn(t, admB, "same-name"); d.State != "Empty" || d.ProducerID != y.pid || y.pid == x.pid {
		t.Fatalf("tenant b's own id described as %+v (tenant a's producer %d)", d, x.pid)
	}
	if ps := producersOf(t, admB, "private", 0)[0]; len(ps) != 0 {
		t.Fatalf("tenant b's partition lists producers %+v", ps)
	}
	if l := listTxns(t, admB); len(l) != 1 || l["same-name"].ProducerID != y.pid || l["same-name"].State != "Empty" {
		t.Fatalf("tenant b lists %+v", l)
	}
	if l := listTxns(t, admA); len(l) != 1 || l["same-name"].ProducerID != x.pid || l["same-name"].State != "Ongoing" {
		t.Fatalf("tenant a lists %+v", l)
	}
	if start := txnStartIn(t, admA, "private", 0, x.pid); start != 0 {
		t.Fatalf("tenant a's transaction starts at %d", start)
	}
}

// TestTransactionAdminRoles: with broker JWTs, a producer describes its
// own transactional id, reading a partition's producers needs READ on the
// topic, and a login with no role lists no transaction.
func TestTransactionAdminRoles(t *testing.T) {
	n := startJWTNode(t)
	createTopic(t, n.as("admin"), "roled", 1)
	writer := n.as("write-only")
	x := &txnClient{t: t, cl: writer, id: "roled"}
	x.init(60000)
	if x.addPartition("roled", 0) != 0 || x.produce("roled", "a") != 0 {
		t.Fatal("staging")
	}
	if d := describeTxn(t, kadm.NewClient(writer), "roled"); d.State != "Ongoing" {
		t.Fatalf("the producer describes its transaction as %+v", d)
	}
	r := direct[*kmsg.DescribeProducersResponse](t, writer, describeProducersReq("roled", 0))
	if p := r.Topics[0].Partitions[0]; p.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("write-only describes producers: %+v", p)
	}
	if start := txnStartIn(t, kadm.NewClient(n.as("read-only")), "roled", 0, x.pid); start != 0 {
		t.Fatalf("read-only sees the transaction start at %d", start)
	}
	nobody := n.as("nobody")
	if l := direct[*kmsg.ListTransactionsResponse](t, nobody, kmsg.NewPtrListTransactionsRequest()); l.ErrorCode != 0 || len(l.TransactionStates) != 0 {
		t.Fatalf("a login with no role lists %+v", l)
	}
	if l := direct[*kmsg.ListTransactionsResponse](t, n.as("read-only"), kmsg.NewPtrListTransactionsRequest()); !slices.Equal(listedIDs(l), []string{"roled:Ongoing"}) {
		t.Fatalf("read-only lists %+v", l)
	}
	d := direct[*kmsg.DescribeTransactionsResponse](t, nobody, describeTxnsReq("roled"))
	if len(d.TransactionStates) != 1 || d.TransactionStates[0].TransactionalID != "roled" ||
		d.TransactionStates[0].ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("a login with no role describes %+v", d.TransactionStates)
	}
}

// TestTransactionAdminAcrossNodes: in a cluster each API is answered by the
// node Kafka's clients route it to — the partition's leader, the
// transactional id's coordinator — and refused by the others; kadm, which
// routes as Kafka's tools do, sees a transaction staged on three nodes.
func TestTransactionAdminAcrossNodes(t *testing.T) {
	nodes := startCluster(t, 3)
	e := nodes[0].engine
	tenant := wire.DefaultTenant
	cl := clusterClient(t, nodes)
	adm := kadm.NewClient(cl)
	const parts = 3
	createTopic(t, cl, "spread", parts)
	partGroups := raftGroupsOf(t, e, "spread", parts)
	var txnID string
	for i := 0; txnID == ""; i++ {
		if id := fmt.Sprintf("spread-%d", i); e.CoordinatorGroup(tenant, 't', id) == 0 {
			txnID = id
		}
	}
	coord, _, _ := e.Leader(0)
	prod := clusterClient(t, nodes, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic("spread"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := ctxFor(t)
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := range int32(parts) {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pid, _, err := prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"spread/0", "spread/1", "spread/2"}
	waitFor(t, "the coordinator to see every partition of the transaction", func() bool {
		return slices.Equal(topicsOf(describeTxn(t, adm, txnID)), want)
	})
	if d := describeTxn(t, adm, txnID); d.State != "Ongoing" || d.ProducerID != pid || d.Coordinator != int32(coord) {
		t.Fatalf("described as %+v, coordinator %d", d, coord)
	}
	if l := listTxns(t, adm)[txnID]; l.State != "Ongoing" || l.Coordinator != int32(coord) {
		t.Fatalf("listed as %+v", l)
	}
	for p := range int32(parts) {
		if start := txnStartIn(t, adm, "spread", p, pid); start != 0 {
			t.Fatalf("partition %d: transaction start %d", p, start)
		}
	}
	// Asked of each node directly.
	for _, n := range nodes {
		cl := n.client()
		id := uint64(n.broker.cfg.NodeID)
		want := kerr.NotCoordinator.Code
		if id == coord {
			want = 0
		}
		if r := direct[*kmsg.DescribeTransactionsResponse](t, cl, describeTxnsReq(txnID)); r.TransactionStates[0].ErrorCode != want {
			t.Errorf("node %d describes the transaction: %+v", id, r.TransactionStates[0])
		}
		l := direct[*kmsg.ListTransactionsResponse](t, cl, kmsg.NewPtrListTransactionsRequest())
		if got := slices.ContainsFunc(l.TransactionStates, func(s kmsg.ListTransactionsResponseTransactionState) bool {
			return s.TransactionalID == txnID
		}); l.ErrorCode != 0 || got != (id == coord) {
			t.Errorf("node %d lists %+v", id, l)
		}
		r := direct[*kmsg.DescribeProducersResponse](t, cl, describeProducersReq("spread", 0, 1, 2))
		for i, rp := range r.Topics[0].Partitions {
			leader, _, _ := n.engine.Leader(partGroups[i])
			want := kerr.NotLeaderForPartition.Code
			if leader == id {
				want = 0
			}
			if rp.ErrorCode != want {
				t.Errorf("node %d describes the producers of partition %d (led by %d): %+v", id, i, leader, rp)
			}
		}
	}

	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the commit described", func() bool {
		d := describeTxn(t, adm, txnID)
		return d.State == "CompleteCommit" && len(d.Topics) == 0
	})
	for p := range int32(parts) {
		waitFor(t, fmt.Sprintf("partition %d's leader to end the transaction", p), func() bool {
			return txnStartIn(t, adm, "spread", p, pid) == -1
		})
	}
}
