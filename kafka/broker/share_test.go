package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka/broker/groups"
	"github.com/queen-mq/queen/wire"
)

func TestShareGroupMembership(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newShareGroups(10*time.Second, time.Second)
	s.now = func() time.Time { return now }
	a, b := [16]byte{1}, [16]byte{2}
	topics := []groups.TopicInfo{{Name: "a", ID: a, Partitions: 3}, {Name: "b", ID: b, Partitions: 1}}
	key := shareGroupKey{wire.DefaultTenant, "g"}

	if r := s.heartbeat(shareBeat{key: key, memberID: "m1"}, topics); r.err != kerr.InvalidRequest {
		t.Fatalf("join without a subscription: %+v", r)
	}
	r1 := s.heartbeat(shareBeat{key: key, memberID: "m1", subscribed: []string{"a"}}, topics)
	if r1.err != nil || r1.memberID != "m1" || r1.memberEpoch != 1 || !slices.Equal(r1.assignment[a], []int32{0, 1, 2}) || len(r1.assignment) != 1 {
		t.Fatalf("join: %+v", r1)
	}
	// A second member is assigned the same partitions: share groups hand
	// out records, not partitions.
	r2 := s.heartbeat(shareBeat{key: key, memberID: "m2", subscribed: []string{"a", "b"}}, topics)
	if r2.err != nil || len(r2.assignment[a]) != 3 || len(r2.assignment[b]) != 1 {
		t.Fatalf("second join: %+v", r2)
	}
	// An unchanged member gets no assignment back; a stale epoch is fenced.
	if r := s.heartbeat(shareBeat{key: key, memberID: "m1", memberEpoch: r1.memberEpoch}, topics); r.err != nil || r.assignment != nil || r.memberEpoch != r1.memberEpoch {
		t.Fatalf("steady heartbeat: %+v", r)
	}
	if r := s.heartbeat(shareBeat{key: key, memberID: "m1", memberEpoch: 7}, topics); r.err != kerr.FencedMemberEpoch {
		t.Fatalf("stale epoch: %+v", r)
	}
	if r := s.heartbeat(shareBeat{key: key, memberID: "nobody", memberEpoch: 1}, topics); r.err != kerr.UnknownMemberID {
		t.Fatalf("unknown member: %+v", r)
	}
	// A new partition changes the assignment, with a new epoch.
	topics[0].Partitions = 4
	r := s.heartbeat(shareBeat{key: key, memberID: "m1", memberEpoch: r1.memberEpoch}, topics)
	if r.err != nil || len(r.assignment[a]) != 4 || r.memberEpoch <= r1.memberEpoch {
		t.Fatalf("after growth: %+v", r)
	}
	// A group holds at most maxShareGroupMembers members.
	full := shareGroupKey{wire.DefaultTenant, "full"}
	for i := range maxShareGroupMembers {
		if r := s.heartbeat(shareBeat{key: full, memberID: fmt.Sprint(i), subscribed: []string{"a"}}, topics); r.err != nil {
			t.Fatalf("member %d: %+v", i, r)
		}
	}
	if r := s.heartbeat(shareBeat{key: full, memberID: "one-more", subscribed: []string{"a"}}, topics); r.err != kerr.GroupMaxSizeReached {
		t.Fatalf("past the size limit: %+v", r)
	}
	v, ok := s.describe(key)
	if !ok || len(v.members) != 2 || v.members[0].id != "m1" || !slices.Equal(v.members[1].subscribed, []string{"a", "b"}) {
		t.Fatalf("describe: %+v", v)
	}
	// m2 stops heartbeating and expires; m1 leaves; the group is gone.
	now = now.Add(11 * time.Second)
	if r := s.heartbeat(shareBeat{key: key, memberID: "m1", memberEpoch: leaveShareEpoch}, topics); r.err != kerr.UnknownMemberID {
		t.Fatalf("m1 outlived its session: %+v", r)
	}
	if _, ok := s.describe(key); ok {
		t.Fatal("an empty group is still described")
	}
	r = s.heartbeat(shareBeat{key: key, memberID: "m3", subscribed: []string{"b"}}, topics)
	if r = s.heartbeat(shareBeat{key: key, memberID: "m3", memberEpoch: leaveShareEpoch}, topics); r.err != nil || r.memberEpoch != leaveShareEpoch {
		t.Fatalf("leave: %+v", r)
	}
	if _, ok := s.describe(key); ok {
		t.Fatal("the group outlived its last member")
	}
}

