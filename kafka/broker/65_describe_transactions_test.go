package broker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/wire"
)

// TestDescribeTransactionsEmptyID: an empty transactional id is no id at
// all, and Kafka's coordinator answers it INVALID_REQUEST (not
// TRANSACTIONAL_ID_NOT_FOUND or NOT_COORDINATOR: no node coordinates it),
// beside the other ids of the same request, which are answered as usual.
func TestDescribeTransactionsEmptyID(t *testing.T) {
	n := startNode(t, nil)
	resp := direct[*kmsg.DescribeTransactionsResponse](t, n.client(), describeTxnsReq("", "never-used"))
	if len(resp.TransactionStates) != 2 {
		t.Fatalf("answered %+v", resp.TransactionStates)
	}
	if st := resp.TransactionStates[0]; st.TransactionalID != "" || st.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("the empty id: %+v, want INVALID_REQUEST", st)
	}
	if st := resp.TransactionStates[1]; st.TransactionalID != "never-used" || st.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Errorf("an unknown id: %+v, want TRANSACTIONAL_ID_NOT_FOUND", st)
	}
}

// TestDescribeTransactionsSeesAcknowledgedBatches: the coordinator lists a
// partition led by another node as soon as the producer's batch there is
// acknowledged, with no waiting: Kafka's coordinator lists it from
// AddPartitionsToTxn on, and this node's replica of the partition's group
// must not answer from before the batch.
func TestDescribeTransactionsSeesAcknowledgedBatches(t *testing.T) {
	nodes := startCluster(t, 3)
	e := nodes[0].engine
	cl := clusterClient(t, nodes)
	adm := kadm.NewClient(cl)
	const parts = 3
	createTopic(t, cl, "seen", parts)
	partGroups := raftGroupsOf(t, e, "seen", parts)
	var txnID string
	for i := 0; txnID == ""; i++ {
		if id := fmt.Sprintf("seen-%d", i); e.CoordinatorGroup(wire.DefaultTenant, 't', id) == 0 {
			txnID = id
		}
	}
	coord, _, _ := e.Leader(0)
	partition := int32(-1)
	for p, g := range partGroups {
		if leader, _, _ := e.Leader(g); leader != coord {
			partition = int32(p)
		}
	}
	if partition < 0 {
		t.Skipf("every partition's group is led by the coordinator %d", coord)
	}
	prod := clusterClient(t, nodes, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic("seen"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	want := []string{fmt.Sprintf("seen/%d", partition)}
	for i := range 10 {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(ctxFor(t), &kgo.Record{Partition: partition, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if d := describeTxn(t, adm, txnID); d.State != "Ongoing" || !slices.Equal(topicsOf(d), want) {
			t.Fatalf("transaction %d described right after its batch was acknowledged: %+v, want %v", i, d, want)
		}
		if err := prod.EndTransaction(ctxFor(t), kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDescribeTransactionsEmptyAfterInitProducerID: as Kafka's
// coordinator, an InitProducerId makes a transactional id Empty (no start
// timestamp) whether its last transaction committed, aborted or was still
// open (aborted by the InitProducerId: PrepareAbort until resolved, then
// Empty); the next transaction is Ongoing and ends Complete* again.
// ListTransactions lists the same states.
func TestDescribeTransactionsEmptyAfterInitProducerID(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client()
	adm := kadm.NewClient(cl)
	createTopic(t, cl, "reinit", 1)
	x := &txnClient{t: t, cl: cl, id: "reinit"}
	state := func() (kadm.DescribedTransaction, string) {
		d := describeTxn(t, adm, x.id)
		return d, listTxns(t, adm)[x.id].State
	}
	run := func(what string, end func() int16, ended string) {
		t.Helper()
		x.init(60000)
		if d, l := state(); d.State != "Empty" || l != "Empty" || d.StartTimestamp != -1 || d.ProducerEpoch != x.epoch {
			t.Fatalf("%s: after InitProducerId described %+v, listed %s; want Empty with no start", what, d, l)
		}
		if x.addPartition("reinit", 0) != 0 || x.produce("reinit", "v") != 0 {
			t.Fatalf("%s: staging", what)
		}
		if d, _ := state(); d.State != "Ongoing" {
			t.Fatalf("%s: staged, described %+v", what, d)
		}
		if code := end(); code != 0 {
			t.Fatalf("%s: ending: %s", what, codeName(code))
		}
		waitFor(t, what+" described "+ended, func() bool { d, l := state(); return d.State == ended && l == ended })
	}
	run("commit", func() int16 { return x.end(true) }, "CompleteCommit")
	run("abort", func() int16 { return x.end(false) }, "CompleteAbort")
	run("commit again", func() int16 { return x.end(true) }, "CompleteCommit")
	// Left open, then fenced by the next InitProducerId (Empty once the
	// abort is resolved; a client retries CONCURRENT_TRANSACTIONS until).
	run("left open", func() int16 { return 0 }, "Ongoing")
	x.init(60000)
	waitFor(t, "the fenced transaction resolved", func() bool { d, l := state(); return d.State == "Empty" && l == "Empty" })
}
