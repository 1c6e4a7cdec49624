package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// staticJoin joins group as the static member instance (no
// MEMBER_ID_REQUIRED round trip for static members) at JoinGroup version v.
func (tb *groupsTestBroker) staticJoin(group, instance, member string, v int16) *kmsg.JoinGroupResponse {
	tb.t.Helper()
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.Version = v
	jr.Group, jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis, jr.ProtocolType = group, 10000, 10000, "consumer"
	jr.MemberID, jr.InstanceID = member, kmsg.StringPtr(instance)
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", consumerMeta("t")
	jr.Protocols = append(jr.Protocols, p)
	return groupReq[*kmsg.JoinGroupResponse](tb, jr)
}

// TestStaticMembershipOverTheWire: a static member joins with its
// instance id, restarts (joins again without a member id) and is back at
// the same generation with its assignment; its old member id is fenced on
// Heartbeat, SyncGroup and OffsetCommit; DescribeGroups shows the instance
// id; LeaveGroup v3+ removes it by instance id alone.
func TestStaticMembershipOverTheWire(t *testing.T) {
	tb := newGroupsTestBroker(t)
	tb.topic("t", 1, 1)
	j := tb.staticJoin("sg", "inst-1", "", 9)
	if j.ErrorCode != 0 || !strings.HasPrefix(j.MemberID, "inst-1-") || j.LeaderID != j.MemberID || len(j.Members) != 1 ||
		j.Members[0].InstanceID == nil || *j.Members[0].InstanceID != "inst-1" {
		t.Fatalf("static join: %+v", j)
	}
	sync := func(member string, assign bool) *kmsg.SyncGroupResponse {
		sr := kmsg.NewPtrSyncGroupRequest()
		sr.Group, sr.MemberID, sr.InstanceID, sr.Generation = "sg", member, kmsg.StringPtr("inst-1"), j.Generation
		sr.ProtocolType, sr.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
		if assign {
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID, a.MemberAssignment = member, []byte("mine")
			sr.GroupAssignment = append(sr.GroupAssignment, a)
		}
		return groupReq[*kmsg.SyncGroupResponse](tb, sr)
	}
	if s := sync(j.MemberID, true); s.ErrorCode != 0 || string(s.MemberAssignment) != "mine" {
		t.Fatalf("sync: %+v", s)
	}

	again := tb.staticJoin("sg", "inst-1", "", 9)
	if again.ErrorCode != 0 || again.Generation != j.Generation || again.MemberID == j.MemberID ||
		again.LeaderID != again.MemberID || !again.SkipAssignment {
		t.Fatalf("static rejoin: %+v", again)
	}
	if s := sync(again.MemberID, false); s.ErrorCode != 0 || string(s.MemberAssignment) != "mine" {
		t.Fatalf("sync after the rejoin: %+v", s)
	}

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.InstanceID, hb.Generation = "sg", j.MemberID, kmsg.StringPtr("inst-1"), j.Generation
	if r := groupReq[*kmsg.HeartbeatResponse](tb, hb); r.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("old incarnation's heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if s := sync(j.MemberID, false); s.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("old incarnation's sync: %v", kerr.ErrorForCode(s.ErrorCode))
	}
	cr := kmsg.NewPtrOffsetCommitRequest()
	cr.Group, cr.MemberID, cr.InstanceID, cr.Generation = "sg", j.MemberID, kmsg.StringPtr("inst-1"), j.Generation
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset = 1
	rt.Partitions = append(rt.Partitions, rp)
	cr.Topics = append(cr.Topics, rt)
	if r := groupReq[*kmsg.OffsetCommitResponse](tb, cr); r.Topics[0].Partitions[0].ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("old incarnation's commit: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	cr.MemberID = again.MemberID
	if r := groupReq[*kmsg.OffsetCommitResponse](tb, cr); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("new incarnation's commit: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"sg"}
	d := groupReq[*kmsg.DescribeGroupsResponse](tb, dg).Groups[0]
	if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != again.MemberID ||
		d.Members[0].InstanceID == nil || *d.Members[0].InstanceID != "inst-1" {
		t.Fatalf("describe: %+v", d)
	}

	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group = "sg"
	for _, inst := range []string{"inst-1", "inst-2"} {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.InstanceID = kmsg.StringPtr(inst)
		lv.Members = append(lv.Members, lm)
	}
	l := groupReq[*kmsg.LeaveGroupResponse](tb, lv)
	if l.ErrorCode != 0 || len(l.Members) != 2 || l.Members[0].ErrorCode != 0 || l.Members[1].ErrorCode != kerr.UnknownMemberID.Code ||
		*l.Members[0].InstanceID != "inst-1" {
		t.Fatalf("leave by instance id: %+v", l)
	}
	if got := tb.listGroups("Empty"); got["sg"] != "Empty" {
		t.Fatalf("groups after the leave: %v", got)
	}
}
