package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// Kafka consumer groups against real nodes. The raw tests speak the group
// protocol request by request (kmsg through a franz-go seed broker), so
// they play members that misbehave on purpose, such as one that dies
// without leaving.

// rawMember is one group member driven request by request.
type rawMember struct {
	t       *testing.T
	cl      *kgo.Client
	group   string
	id      string
	gen     int32
	leader  bool
	members []string
}

const rawSessionMs = 1500

func (m *rawMember) joinRequest() *kmsg.JoinGroupRequest {
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.Group, jr.MemberID, jr.ProtocolType = m.group, m.id, "consumer"
	jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis = rawSessionMs, 10000
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"orders"}
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	jr.Protocols = append(jr.Protocols, p)
	return jr
}

// join joins (doing the MEMBER_ID_REQUIRED round trip the first time) and
// returns once the rebalance completes.
func (m *rawMember) join(ctx context.Context) {
	m.t.Helper()
	if m.id == "" {
		r := e2etest.KafkaRequest[*kmsg.JoinGroupResponse](ctx, m.t, m.cl, m.joinRequest())
		if r.ErrorCode != kerr.MemberIDRequired.Code {
			m.t.Fatalf("first join: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		m.id = r.MemberID
	}
	r := e2etest.KafkaRequest[*kmsg.JoinGroupResponse](ctx, m.t, m.cl, m.joinRequest())
	if r.ErrorCode != 0 {
		m.t.Fatalf("join of %s: %v", m.id, kerr.ErrorForCode(r.ErrorCode))
	}
	m.gen, m.leader, m.members = r.Generation, r.LeaderID == m.id, nil
	for _, o := range r.Members {
		m.members = append(m.members, o.MemberID)
	}
}

// sync syncs; the leader hands every member the same assignment bytes.
func (m *rawMember) sync(ctx context.Context) []byte {
	m.t.Helper()
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.MemberID, sr.Generation = m.group, m.id, m.gen
	for _, id := range m.members {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = id, []byte(fmt.Sprintf("gen %d", m.gen))
		sr.GroupAssignment = append(sr.GroupAssignment, a)
	}
	r := e2etest.KafkaRequest[*kmsg.SyncGroupResponse](ctx, m.t, m.cl, sr)
	if r.ErrorCode != 0 {
		m.t.Fatalf("sync of %s: %v", m.id, kerr.ErrorForCode(r.ErrorCode))
	}
	return r.MemberAssignment
}

func (m *rawMember) heartbeat(ctx context.Context) int16 {
	m.t.Helper()
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = m.group, m.id, m.gen
	return e2etest.KafkaRequest[*kmsg.HeartbeatResponse](ctx, m.t, m.cl, hb).ErrorCode
}

// fetchOffsets reads a group's committed offsets of orders/0..n-1.
func fetchOffsets(ctx context.Context, t *testing.T, cl *kgo.Client, group string, n int32) []int64 {
	t.Helper()
	fr := kmsg.NewPtrOffsetFetchRequest()
	fr.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = "orders"
	for p := range n {
		rt.Partitions = append(rt.Partitions, p)
	}
	fr.Topics = append(fr.Topics, rt)
	resp := e2etest.KafkaRequest[*kmsg.OffsetFetchResponse](ctx, t, cl, fr)
	if resp.ErrorCode != 0 {
		t.Fatalf("offset fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	out := make([]int64, n)
	for _, p := range resp.Topics[0].Partitions {
		out[p.Partition] = p.Offset
	}
	return out
}

// pushOrders creates queue orders with partitions "0".."n-1" (indexes 0..n-1)
// holding 5 messages each.
func pushOrders(ctx context.Context, t *testing.T, base string, n int) {
	t.Helper()
	for p := range n {
		var items []e2etest.PushItem
		for i := range 5 {
			items = append(items, e2etest.PushItem{Queue: "orders", Partition: fmt.Sprint(p), Payload: map[string]int{"i": i}})
		}
		if _, code, err := e2etest.Push(ctx, base, items); err != nil || code != 201 {
			t.Fatalf("push: %d %v", code, err)
		}
	}
}

// httpGroupRow is a row of GET /api/v1/consumer-groups.
type httpGroupRow struct {
	Name              string `json:"name"`
	QueueName         string `json:"queueName"`
	PartitionCursors  int    `json:"partitionCursors"`
	PartitionsWithLag int    `json:"partitionsWithLag"`
	TotalLag          uint64 `json:"totalLag"`
	State             string `json:"state"`
}

// httpGroup returns the group's row for queue from the HTTP view.
func httpGroup(ctx context.Context, t *testing.T, base, group, queue string) httpGroupRow {
	t.Helper()
	var rows []httpGroupRow
	if code, err := e2etest.Call(ctx, "GET", base+"/api/v1/consumer-groups", nil, &rows); err != nil || code != 200 {
		t.Fatalf("GET /api/v1/consumer-groups: %d %v", code, err)
	}
	for _, r := range rows {
		if r.Name == group && r.QueueName == queue {
			return r
		}
	}
	t.Fatalf("group %s on %s not in GET /api/v1/consumer-groups: %+v", group, queue, rows)
	return httpGroupRow{}
}

func describeGroup(ctx context.Context, t *testing.T, cl *kgo.Client, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	dr := kmsg.NewPtrDescribeGroupsRequest()
	dr.Groups = []string{group}
	return e2etest.KafkaRequest[*kmsg.DescribeGroupsResponse](ctx, t, cl, dr).Groups[0]
}

// TestKafkaGroupProtocolOnARealNode plays two members by hand: a join with
// MEMBER_ID_REQUIRED, a rebalance when the second arrives, the second
// dying without a word and its session evicting it, then offsets that
// outlive the client and a node restart, while the membership (held in
// memory) does not.
func TestKafkaGroupProtocolOnARealNode(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: e2etest.GroupEnv})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 90*time.Second)
	pushOrders(ctx, t, n.URL(), 3)

	a := &rawMember{t: t, cl: e2etest.KafkaClient(t, n), group: "billing"}
	a.join(ctx)
	if !a.leader || a.gen != 1 || len(a.members) != 1 {
		t.Fatalf("a's first join: gen %d leader %v members %v", a.gen, a.leader, a.members)
	}
	a.sync(ctx)

	// b arrives: its join parks until a, told by its heartbeat, rejoins.
	b := &rawMember{t: t, cl: e2etest.KafkaClient(t, n), group: "billing"}
	bJoined := make(chan struct{})
	go func() { defer close(bJoined); b.join(ctx) }()
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		return a.heartbeat(ctx) == kerr.RebalanceInProgress.Code, nil
	}); err != nil {
		t.Fatal("a never heard of the rebalance:", err)
	}
	a.join(ctx)
	<-bJoined
	if a.gen != 2 || b.gen != 2 || !a.leader || len(a.members) != 2 {
		t.Fatalf("second generation: a %d (leader %v, %v), b %d", a.gen, a.leader, a.members, b.gen)
	}
	bSynced := make(chan []byte, 1)
	go func() { bSynced <- b.sync(ctx) }()
	a.sync(ctx)
	if got := string(<-bSynced); got != "gen 2" {
		t.Fatalf("b's assignment %q", got)
	}
	if codes := e2etest.CommitOffsets(ctx, t, a.cl, "billing", a.id, a.gen, map[int32]int64{0: 2, 1: 5}); codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("commit: %v", codes)
	}

	// Over HTTP the Kafka group is the Queen group, with its lag.
	if row := httpGroup(ctx, t, n.URL(), "billing", "orders"); row.TotalLag != 3 || row.PartitionCursors != 2 || row.PartitionsWithLag != 1 {
		t.Fatalf("GET /api/v1/consumer-groups row: %+v", row)
	}

	// b dies silently; a keeps heartbeating and is told to rejoin once b's
	// session ends.
	if err := harness.Poll(ctx, 200*time.Millisecond, func() (bool, error) {
		return a.heartbeat(ctx) == kerr.RebalanceInProgress.Code, nil
	}); err != nil {
		t.Fatal("b's death never started a rebalance:", err)
	}
	if code := b.heartbeat(ctx); code != kerr.UnknownMemberID.Code {
		t.Fatalf("the evicted member's heartbeat: %v", kerr.ErrorForCode(code))
	}
	a.join(ctx)
	if a.gen != 3 || len(a.members) != 1 {
		t.Fatalf("after b's eviction: gen %d members %v", a.gen, a.members)
	}
	a.sync(ctx)
	if g := describeGroup(ctx, t, a.cl, "billing"); g.State != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID != a.id {
		t.Fatalf("describe: %+v", g)
	}

	// A new client reads what the old one committed; so does one after the
	// node restarts.
	if got := fetchOffsets(ctx, t, e2etest.KafkaClient(t, n), "billing", 3); fmt.Sprint(got) != "[2 5 -1]" {
		t.Fatalf("offsets seen by a new client: %v", got)
	}
	n.Stop()
	if err := c.Start(n); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	after := e2etest.KafkaClient(t, n)
	if got := fetchOffsets(ctx, t, after, "billing", 3); fmt.Sprint(got) != "[2 5 -1]" {
		t.Fatalf("offsets after a restart: %v", got)
	}
	// The group's membership is replicated too (docs/decisions.md): the
	// restarted coordinator continues it at the same generation, so the
	// member goes on heartbeating and committing without a rebalance.
	a.cl = after
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		return a.heartbeat(ctx) != kerr.CoordinatorLoadInProgress.Code, nil
	}); err != nil {
		t.Fatal(err)
	}
	if code := a.heartbeat(ctx); code != 0 {
		t.Fatalf("heartbeat of a member after its coordinator restarted: %v", kerr.ErrorForCode(code))
	}
	if codes := e2etest.CommitOffsets(ctx, t, after, "billing", a.id, a.gen, map[int32]int64{0: 3}); codes[0] != 0 {
		t.Fatalf("commit at the generation before the restart: %v", kerr.ErrorForCode(codes[0]))
	}
	if got := fetchOffsets(ctx, t, after, "billing", 3); fmt.Sprint(got) != "[3 5 -1]" {
		t.Fatalf("offsets after the commit: %v", got)
	}
}

