package broker

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

// nodeClient is a franz-go client seeded with one node, for requests sent
// to a chosen broker.
func nodeClient(t *testing.T, n *testNode) *kgo.Client {
	t.Helper()
	cl := n.client()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t), cl); err != nil {
		t.Fatal(err)
	}
	return cl
}

// request sends req to broker id through cl.
func request[R kmsg.Response](t *testing.T, cl *kgo.Client, id int32, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.Broker(int(id)).Request(ctxFor(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(R)
}

// fetchAt fetches one partition from offset at broker id.
func fetchAt(t *testing.T, cl *kgo.Client, id int32, topic string, partition int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.MaxWaitMillis = 1<<20, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return request[*kmsg.FetchResponse](t, cl, id, req).Topics[0].Partitions[0]
}

// latestOffset asks broker id for a partition's latest offset, with
// currentEpoch as the client's leader epoch (-1: none).
func latestOffset(t *testing.T, cl *kgo.Client, id int32, topic string, partition, currentEpoch int32) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, listLatest, currentEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return request[*kmsg.ListOffsetsResponse](t, cl, id, req).Topics[0].Partitions[0]
}

// TestNewLeaderAnswersOnceCaughtUp: a node elected leader of a raft group
// may hold entries of the previous term it did not know were committed;
// its own first entry commits them, and it applies them a moment later.
// Until it has, its high-water marks are behind the committed log (and
// behind what consumers read from the previous leader): a fetch past them
// must not answer OFFSET_OUT_OF_RANGE (clients reset their position on it)
// nor ListOffsets an old latest offset; both answer OFFSET_NOT_AVAILABLE,
// retriable, until the new leader has caught up.
func TestNewLeaderAnswersOnceCaughtUp(t *testing.T) {
	const group = 1 // led by node 2, which goes away
	var (
		held, dropAcks atomic.Bool
		started        atomic.Pointer[[]*testNode] // the hooks run before startClusterWith returns
	)
	release := make(chan struct{})
	nodes := startClusterWith(t, 3, func(i int, c *raftgroups.Config) {
		// The old leader steps down one election timeout after it last
		// heard a quorum: long enough for the produce below to reach it.
		c.ElectionRTT = 50
		if i == group {
			return
		}
		// The old leader's address for the group: its raft port + group.
		host, port, _ := net.SplitHostPort(c.Peers[group].RaftAddr)
		p, _ := strconv.Atoi(port)
		oldAddr := net.JoinHostPort(host, strconv.Itoa(p+group))
		// Acknowledgements to the old leader are lost, so it never
		// commits what it appends; a follower that takes over commits
		// it, and is held before applying it.
		c.Drop = func(g int, target string) error {
			if g == group && target == oldAddr && dropAcks.Load() {
				return errors.New("dropped by the test")
			}
			return nil
		}
		c.BeforeApply = func(g int) {
			if nodes := started.Load(); g == group && held.Load() && nodes != nil && (*nodes)[i].engine.Leads(g) {
				<-release
			}
		}
	})
	started.Store(&nodes)
	var once sync.Once
	resume := func() { once.Do(func() { close(release) }) }
	t.Cleanup(resume) // before the hosts close: they wait for their applies

	old := nodes[group]
	createTopic(t, old.client(), "lag", 3)
	partition := int32(-1)
	for p, g := range raftGroupsOf(t, old.engine, "lag", 3) {
		if g == group {
			partition = int32(p)
		}
	}
	var recs []records.Record
	for i := range 5 {
		recs = append(recs, records.Record{OffsetDelta: int32(i), Value: []byte("v")})
	}
	data, err := records.AppendBatch(nil, records.NewBatchOptions(0), recs)
	if err != nil {
		t.Fatal(err)
	}
	prod := kmsg.NewPtrProduceRequest()
	prod.Acks, prod.TimeoutMillis = -1, 1000
	prod.Topics = []kmsg.ProduceRequestTopic{{Topic: "lag", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: partition, Records: data}}}}
	oldClient := nodeClient(t, old)
	held.Store(true)
	dropAcks.Store(true)
	// Appended by every replica, committed by none: the answer is a
	// timeout.
	if p := request[*kmsg.ProduceResponse](t, oldClient, old.broker.cfg.NodeID, prod).Topics[0].Partitions[0]; p.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("produce to a leader that hears no acknowledgement: error %d, want REQUEST_TIMED_OUT", p.ErrorCode)
	}

	// The leader goes away; one of the others takes over, commits the
	// records with its first entry and is held before applying them.
	_ = old.broker.Close()
	old.host.Close()
	var next *testNode
	deadline := time.Now().Add(testWait)
	for next == nil {
		for _, n := range []*testNode{nodes[0], nodes[2]} {
			if n.engine.Leads(group) {
				next = n
			}
		}
		if next == nil && time.Now().After(deadline) {
			t.Fatal("no new leader")
		}
	}
	id := next.broker.cfg.NodeID
	cl := nodeClient(t, next)
	if got := hwm(next, "lag", uint32(partition)); got != 0 {
		t.Fatalf("the new leader applied %d records while held", got)
	}
	if p := fetchAt(t, cl, id, "lag", partition, 5); p.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Fatalf("fetch at the committed end from a leader that has not applied it: error %d (hwm %d), want OFFSET_NOT_AVAILABLE",
			p.ErrorCode, p.HighWatermark)
	}
	if p := latestOffset(t, cl, id, "lag", partition, -1); p.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Fatalf("latest offset from a leader that has not caught up: error %d, offset %d; want OFFSET_NOT_AVAILABLE", p.ErrorCode, p.Offset)
	}

	resume()
	for {
		p := fetchAt(t, cl, id, "lag", partition, 5)
		if p.ErrorCode == 0 && p.HighWatermark == 5 {
			break
		}
		if p.ErrorCode != kerr.OffsetNotAvailable.Code || time.Now().After(deadline) {
			t.Fatalf("fetch after catching up: error %d, hwm %d", p.ErrorCode, p.HighWatermark)
		}
	}
	_, term, _ := next.engine.Leader(group)
	for {
		p := latestOffset(t, cl, id, "lag", partition, -1)
		if p.ErrorCode == 0 && p.Offset == 5 && p.LeaderEpoch == int32(term) {
			break
		}
		if p.ErrorCode != kerr.OffsetNotAvailable.Code || time.Now().After(deadline) {
			t.Fatalf("latest offset once caught up: error %d, offset %d, epoch %d; want 5 in epoch %d", p.ErrorCode, p.Offset, p.LeaderEpoch, term)
		}
	}
	// A client that says which leader epoch it believes current is
	// fenced when it missed a leader change, and told this node does not
	// know its epoch yet when it is ahead.
	for epoch, want := range map[int32]int16{int32(term): 0, int32(term) - 1: kerr.FencedLeaderEpoch.Code, int32(term) + 1: kerr.UnknownLeaderEpoch.Code} {
		if p := latestOffset(t, cl, id, "lag", partition, epoch); p.ErrorCode != want {
			t.Fatalf("ListOffsets with leader epoch %d in epoch %d: error %d, want %d", epoch, term, p.ErrorCode, want)
		}
	}
}

