package broker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

// groupsTestBroker is a one-node queen (startNode) and a franz-go client
// that sends raw requests to it.
type groupsTestBroker struct {
	t      *testing.T
	ctx    context.Context
	engine *raftgroups.Engine
	broker *Broker
	client *kgo.Client
}

func newGroupsTestBroker(t *testing.T) *groupsTestBroker {
	t.Helper()
	n := startNode(t, func(c *Config) {
		c.GroupMinSessionTimeout, c.GroupMaxSessionTimeout = 100*time.Millisecond, time.Minute
	})
	return &groupsTestBroker{t: t, ctx: ctxFor(t), engine: n.engine, broker: n.broker, client: n.client(kgo.ClientID("groups-test"))}
}

// groupReq sends a request to the broker and returns its typed response.
func groupReq[R kmsg.Response](tb *groupsTestBroker, r kmsg.Request) R {
	tb.t.Helper()
	resp, err := tb.client.SeedBrokers()[0].Request(tb.ctx, r)
	if err != nil {
		tb.t.Fatalf("%s: %v", kafka.KeyName(r.Key()), err)
	}
	return resp.(R)
}

// topic creates a Kafka topic with n records in each of its partitions.
func (tb *groupsTestBroker) topic(name string, partitions, n int) {
	tb.t.Helper()
	res, err := tb.engine.CreateTopic(tb.ctx, &wire.CreateTopicCmd{Tenant: wire.DefaultTenant, Name: name, Partitions: uint32(partitions)})
	if err != nil || res.Code != wire.CodeOK {
		tb.t.Fatalf("create %s: %v %v", name, err, res.Code)
	}
	for p := range partitions {
		var recs []byte
		for i := range n {
			recs = wire.AppendRecord(recs, &wire.Record{MsgID: wire.ID{0: byte(p), 1: byte(i), 15: 1}, Payload: []byte(strconv.Itoa(i))})
		}
		// A Kafka topic's partitions are named by their index.
		httpPush(tb.t, tb.engine, wire.PushCmd{Tenant: wire.DefaultTenant, Queue: name, Partition: strconv.Itoa(p),
			PartitionIndex: -1, Count: n, Records: recs})
	}
}

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

// join runs the v4 MEMBER_ID_REQUIRED round trip and the real join.
func (tb *groupsTestBroker) join(group string, topics ...string) *kmsg.JoinGroupResponse {
	tb.t.Helper()
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.Group, jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis, jr.ProtocolType = group, 10000, 10000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", consumerMeta(topics...)
	jr.Protocols = append(jr.Protocols, p)
	first := groupReq[*kmsg.JoinGroupResponse](tb, jr)
	if first.ErrorCode != kerr.MemberIDRequired.Code || first.MemberID == "" {
		tb.t.Fatalf("first join: %v, member %q", kerr.ErrorForCode(first.ErrorCode), first.MemberID)
	}
	jr.MemberID = first.MemberID
	return groupReq[*kmsg.JoinGroupResponse](tb, jr)
}

func (tb *groupsTestBroker) commit(group, member string, gen int32, topic string, offsets map[int32]int64) map[int32]int16 {
	tb.t.Helper()
	cr := kmsg.NewPtrOffsetCommitRequest()
	cr.Group, cr.MemberID, cr.Generation = group, member, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata = p, o, kmsg.StringPtr(fmt.Sprintf("m%d", p))
		rt.Partitions = append(rt.Partitions, rp)
	}
	cr.Topics = append(cr.Topics, rt)
	resp := groupReq[*kmsg.OffsetCommitResponse](tb, cr)
	out := map[int32]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.ErrorCode
		}
	}
	return out
}

// fetch returns the committed offsets of the topic's partitions (nil
// topics: every position the group has), by "topic/partition".
func (tb *groupsTestBroker) fetch(group string, topic string, partitions ...int32) map[string]int64 {
	tb.t.Helper()
	fr := kmsg.NewPtrOffsetFetchRequest()
	fr.Group = group
	if topic != "" {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, partitions
		fr.Topics = append(fr.Topics, rt)
	}
	resp := groupReq[*kmsg.OffsetFetchResponse](tb, fr)
	if resp.ErrorCode != 0 {
		tb.t.Fatalf("offset fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	out := map[string]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[fmt.Sprintf("%s/%d", t.Topic, p.Partition)] = p.Offset
		}
	}
	return out
}