func TestShareSessionEpochs(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newShareSessions()
	s.now = func() time.Time { return now }
	k := shareSessionKey{wire.DefaultTenant, "g", "m"}
	if _, err := s.begin(k, 1, true); err != kerr.ShareSessionNotFound {
		t.Fatalf("no session: %v", err)
	}
	if _, err := s.begin(k, 0, false); err != kerr.InvalidShareSessionEpoch {
		t.Fatalf("ShareAcknowledge opening a session: %v", err)
	}
	if _, err := s.begin(k, 0, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.begin(k, 2, true); err != kerr.InvalidShareSessionEpoch {
		t.Fatalf("skipped epoch: %v", err)
	}
	for e := int32(1); e <= 3; e++ {
		if _, err := s.begin(k, e, e%2 == 0); err != nil {
			t.Fatalf("epoch %d: %v", e, err)
		}
	}
	if _, err := s.begin(k, -1, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.begin(k, 4, true); err != kerr.ShareSessionNotFound {
		t.Fatalf("after close: %v", err)
	}
}

func TestShareSessionsAreBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newShareSessions()
	s.now = func() time.Time { return now }
	for i := range maxShareSessions {
		if _, err := s.begin(shareSessionKey{wire.DefaultTenant, "g", string(rune(i))}, 0, true); err != nil {
			t.Fatal(err)
		}
	}
	extra := shareSessionKey{wire.DefaultTenant, "g", "extra"}
	if _, err := s.begin(extra, 0, true); err != kerr.ShareSessionLimitReached {
		t.Fatalf("past the limit: %v", err)
	}
	now = now.Add(shareSessionIdle)
	if _, err := s.begin(extra, 0, true); err != nil || len(s.m) != maxShareSessions {
		t.Fatalf("an idle session was not replaced: %v (%d sessions)", err, len(s.m))
	}
}

func TestShareAckStatuses(t *testing.T) {
	got, renew, err := shareAckStatuses([]shareAckBatch{
		{0, 2, []int8{ackAccept}},
		{3, 6, []int8{ackRelease, ackReject, ackGap, ackRenew}},
	})
	want := []offsetStatus{{0, wire.AckCompleted}, {1, wire.AckCompleted}, {2, wire.AckCompleted},
		{3, wire.AckFailed}, {4, wire.AckDLQ}, {5, wire.AckCompleted}}
	if err != nil || !renew || !slices.Equal(got, want) {
		t.Fatalf("got %v %v %v", got, renew, err)
	}
	for _, bad := range [][]shareAckBatch{
		{{2, 1, []int8{ackAccept}}},                    // empty range
		{{0, 2, []int8{ackAccept, ackAccept}}},         // types neither one nor one per offset
		{{3, 4, []int8{ackAccept}}, {4, 5, []int8{1}}}, // overlapping
		{{0, 0, []int8{9}}},                            // unknown type
		{{0, maxShareAckOffsets, []int8{ackAccept}}},   // too many offsets
		{{-1, 0, []int8{ackAccept}}},                   // negative offset
	} {
		if _, _, err := shareAckStatuses(bad); err != kerr.InvalidRequest {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// TestShareGroupOverTheWire drives the four share keys by hand: a member
// joins and is described, acquires a partition's records, accepts some
// and releases one piggy-backed on its next fetch, accepts the rest with
// ShareAcknowledge, and gets the released record again with delivery
// count 2.
func TestShareGroupOverTheWire(t *testing.T) {
	tb := newGroupsTestBroker(t)
	tb.topic("jobs", 1, 5)
	id := topicIDByName(t, tb, "jobs")

	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "workers", "m1", []string{"jobs"}
	join := groupReq[*kmsg.ShareGroupHeartbeatResponse](tb, hb)
	if join.ErrorCode != 0 || join.MemberEpoch != 1 || join.Assignment == nil || len(join.Assignment.TopicPartitions) != 1 ||
		join.Assignment.TopicPartitions[0].TopicID != id || !slices.Equal(join.Assignment.TopicPartitions[0].Partitions, []int32{0}) {
		t.Fatalf("join: %+v", join)
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.TypesFilter = []string{"share"}
	if l := groupReq[*kmsg.ListGroupsResponse](tb, lg); len(l.Groups) != 1 || l.Groups[0].Group != "workers" || l.Groups[0].GroupType != "share" {
		t.Fatalf("list of share groups: %+v", l.Groups)
	}
	d := kmsg.NewPtrShareGroupDescribeRequest()
	d.GroupIDs = []string{"workers", "nobody"}
	desc := groupReq[*kmsg.ShareGroupDescribeResponse](tb, d)
	if g := desc.Groups[0]; g.ErrorCode != 0 || g.GroupState != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID != "m1" ||
		g.Members[0].Assignment.TopicPartitions[0].Topic != "jobs" {
		t.Fatalf("describe: %+v", desc.Groups[0])
	}
	if desc.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe of an unknown group: %+v", desc.Groups[1])
	}

	member := "m1"
	fetch := func(epoch int32, withPartition bool, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
		t.Helper()
		f := kmsg.NewPtrShareFetchRequest()
		f.GroupID, f.MemberID, f.ShareSessionEpoch, f.MaxRecords, f.MaxWaitMillis = kmsg.StringPtr("workers"), kmsg.StringPtr(member), epoch, 100, 2000
		if withPartition || len(acks) > 0 {
			p := kmsg.NewShareFetchRequestTopicPartition()
			p.AcknowledgementBatches = acks
			f.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: id, Partitions: []kmsg.ShareFetchRequestTopicPartition{p}}}
		}
		return groupReq[*kmsg.ShareFetchResponse](tb, f)
	}
	first := fetch(0, true)
	if first.ErrorCode != 0 || first.AcquisitionLockTimeoutMillis != 30000 || len(first.Topics) != 1 {
		t.Fatalf("first fetch: %+v", first)
	}
	p := first.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.AcquiredRecords) != 1 || p.AcquiredRecords[0].FirstOffset != 0 || p.AcquiredRecords[0].LastOffset != 4 ||
		p.AcquiredRecords[0].DeliveryCount != 1 ||
		len(p.Records) == 0 {
		t.Fatalf("first fetch's partition: %+v", p)
	}
	// The lease holds every record: a fetch now acquires nothing, and
	// carries acknowledgements: accept 0-1, release 2.
	second := fetch(1, false,
		kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: 0, LastOffset: 2, AcknowledgeTypes: []int8{ackAccept, ackAccept, ackRelease}})
	if second.ErrorCode != 0 || len(second.Topics) != 1 || second.Topics[0].Partitions[0].AcknowledgeErrorCode != 0 ||
		len(second.Topics[0].Partitions[0].AcquiredRecords) != 0 {
		t.Fatalf("second fetch: %+v", second)
	}
	a := kmsg.NewPtrShareAcknowledgeRequest()
	a.GroupID, a.MemberID, a.ShareSessionEpoch = kmsg.StringPtr("workers"), kmsg.StringPtr("m1"), 2
	ap := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ap.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 3, LastOffset: 4, AcknowledgeTypes: []int8{ackAccept}}}
	a.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: id, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{ap}}}
	if ack := groupReq[*kmsg.ShareAcknowledgeResponse](tb, a); ack.ErrorCode != 0 || ack.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("acknowledge: %+v", ack)
	}
	// The released record comes back (after the queue's retry delay),
	// with the records after it in its acquisition, as for HTTP.
	var again *kmsg.ShareFetchResponse
	epoch := int32(3)
	for until := time.Now().Add(testWait); ; {
		again = fetch(epoch, false)
		epoch++
		if len(again.Topics) > 0 && len(again.Topics[0].Partitions[0].AcquiredRecords) > 0 {
			break
		}
		if time.Now().After(until) {
			t.Fatalf("the released record never came back: %+v", again)
		}
	}
	if r := again.Topics[0].Partitions[0].AcquiredRecords[0]; r.FirstOffset != 2 || r.DeliveryCount != 2 {
		t.Fatalf("redelivery: %+v", again.Topics[0].Partitions[0].AcquiredRecords)
	}
	// Closing the session releases what it holds: another member
	// acquires those records at once, not after the 30 s lock.
	closing := kmsg.NewPtrShareAcknowledgeRequest()
	closing.GroupID, closing.MemberID, closing.ShareSessionEpoch = kmsg.StringPtr("workers"), kmsg.StringPtr("m1"), -1
	if r := groupReq[*kmsg.ShareAcknowledgeResponse](tb, closing); r.ErrorCode != 0 {
		t.Fatalf("close: %+v", r)
	}
	member = "m2"
	var taken *kmsg.ShareFetchResponse
	for e, until := int32(0), time.Now().Add(testWait); ; e++ {
		taken = fetch(e, e == 0)
		if len(taken.Topics) > 0 && len(taken.Topics[0].Partitions[0].AcquiredRecords) > 0 {
			break
		}
		if time.Now().After(until) {
			t.Fatalf("the closed session's records were not released: %+v", taken)
		}
	}
	if r := taken.Topics[0].Partitions[0].AcquiredRecords[0]; r.FirstOffset != 2 {
		t.Fatalf("after the release: %+v", taken.Topics[0].Partitions[0].AcquiredRecords)
	}
	member = "m1"
	if r := fetch(epoch, false); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("a closed session: %+v", r)
	}
	// A stale epoch is refused; the queue-mode group is no share group.
	member = "m2"
	if r := fetch(0, false); r.ErrorCode != 0 {
		t.Fatalf("a new session: %+v", r)
	}
	if r := fetch(5, false); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("stale epoch: %+v", r)
	}
	q := kmsg.NewPtrShareFetchRequest()
	q.GroupID, q.MemberID = kmsg.StringPtr(wire.QueueModeGroup), kmsg.StringPtr("m1")
	if r := groupReq[*kmsg.ShareFetchResponse](tb, q); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("queue-mode group: %+v", r)
	}
}