// TestFetchChecksTheLeaderEpoch: a fetch naming the leader epoch the client
// believes current (Fetch v9+) is fenced when the client missed a leader
// change and told this node does not know the epoch when it is ahead, as
// Kafka answers; fetch sessions are declined (session id 0) and an
// incremental fetch of a session never granted answers
// FETCH_SESSION_ID_NOT_FOUND.
func TestFetchChecksTheLeaderEpoch(t *testing.T) {
	n := startNode(t, nil)
	cl := nodeClient(t, n)
	createTopic(t, cl, "epochs", 1)
	_, term, _ := n.engine.Leader(raftGroupsOf(t, n.engine, "epochs", 1)[0])
	fetch := func(epoch int32, session int32) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.SessionID = 1<<20, session
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "epochs"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return request[*kmsg.FetchResponse](t, cl, n.broker.cfg.NodeID, req)
	}
	for epoch, want := range map[int32]int16{-1: 0, int32(term): 0, int32(term) - 1: kerr.FencedLeaderEpoch.Code, int32(term) + 1: kerr.UnknownLeaderEpoch.Code} {
		resp := fetch(epoch, 0)
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != want || resp.SessionID != 0 {
			t.Fatalf("fetch v%d with leader epoch %d in epoch %d: error %d, session %d; want %d, no session",
				resp.Version, epoch, term, got, resp.SessionID, want)
		}
	}
	if resp := fetch(-1, 7); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code || len(resp.Topics) != 0 {
		t.Fatalf("incremental fetch of an unknown session: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
	}
}