func (tb *groupsTestBroker) offsetDelete(group, topic string, partition int32) (top, part int16) {
	tb.t.Helper()
	dr := kmsg.NewPtrOffsetDeleteRequest()
	dr.Group = group
	rt := kmsg.NewOffsetDeleteRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetDeleteRequestTopicPartition()
	rp.Partition = partition
	rt.Partitions = append(rt.Partitions, rp)
	dr.Topics = append(dr.Topics, rt)
	resp := groupReq[*kmsg.OffsetDeleteResponse](tb, dr)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, 0
	}
	return 0, resp.Topics[0].Partitions[0].ErrorCode
}

func (tb *groupsTestBroker) listGroups(states ...string) map[string]string {
	tb.t.Helper()
	lr := kmsg.NewPtrListGroupsRequest()
	lr.StatesFilter = states
	resp := groupReq[*kmsg.ListGroupsResponse](tb, lr)
	out := map[string]string{}
	for _, g := range resp.Groups {
		out[g.Group] = g.GroupState
	}
	return out
}

func TestGroupAPIsOverTheWire(t *testing.T) {
	tb := newGroupsTestBroker(t)
	tb.topic("t", 2, 5)
	// Commits, fetches and deletes of the group's offsets span raft groups.
	if g := raftGroupsOf(t, tb.engine, "t", 2); g[0] == g[1] {
		t.Fatalf("both partitions of t in raft group %d", g[0])
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	if r := groupReq[*kmsg.FindCoordinatorResponse](tb, fc); r.ErrorCode != 0 || r.NodeID != 1 ||
		net.JoinHostPort(r.Host, strconv.Itoa(int(r.Port))) != tb.broker.Addr() {
		t.Fatalf("find coordinator: %+v", r)
	}

	j := tb.join("g", "t")
	if j.ErrorCode != 0 || j.Generation != 1 || j.LeaderID != j.MemberID || len(j.Members) != 1 || *j.Protocol != "range" {
		t.Fatalf("join: %+v", j)
	}
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.MemberID, sr.Generation = "g", j.MemberID, j.Generation
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = j.MemberID, []byte("assignment")
	sr.GroupAssignment = append(sr.GroupAssignment, a)
	if s := groupReq[*kmsg.SyncGroupResponse](tb, sr); s.ErrorCode != 0 || string(s.MemberAssignment) != "assignment" {
		t.Fatalf("sync: %+v", s)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", j.MemberID, j.Generation
	if r := groupReq[*kmsg.HeartbeatResponse](tb, hb); r.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	codes := tb.commit("g", j.MemberID, j.Generation, "t", map[int32]int64{0: 3, 1: 5, 7: 1})
	if codes[0] != 0 || codes[1] != 0 || codes[7] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("commit codes: %v", codes)
	}
	if c := tb.commit("g", j.MemberID, j.Generation-1, "t", map[int32]int64{0: 4}); c[0] != kerr.IllegalGeneration.Code {
		t.Fatalf("commit of a stale generation: %v", kerr.ErrorForCode(c[0]))
	}
	if c := tb.commit("g", "stranger", j.Generation, "t", map[int32]int64{0: 4}); c[0] != kerr.UnknownMemberID.Code {
		t.Fatalf("commit of an unknown member: %v", kerr.ErrorForCode(c[0]))
	}
	if c := tb.commit("g", "", -1, "t", map[int32]int64{0: 4}); c[0] != kerr.UnknownMemberID.Code {
		t.Fatalf("admin commit to a live group: %v", kerr.ErrorForCode(c[0]))
	}
	want := map[string]int64{"t/0": 3, "t/1": 5, "t/2": -1}
	if got := tb.fetch("g", "t", 0, 1, 2); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fetch: %v, want %v", got, want)
	}
	delete(want, "t/2")
	if got := tb.fetch("g", ""); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fetch of every position: %v, want %v", got, want)
	}
	if top, part := tb.offsetDelete("g", "t", 0); top != 0 || part != kerr.GroupSubscribedToTopic.Code {
		t.Fatalf("offset delete of a subscribed topic: %v %v", kerr.ErrorForCode(top), kerr.ErrorForCode(part))
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"g", "nobody"}
	d := groupReq[*kmsg.DescribeGroupsResponse](tb, dg)
	if g := d.Groups[0]; g.State != "Stable" || g.Protocol != "range" || len(g.Members) != 1 ||
		string(g.Members[0].MemberAssignment) != "assignment" || g.Members[0].ClientID != "groups-test" {
		t.Fatalf("describe g: %+v", g)
	}
	if d.Groups[1].State != "Dead" {
		t.Fatalf("describe of an unknown group: %+v", d.Groups[1])
	}
	if got := tb.listGroups("stable"); got["g"] != "Stable" || len(got) != 1 {
		t.Fatalf("list of stable groups: %v", got)
	}
	// v5: every group is classic.
	for filter, want := range map[string]int{"Classic": 1, "consumer": 0} {
		lr := kmsg.NewPtrListGroupsRequest()
		lr.TypesFilter = []string{filter}
		r := groupReq[*kmsg.ListGroupsResponse](tb, lr)
		if len(r.Groups) != want || (want == 1 && r.Groups[0].GroupType != "classic") {
			t.Fatalf("list of %s groups: %+v", filter, r.Groups)
		}
	}

	if codes := tb.deleteGroups("g"); codes["g"] != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete of a live group: %v", kerr.ErrorForCode(codes["g"]))
	}

	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group = "g"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = j.MemberID
	lv.Members = append(lv.Members, lm)
	if r := groupReq[*kmsg.LeaveGroupResponse](tb, lv); r.ErrorCode != 0 || len(r.Members) != 1 || r.Members[0].ErrorCode != 0 {
		t.Fatalf("leave: %+v", r)
	}
	if got := tb.listGroups("Empty"); got["g"] != "Empty" {
		t.Fatalf("list of empty groups after the leave: %v", got)
	}
	if top, part := tb.offsetDelete("g", "t", 0); top != 0 || part != 0 {
		t.Fatalf("offset delete of an empty group: %v %v", kerr.ErrorForCode(top), kerr.ErrorForCode(part))
	}
	if got := tb.fetch("g", "t", 0, 1); got["t/0"] != -1 || got["t/1"] != 5 {
		t.Fatalf("fetch after the offset delete: %v", got)
	}
	if top, _ := tb.offsetDelete("nobody", "t", 0); top != kerr.GroupIDNotFound.Code {
		t.Fatalf("offset delete of an unknown group: %v", kerr.ErrorForCode(top))
	}
	// An admin commit (no member, generation -1) to the empty group.
	if c := tb.commit("g", "", -1, "t", map[int32]int64{0: 2}); c[0] != 0 {
		t.Fatalf("admin commit: %v", kerr.ErrorForCode(c[0]))
	}

	deleted := tb.deleteGroups("g", "nobody")
	if deleted["g"] != 0 || deleted["nobody"] != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete groups: %v", deleted)
	}
	if got := tb.fetch("g", "t", 0, 1); got["t/0"] != -1 || got["t/1"] != -1 {
		t.Fatalf("fetch after the group was deleted: %v", got)
	}
	if got := tb.listGroups(); len(got) != 0 {
		t.Fatalf("groups after the delete: %v", got)
	}
}

func (tb *groupsTestBroker) deleteGroups(names ...string) map[string]int16 {
	tb.t.Helper()
	dr := kmsg.NewPtrDeleteGroupsRequest()
	dr.Groups = names
	out := map[string]int16{}
	for _, g := range groupReq[*kmsg.DeleteGroupsResponse](tb, dr).Groups {
		out[g.Group] = g.ErrorCode
	}
	return out
}

func TestQueueModeGroupIsNoKafkaGroup(t *testing.T) {
	tb := newGroupsTestBroker(t)
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.Group, jr.SessionTimeoutMillis, jr.ProtocolType = wire.QueueModeGroup, 10000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	jr.Protocols = append(jr.Protocols, p)
	if r := groupReq[*kmsg.JoinGroupResponse](tb, jr); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("join of the queue-mode group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	tb.topic("t", 1, 1)
	if c := tb.commit(wire.QueueModeGroup, "", -1, "t", map[int32]int64{0: 1}); c[0] != kerr.InvalidGroupID.Code {
		t.Fatalf("commit to the queue-mode group: %v", kerr.ErrorForCode(c[0]))
	}
}