// topicIDByName is the topic id Metadata reports for name.
func topicIDByName(t *testing.T, tb *groupsTestBroker, name string) [16]byte {
	t.Helper()
	for _, ti := range topicInfos(tb.engine, wire.DefaultTenant) {
		if ti.Name == name {
			return ti.ID
		}
	}
	t.Fatalf("no topic %s", name)
	return [16]byte{}
}

// TestGroupConfigs: a share group's configs are set with
// IncrementalAlterConfigs on a GROUP resource, described, refused when
// unknown or out of range, and change what its fetches answer.
func TestGroupConfigs(t *testing.T) {
	tb := newGroupsTestBroker(t)
	alter := func(name, value string) int16 {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "workers"
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = name, kmsg.StringPtr(value)
		r.Configs = append(r.Configs, c)
		req.Resources = append(req.Resources, r)
		return groupReq[*kmsg.IncrementalAlterConfigsResponse](tb, req).Resources[0].ErrorCode
	}
	if code := alter("share.record.lock.duration.ms", "15000"); code != 0 {
		t.Fatalf("set: %d", code)
	}
	if code := alter("share.auto.offset.reset", "latest"); code != 0 {
		t.Fatalf("set: %d", code)
	}
	for _, bad := range [][2]string{{"share.record.lock.duration.ms", "5"}, {"share.auto.offset.reset", "middle"}, {"no.such.config", "1"}} {
		if code := alter(bad[0], bad[1]); code != kerr.InvalidConfig.Code {
			t.Errorf("%s=%s: %d", bad[0], bad[1], code)
		}
	}
	d := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "workers"
	d.Resources = append(d.Resources, dr)
	got := map[string]string{}
	for _, c := range groupReq[*kmsg.DescribeConfigsResponse](tb, d).Resources[0].Configs {
		got[c.Name] = *c.Value
	}
	if got["share.record.lock.duration.ms"] != "15000" || got["share.auto.offset.reset"] != "latest" {
		t.Fatalf("described: %v", got)
	}
	set := tb.broker.shareSettings(wire.DefaultTenant, "workers")
	if set.lock != 15*time.Second || set.subMode != wire.SubNew {
		t.Fatalf("settings: %+v", set)
	}
	if set := tb.broker.shareSettings(wire.DefaultTenant, "other"); set.lock != shareLockTimeout || set.subMode != wire.SubAll {
		t.Fatalf("defaults: %+v", set)
	}
	// Deleting the group (it has only configs) deletes its configs.
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"workers"}
	if r := groupReq[*kmsg.DeleteGroupsResponse](tb, del); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete: %+v", r)
	}
	if set := tb.broker.shareSettings(wire.DefaultTenant, "workers"); set.lock != shareLockTimeout {
		t.Fatalf("configs outlived their group: %+v", set)
	}
	if r := groupReq[*kmsg.DeleteGroupsResponse](tb, del); r.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("second delete: %+v", r)
	}
}

