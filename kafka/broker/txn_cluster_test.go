package broker

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// startCluster starts size in-process nodes, each with raftgroupstest.Groups
// raft groups and a broker, and waits until every raft group is led by its
// preferred node (group g by node g mod size + 1), so leadership is spread
// over the nodes, and every broker is in the node registry.
func startCluster(t *testing.T, size int) []*testNode {
	t.Helper()
	return startClusterWith(t, size, nil)
}

// startClusterWith is startCluster with edit adjusting node i's raft
// config (test hooks) first.
func startClusterWith(t *testing.T, size int, edit func(i int, c *raftgroups.Config)) []*testNode {
	t.Helper()
	groups := raftgroupstest.Groups
	place, err := tenancy.NewPlacement(groups, "")
	if err != nil {
		t.Fatal(err)
	}
	peers := make([]raftgroups.Peer, size)
	dirs := make([]string, size)
	for i := range peers {
		peers[i] = raftgroups.Peer{ID: uint64(i + 1), RaftAddr: raftgroupstest.FreePorts(t, groups)}
		dirs[i] = t.TempDir()
	}
	// Every node's start waits for its replicas, which need the peers.
	hosts := make([]*raftgroups.Host, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for i := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := raftgroups.Config{NodeID: peers[i].ID, Peers: peers, ListenAddr: peers[i].RaftAddr,
				Dir: dirs[i], Groups: groups, RTTMillisecond: 10, ElectionRTT: 10, HeartbeatRTT: 1, Logger: quiet, Placement: place.Spec()}
			if edit != nil {
				edit(i, &cfg)
			}
			hosts[i], errs[i] = raftgroups.Start(cfg)
		}()
	}
	wg.Wait()
	for i, h := range hosts {
		if h != nil {
			t.Cleanup(h.Close)
		}
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
	}
	nodes := make([]*testNode, size)
	for i, h := range hosts {
		e, err := raftgroups.NewEngine(h, place)
		if err != nil {
			t.Fatal(err)
		}
		addr := freeAddr(t)
		b, err := New(Config{Listener: kafka.Config{Addr: addr}, NodeID: int32(i + 1), AdvertisedAddr: addr, LogDir: "/data"}, e, quiet)
		if err == nil {
			err = b.Start()
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		nodes[i] = &testNode{t: t, host: h, engine: e, broker: b, addr: addr}
	}
	deadline := time.Now().Add(45 * time.Second)
	for !clusterSettled(nodes, groups) {
		if time.Now().After(deadline) {
			t.Fatal("raft leadership did not spread over the nodes, or brokers did not register")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nodes
}

// clusterClient is a franz-go client seeded with every node of the
// cluster, closed with the test.
func clusterClient(t *testing.T, nodes []*testNode, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.addr)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RetryTimeout(testWait)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// clusterSettled reports whether every node sees every raft group led by
// its preferred node, at the newest format, and every broker registered.
func clusterSettled(nodes []*testNode, groups int) bool {
	for _, n := range nodes {
		if len(n.engine.KafkaNodes()) != len(nodes) || !raftgroupstest.AtNewestFormat(n.host) {
			return false
		}
		for g := 0; g < groups; g++ {
			if leader, _, ok := n.engine.Leader(g); !ok || leader != uint64(g%len(nodes)+1) {
				return false
			}
		}
	}
	return true
}

// TestTransactionAcrossNodes runs a transaction whose records are staged by
// the partitions' leaders and whose offsets are staged by the consumer
// group's coordinator, nodes other than the transactional id's
// coordinator, through franz-go routing each request as Kafka clients do;
// it commits on every node's partitions, and an aborted one is visible
// nowhere.
func TestTransactionAcrossNodes(t *testing.T) {
	nodes := startCluster(t, 3)
	e := nodes[0].engine
	tenant := wire.DefaultTenant
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.addr)
	}
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RetryTimeout(testWait)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	const parts = 3
	createTopic(t, newClient(), "xn", parts)
	partGroups := raftGroupsOf(t, e, "xn", parts)
	if distinct(partGroups) != parts {
		t.Fatalf("partitions in raft groups %v", partGroups)
	}
	// A transactional id and a consumer group coordinated by different
	// nodes; the partitions are led by all three.
	var txnID, group string
	for i := 0; txnID == "" || group == ""; i++ {
		if id := fmt.Sprintf("txn-%d", i); txnID == "" && e.CoordinatorGroup(tenant, 't', id) == 0 {
			txnID = id
		}
		if g := fmt.Sprintf("group-%d", i); group == "" && e.CoordinatorGroup(tenant, 'g', g) == 1 {
			group = g
		}
	}
	txnNode, _, _ := e.Leader(0)
	groupNode, _, _ := e.Leader(1)
	var leaders []uint64
	for _, g := range partGroups {
		l, _, _ := e.Leader(g)
		leaders = append(leaders, l)
	}
	if txnNode == groupNode || !slices.ContainsFunc(leaders, func(l uint64) bool { return l != txnNode }) {
		t.Fatalf("coordinators on nodes %d and %d, partition leaders %v: nothing is staged away from the coordinator", txnNode, groupNode, leaders)
	}

	prod := newClient(kgo.TransactionalID(txnID), kgo.DefaultProduceTopic("xn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := ctxFor(t)
	commitOffsets := func(offset int64) {
		pid, epoch, err := prod.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, pid, epoch, group
		if resp, err := add.RequestWith(ctx, prod); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("AddOffsetsToTxn: %v %+v", err, resp)
		}
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, group, pid, epoch
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "xn"
		for p := int32(0); p < parts; p++ {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, offset
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, prod) // to the group's coordinator
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range resp.Topics[0].Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("TxnOffsetCommit partition %d: %v", p.Partition, err)
			}
		}
	}
	run := func(prefix string, offset int64, commit kgo.TransactionEndTry) {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2*parts; i++ {
			r := &kgo.Record{Partition: int32(i % parts), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		commitOffsets(offset)
		if err := prod.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	run("committed", 1, kgo.TryCommit)
	run("aborted", 2, kgo.TryAbort)

	committed := []string{"committed-0", "committed-1", "committed-2", "committed-3", "committed-4", "committed-5"}
	all := append(slices.Clone(committed), "aborted-0", "aborted-1", "aborted-2", "aborted-3", "aborted-4", "aborted-5")
	slices.Sort(all)
	for _, c := range []struct {
		level kgo.IsolationLevel
		want  []string
	}{{kgo.ReadCommitted(), committed}, {kgo.ReadUncommitted(), all}} {
		cons := newClient(kgo.ConsumeTopics("xn"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(c.level))
		var got []string
		for _, r := range consume(t, cons, len(c.want)) {
			got = append(got, string(r.Value))
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Fatalf("consumed %v, want %v", got, c.want)
		}
	}
	// Every node's replica of every partition holds both transactions'
	// records and markers and nothing staged, and the group's positions
	// are the committed transaction's.
	deadline := time.Now().Add(testWait)
	for _, n := range nodes {
		for {
			settled := true
			for p := uint32(0); p < parts; p++ {
				part, ok := n.engine.PartitionAt(tenant, "xn", p)
				pos, has := part.Store().GroupPosition(part, group)
				settled = settled && ok && part.HighWatermark() == 6 && has && pos == 1
			}
			for _, st := range n.engine.Stores() {
				settled = settled && len(st.PreparedParts()) == 0
			}
			if settled {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: partitions, positions or staged parts not as committed", n.broker.cfg.NodeID)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = group
	fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "xn", Partitions: []int32{0, 1, 2}}}
	resp, err := fetch.RequestWith(ctx, prod)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("OffsetFetch: %v %+v", err, resp)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.Offset != 1 {
			t.Fatalf("OffsetFetch partition %d: %d at %d, want the committed 1", p.Partition, p.ErrorCode, p.Offset)
		}
	}
}

// TestInitProducerIDWaitsForTheFencedTransactionEverywhere fences a
// transactional id whose open transaction wrote to a raft group that is
// cut off: InitProducerId answers CONCURRENT_TRANSACTIONS (it used to
// answer the new epoch while the old transaction's batches stayed open
// there, for the next transaction's marker to end them too). Once the
// group is back the init succeeds, the fenced batches are aborted in every
// replica, and the next transaction reads alone under read_committed.
func TestInitProducerIDWaitsForTheFencedTransactionEverywhere(t *testing.T) {
	var cut atomic.Int64 // 1 + the raft group whose traffic is dropped; 0: none
	nodes := startClusterWith(t, 3, func(_ int, c *raftgroups.Config) {
		c.Drop = func(group int, _ string) error {
			if int64(group)+1 == cut.Load() {
				return errors.New("cut off by the test")
			}
			return nil
		}
	})
	e := nodes[0].engine
	cl := clusterClient(t, nodes)
	createTopic(t, cl, "fz", 1)
	pg := raftGroupsOf(t, e, "fz", 1)[0]
	var txnID string
	for i := 0; txnID == ""; i++ {
		if id := fmt.Sprintf("fz-%d", i); e.CoordinatorGroup(wire.DefaultTenant, 't', id) != pg {
			txnID = id
		}
	}
	x := &txnClient{t: t, cl: cl, id: txnID}
	x.init(60_000)
	if code := x.addPartition("fz", 0); code != 0 {
		t.Fatalf("AddPartitionsToTxn: %d", code)
	}
	// Right after the topic's creation the client may not know its leader
	// yet: NOT_LEADER_OR_FOLLOWER, retried as a client does.
	produce := func(values ...string) {
		t.Helper()
		deadline := time.Now().Add(testWait)
		code := x.produceTo("fz", 0, values...)
		for code == kerr.NotLeaderForPartition.Code && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			code = x.produceTo("fz", 0, values...)
		}
		if code != 0 {
			t.Fatalf("produce: %d", code)
		}
	}
	produce("fenced-0", "fenced-1")
	cut.Store(int64(pg) + 1)
	init := func() *kmsg.InitProducerIDResponse {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(txnID), 60_000
		resp, err := req.RequestWith(ctxFor(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := init(); resp.ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Fatalf("InitProducerId with the fenced transaction's group cut off: code %d, epoch %d; want CONCURRENT_TRANSACTIONS",
			resp.ErrorCode, resp.ProducerEpoch)
	}
	cut.Store(0)
	deadline := time.Now().Add(testWait)
	resp := init()
	for resp.ErrorCode == kerr.ConcurrentTransactions.Code && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		resp = init()
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("InitProducerId once the group is back: %d", resp.ErrorCode)
	}
	// Every replica of the partition holds the fenced batch aborted: its
	// marker is written and the last stable offset is past it.
	for _, n := range nodes {
		for {
			p, ok := n.engine.PartitionAt(wire.DefaultTenant, "fz", 0)
			if ok && p.HighWatermark() == 3 {
				if v := p.Store().Txns(p, 0, 3); v.LastStable == 3 && len(v.Aborted) == 1 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: the fenced transaction is not aborted in its partition", n.broker.cfg.NodeID)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	x.pid, x.epoch, x.seqs = resp.ProducerID, resp.ProducerEpoch, map[string]int32{}
	if code := x.addPartition("fz", 0); code != 0 {
		t.Fatalf("AddPartitionsToTxn at the new epoch: %d", code)
	}
	produce("next")
	if code := x.end(true); code != 0 {
		t.Fatalf("EndTxn at the new epoch: %d", code)
	}
	cons := clusterClient(t, nodes, kgo.ConsumeTopics("fz"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if got := consume(t, cons, 1); len(got) != 1 || string(got[0].Value) != "next" {
		t.Fatalf("read_committed got %d records, want only the next transaction's", len(got))
	}
}