// findCoordinator asks a node which node coordinates a consumer group,
// until the answer names a registered node.
func findCoordinator(ctx context.Context, t *testing.T, cl *kgo.Client, group string) *kmsg.FindCoordinatorResponse {
	t.Helper()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = group
	var r *kmsg.FindCoordinatorResponse
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		r = e2etest.KafkaRequest[*kmsg.FindCoordinatorResponse](ctx, t, cl, fc)
		return r.ErrorCode == 0, nil
	}); err != nil {
		t.Fatalf("find coordinator: %+v %v", r, err)
	}
	return r
}

// TestKafkaGroupCoordinatorIsTheRaftLeader runs a 3-node cluster: a
// consumer group is coordinated by the leader of the raft group its id
// hashes to, which every node names; the others answer NOT_COORDINATOR.
// When the coordinator is SIGKILLed the new one continues the group: the
// member it recorded at SyncGroup heartbeats and commits there at its
// generation, and every committed offset is there.
func TestKafkaGroupCoordinatorIsTheRaftLeader(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: e2etest.GroupEnv})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	pushOrders(ctx, t, c.Nodes[0].URL(), 3)
	e2etest.WaitBrokers(ctx, t, e2etest.KafkaClient(t, c.Nodes[0]), 3)
	r := findCoordinator(ctx, t, e2etest.KafkaClient(t, c.Nodes[0]), "billing")
	var coord *harness.Node
	for _, n := range c.Nodes {
		if int32(n.ID) == r.NodeID {
			coord = n
		}
	}
	if coord == nil || fmt.Sprintf("%s:%d", r.Host, r.Port) != coord.KafkaAddr {
		t.Fatalf("coordinator %+v is no node", r)
	}
	for _, n := range c.Nodes {
		cl := e2etest.KafkaClient(t, n)
		if got := findCoordinator(ctx, t, cl, "billing"); got.NodeID != r.NodeID {
			t.Fatalf("node %d names coordinator %d, node 1 names %d", n.ID, got.NodeID, r.NodeID)
		}
		if n == coord {
			continue
		}
		m := &rawMember{t: t, cl: cl, group: "billing"}
		if r := e2etest.KafkaRequest[*kmsg.JoinGroupResponse](ctx, t, cl, m.joinRequest()); r.ErrorCode != kerr.NotCoordinator.Code {
			t.Fatalf("join at non-coordinator %d: %v", n.ID, kerr.ErrorForCode(r.ErrorCode))
		}
		if codes := e2etest.CommitOffsets(ctx, t, cl, "billing", "", -1, map[int32]int64{0: 1}); codes[0] != kerr.NotCoordinator.Code {
			t.Fatalf("commit at non-coordinator %d: %v", n.ID, kerr.ErrorForCode(codes[0]))
		}
		lg := e2etest.KafkaRequest[*kmsg.ListGroupsResponse](ctx, t, cl, kmsg.NewPtrListGroupsRequest())
		if lg.ErrorCode != 0 || len(lg.Groups) != 0 {
			t.Fatalf("list groups at non-coordinator %d: %+v", n.ID, lg)
		}
	}
	cl := e2etest.KafkaClient(t, coord)
	a := &rawMember{t: t, cl: cl, group: "billing"}
	a.join(ctx)
	a.sync(ctx)
	if codes := e2etest.CommitOffsets(ctx, t, cl, "billing", a.id, a.gen, map[int32]int64{0: 4}); codes[0] != 0 {
		t.Fatalf("commit at the coordinator: %v", kerr.ErrorForCode(codes[0]))
	}

	coord.Kill()
	var survivor *harness.Node
	for _, n := range c.Nodes {
		if n != coord {
			survivor = n
		}
	}
	var next *harness.Node
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		got := findCoordinator(ctx, t, e2etest.KafkaClient(t, survivor), "billing")
		for _, n := range c.Nodes {
			if int32(n.ID) == got.NodeID && n != coord {
				next = n
			}
		}
		return next != nil, nil
	}); err != nil {
		t.Fatal("no new coordinator:", err)
	}
	a.cl = e2etest.KafkaClient(t, next)
	// The new coordinator may still be settling (NOT_COORDINATOR,
	// COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS): poll until
	// it answers for the group.
	var code int16
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		code = a.heartbeat(ctx)
		return code != kerr.NotCoordinator.Code && code != kerr.CoordinatorNotAvailable.Code &&
			code != kerr.CoordinatorLoadInProgress.Code, nil
	}); err != nil || code != 0 {
		t.Fatalf("heartbeat at the new coordinator: %v %v", kerr.ErrorForCode(code), err)
	}
	if got := fetchOffsets(ctx, t, a.cl, "billing", 3); fmt.Sprint(got) != "[4 -1 -1]" {
		t.Fatalf("offsets at the new coordinator: %v", got)
	}
	if codes := e2etest.CommitOffsets(ctx, t, a.cl, "billing", a.id, a.gen, map[int32]int64{0: 5}); codes[0] != 0 {
		t.Fatalf("commit at the new coordinator at generation %d: %v", a.gen, kerr.ErrorForCode(codes[0]))
	}
}