// TestShareGroupOffsetsAdmin: a share group's start offset is the Queen
// group's position; it is set, described (with its lag) and deleted, and
// not altered while a share consumer is a member.
func TestShareGroupOffsetsAdmin(t *testing.T) {
	tb := newGroupsTestBroker(t)
	tb.topic("jobs", 2, 5)
	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.GroupID = "workers"
	alter.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "jobs", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 1, StartOffset: 3}}}}
	if r := groupReq[*kmsg.AlterShareGroupOffsetsResponse](tb, alter); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("alter: %+v", r)
	}
	describe := func(topics []kmsg.DescribeShareGroupOffsetsRequestGroupTopic) map[int32][2]int64 {
		t.Helper()
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "workers", Topics: topics}}
		out := map[int32][2]int64{}
		for _, rt := range groupReq[*kmsg.DescribeShareGroupOffsetsResponse](tb, req).Groups[0].Topics {
			for _, p := range rt.Partitions {
				out[p.Partition] = [2]int64{p.StartOffset, p.Lag}
			}
		}
		return out
	}
	named := []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "jobs", Partitions: []int32{0, 1}}}
	if got := describe(named); got[0] != [2]int64{-1, -1} || got[1] != [2]int64{3, 2} {
		t.Fatalf("describe: %v", got)
	}
	if got := describe(nil); len(got) != 1 || got[1] != [2]int64{3, 2} {
		t.Fatalf("describe of every position: %v", got)
	}
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID, del.Topics = "workers", []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "jobs"}, {Topic: "nope"}}
	r := groupReq[*kmsg.DeleteShareGroupOffsetsResponse](tb, del)
	if r.ErrorCode != 0 || r.Topics[0].ErrorCode != 0 || r.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("delete: %+v", r)
	}
	if got := describe(named); got[1] != [2]int64{-1, -1} {
		t.Fatalf("after delete: %v", got)
	}
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "workers", "m1", []string{"jobs"}
	groupReq[*kmsg.ShareGroupHeartbeatResponse](tb, hb)
	if r := groupReq[*kmsg.AlterShareGroupOffsetsResponse](tb, alter); r.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("alter with a member: %+v", r)
	}
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"workers"}
	if r := groupReq[*kmsg.DeleteGroupsResponse](tb, dg); r.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete with a member: %+v", r)
	}
}