// TestProduceToAFollowerNamesTheLeader: produce v10 answered
// NOT_LEADER_OR_FOLLOWER carries the partition's current leader, its
// epoch and address (KIP-951), so a client moves at once instead of
// waiting out its metadata refresh interval.
func TestProduceToAFollowerNamesTheLeader(t *testing.T) {
	nodes := startCluster(t, 3)
	leader, epoch := oneLeaderTopic(t, nodes, "hinted")
	follower := nodes[leader%3] // any node but the leader
	fcl := nodeClient(t, follower)
	for _, version := range []int16{9, 10} {
		req := produceRequest("hinted", mustBatch(t, []byte("v")), -1)
		req.Version = version
		resp := request[*kmsg.ProduceResponse](t, fcl, int32(follower.broker.cfg.NodeID), req)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("v%d: error %d, want NOT_LEADER_OR_FOLLOWER", version, p.ErrorCode)
		}
		if version < 10 {
			continue // the fields do not exist before v10
		}
		if p.CurrentLeader.LeaderID != leader || p.CurrentLeader.LeaderEpoch != epoch {
			t.Fatalf("current leader %+v, want node %d at epoch %d", p.CurrentLeader, leader, epoch)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != leader || resp.Brokers[0].Port == 0 {
			t.Fatalf("brokers %+v, want the leader's address", resp.Brokers)
		}
	}
}

// TestOffsetForLeaderEpochEndsAtTheHighWaterMark: the epoch a consumer
// asks about ends at the high-water mark for every epoch up to the
// current one, never before a position a consumer can hold; a future
// epoch is unknown; a fenced epoch and a follower are refused as Kafka
// refuses them.
func TestOffsetForLeaderEpochEndsAtTheHighWaterMark(t *testing.T) {
	nodes := startCluster(t, 3)
	leader, epoch := oneLeaderTopic(t, nodes, "epochs")
	lcl := nodeClient(t, nodes[leader-1])
	for i := range 3 {
		req := produceRequest("epochs", mustBatch(t, []byte{byte(i)}), -1)
		if p := request[*kmsg.ProduceResponse](t, lcl, leader, req).Topics[0].Partitions[0]; p.ErrorCode != 0 {
			t.Fatalf("produce: %d", p.ErrorCode)
		}
	}
	ask := func(n *testNode, current, asked int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "epochs"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = current, asked
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return request[*kmsg.OffsetForLeaderEpochResponse](t, nodeClient(t, n), int32(n.broker.cfg.NodeID), req).Topics[0].Partitions[0]
	}
	leaderNode := nodes[leader-1]
	for _, asked := range []int32{0, epoch - 1, epoch} {
		if p := ask(leaderNode, epoch, asked); p.ErrorCode != 0 || p.LeaderEpoch != asked || p.EndOffset != 3 {
			t.Fatalf("epoch %d: %+v, want it ending at 3", asked, p)
		}
	}
	if p := ask(leaderNode, epoch, epoch+1); p.ErrorCode != 0 || p.LeaderEpoch != -1 || p.EndOffset != -1 {
		t.Fatalf("a future epoch: %+v, want -1/-1", p)
	}
	if p := ask(leaderNode, epoch-1, epoch-1); p.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("an old current epoch: %+v, want FENCED_LEADER_EPOCH", p)
	}
	if p := ask(nodes[leader%3], -1, epoch); p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("a follower: %+v, want NOT_LEADER_OR_FOLLOWER", p)
	}
}

// oneLeaderTopic creates a one-partition topic on a cluster startCluster
// started (so its leaders are settled) and returns the node leading the
// partition and its leader epoch.
func oneLeaderTopic(t *testing.T, nodes []*testNode, topic string) (leader, epoch int32) {
	t.Helper()
	createTopic(t, nodeClient(t, nodes[0]), topic, 1)
	part, ok := nodes[0].broker.partition(wire.DefaultTenant, topic, 0)
	if !ok {
		t.Fatal("partition not known")
	}
	leader, term, ok := nodes[0].broker.groupLeader(part.group)
	if !ok {
		t.Fatal("the partition's group has no leader")
	}
	return leader, epochOf(term)
}
