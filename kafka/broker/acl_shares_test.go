package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestACLShareGroupsPerTopic: the share-group requests answer per topic
// under ACLs, as Kafka: eve (READ on a.*, not b.*; READ and DELETE on
// share group sg, nothing on g2) alters, describes and deletes sg's
// offsets of a.x while b.x answers TOPIC_AUTHORIZATION_FAILED and keeps
// the admin's offset; her share fetch acquires from a.x and answers b.x's
// partition the error, as does her acknowledgement, and goes on answering
// it for the session's partitions (a.x too once READ on it is denied);
// g2 refuses whole.
func TestACLShareGroupsPerTopic(t *testing.T) {
	eve, admin, adm := aclOffsetsNode(t)
	md, err := adm.Metadata(ctxFor(t), "a.x", "b.x")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string][16]byte{"a.x": md.Topics["a.x"].ID, "b.x": md.Topics["b.x"].ID}

	alter := func(group string, offset int64, topics ...string) *kmsg.AlterShareGroupOffsetsRequest {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = group
		for _, topic := range topics {
			req.Topics = append(req.Topics, kmsg.AlterShareGroupOffsetsRequestTopic{Topic: topic,
				Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: offset}}})
		}
		return req
	}
	if r := direct[*kmsg.AlterShareGroupOffsetsResponse](t, admin, alter("sg", 4, "b.x")); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("admin alter: %+v", r)
	}
	ar := direct[*kmsg.AlterShareGroupOffsetsResponse](t, eve, alter("sg", 2, "a.x", "b.x"))
	codes := partitionCodes(ar.Topics, func(t kmsg.AlterShareGroupOffsetsResponseTopic) string { return t.Topic },
		func(t kmsg.AlterShareGroupOffsetsResponseTopic) int16 { return t.Partitions[0].ErrorCode })
	if ar.ErrorCode != 0 || len(codes) != 2 || codes["a.x"] != 0 || codes["b.x"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("eve's alter: top %d, %v", ar.ErrorCode, codes)
	}
	if r := direct[*kmsg.AlterShareGroupOffsetsResponse](t, eve, alter("g2", 2, "a.x")); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("eve's alter of g2: %+v", r)
	}

	// describe answers each group's partitions: start offset and code.
	describe := func(named bool) map[string][2]int64 {
		t.Helper()
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		sg := kmsg.DescribeShareGroupOffsetsRequestGroup{GroupID: "sg"}
		if named {
			for _, topic := range []string{"a.x", "b.x"} {
				sg.Topics = append(sg.Topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: topic, Partitions: []int32{0}})
			}
		}
		req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{sg, {GroupID: "g2"}}
		r := direct[*kmsg.DescribeShareGroupOffsetsResponse](t, eve, req)
		out := map[string][2]int64{}
		for _, g := range r.Groups {
			if g.GroupID != "sg" {
				out[g.GroupID] = [2]int64{int64(len(g.Topics)), int64(g.ErrorCode)}
				continue
			}
			for _, rt := range g.Topics {
				out[rt.Topic] = [2]int64{rt.Partitions[0].StartOffset, int64(rt.Partitions[0].ErrorCode)}
			}
		}
		return out
	}
	refusedGroup := [2]int64{0, int64(kerr.GroupAuthorizationFailed.Code)}
	if got := describe(true); len(got) != 3 || got["a.x"] != [2]int64{2, 0} ||
		got["b.x"] != [2]int64{-1, int64(kerr.TopicAuthorizationFailed.Code)} || got["g2"] != refusedGroup {
		t.Fatalf("eve's describe: %v", got)
	}
	if got := describe(false); len(got) != 2 || got["a.x"] != [2]int64{2, 0} || got["g2"] != refusedGroup {
		t.Fatalf("eve's describe of every offset: %v", got)
	}

	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID, del.Topics = "sg", []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "a.x"}, {Topic: "b.x"}}
	dr := direct[*kmsg.DeleteShareGroupOffsetsResponse](t, eve, del)
	codes = partitionCodes(dr.Topics, func(t kmsg.DeleteShareGroupOffsetsResponseTopic) string { return t.Topic },
		func(t kmsg.DeleteShareGroupOffsetsResponseTopic) int16 { return t.ErrorCode })
	if dr.ErrorCode != 0 || len(codes) != 2 || codes["a.x"] != 0 || codes["b.x"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("eve's delete: top %d, %v", dr.ErrorCode, codes)
	}
	adesc := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	adesc.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "sg"}}
	if r := direct[*kmsg.DescribeShareGroupOffsetsResponse](t, admin, adesc); len(r.Groups[0].Topics) != 1 ||
		r.Groups[0].Topics[0].Topic != "b.x" || r.Groups[0].Topics[0].Partitions[0].StartOffset != 4 {
		t.Fatalf("sg's offsets after eve's delete: %+v", r.Groups[0].Topics)
	}
	del.GroupID = "g2"
	if r := direct[*kmsg.DeleteShareGroupOffsetsResponse](t, eve, del); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("eve's delete in g2: %+v", r)
	}

	// Share fetch and acknowledge: a.x served, b.x refused per partition.
	fetch := kmsg.NewPtrShareFetchRequest()
	fetch.GroupID, fetch.MemberID, fetch.MaxRecords, fetch.MaxWaitMillis = kmsg.StringPtr("sg"), kmsg.StringPtr("m1"), 100, 100
	for _, topic := range []string{"a.x", "b.x"} {
		fetch.Topics = append(fetch.Topics, kmsg.ShareFetchRequestTopic{TopicID: ids[topic],
			Partitions: []kmsg.ShareFetchRequestTopicPartition{kmsg.NewShareFetchRequestTopicPartition()}})
	}
	fr := direct[*kmsg.ShareFetchResponse](t, eve, fetch)
	parts := map[[16]byte]kmsg.ShareFetchResponseTopicPartition{}
	for _, rt := range fr.Topics {
		parts[rt.TopicID] = rt.Partitions[0]
	}
	if a, b := parts[ids["a.x"]], parts[ids["b.x"]]; fr.ErrorCode != 0 || len(parts) != 2 || a.ErrorCode != 0 || len(a.AcquiredRecords) == 0 ||
		b.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(b.AcquiredRecords) != 0 {
		t.Fatalf("eve's share fetch: top %d, %+v", fr.ErrorCode, parts)
	}
	first := parts[ids["a.x"]].AcquiredRecords[0].FirstOffset

	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = kmsg.StringPtr("sg"), kmsg.StringPtr("m1"), 1
	for _, topic := range []string{"a.x", "b.x"} {
		ap := kmsg.NewShareAcknowledgeRequestTopicPartition()
		ap.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: first, LastOffset: first, AcknowledgeTypes: []int8{ackAccept}}}
		ack.Topics = append(ack.Topics, kmsg.ShareAcknowledgeRequestTopic{TopicID: ids[topic], Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{ap}})
	}
	akr := direct[*kmsg.ShareAcknowledgeResponse](t, eve, ack)
	acodes := map[[16]byte]int16{}
	for _, rt := range akr.Topics {
		acodes[rt.TopicID] = rt.Partitions[0].ErrorCode
	}
	if akr.ErrorCode != 0 || len(acodes) != 2 || acodes[ids["a.x"]] != 0 || acodes[ids["b.x"]] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("eve's acknowledge: top %d, %v", akr.ErrorCode, acodes)
	}
	// The session's partitions are checked on every fetch, as Kafka: b.x
	// (in the session) answers its error again, and a.x too once a DENY
	// takes eve's READ away.
	sessionCodes := func(epoch int32) map[[16]byte]int16 {
		t.Helper()
		fetch.ShareSessionEpoch, fetch.Topics = epoch, nil
		fr := direct[*kmsg.ShareFetchResponse](t, eve, fetch)
		if fr.ErrorCode != 0 {
			t.Fatalf("eve's share fetch %d: %+v", epoch, fr)
		}
		out := map[[16]byte]int16{}
		for _, rt := range fr.Topics {
			out[rt.TopicID] = rt.Partitions[0].ErrorCode
		}
		return out
	}
	if got := sessionCodes(2); got[ids["b.x"]] != kerr.TopicAuthorizationFailed.Code || got[ids["a.x"]] != 0 {
		t.Fatalf("eve's next share fetch: %v", got)
	}
	mustCreateACLs(t, adm, kadm.NewACLs().Topics("a.x").Deny("User:eve").Operations(kadm.OpRead))
	if got := sessionCodes(3); got[ids["b.x"]] != kerr.TopicAuthorizationFailed.Code || got[ids["a.x"]] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("eve's share fetch after READ on a.x was denied: %v", got)
	}
	fetch.GroupID = kmsg.StringPtr("g2")
	if fr = direct[*kmsg.ShareFetchResponse](t, eve, fetch); fr.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("eve's share fetch in g2: %+v", fr)
	}
}
