package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group and transaction requests that name topics answer per topic
// under ACLs, as Kafka's KafkaApis: the group (transactional id) refuses
// whole, a refused topic's partitions answer TOPIC_AUTHORIZATION_FAILED
// and the allowed ones are served.

// aclOffsetsNode is an ACL node with topics a.x and b.x, where User:eve
// may READ and WRITE a.* (not b.*), READ and DELETE group g (not g2),
// and WRITE transactional id tx (not tx2); and eve's client.
func aclOffsetsNode(t *testing.T) (eve, admin *kgo.Client, adm *kadm.Client) {
	t.Helper()
	n := startACLNode(t)
	admin = loginAs(n, "admin", "x")
	adm = kadm.NewClient(admin)
	if _, err := adm.CreateTopics(ctxFor(t), 1, 1, nil, "a.x", "b.x"); err != nil {
		t.Fatal(err)
	}
	// Records to commit positions in (a position is never past the end).
	for _, topic := range []string{"a.x", "b.x"} {
		for range 10 {
			if err := admin.ProduceSync(ctxFor(t), &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustCreateACLs(t, adm, kadm.NewACLs().Topics("a.").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:eve").Operations(kadm.OpRead, kadm.OpWrite))
	mustCreateACLs(t, adm, kadm.NewACLs().Groups("g", "sg").Allow("User:eve").Operations(kadm.OpRead, kadm.OpDelete))
	mustCreateACLs(t, adm, kadm.NewACLs().TransactionalIDs("tx").Allow("User:eve").Operations(kadm.OpWrite))
	return loginAs(n, "eve", "x"), admin, adm
}

// partitionCodes is each topic's partition 0 code of a response's topics.
func partitionCodes[T any](topics []T, name func(T) string, code func(T) int16) map[string]int16 {
	out := map[string]int16{}
	for _, t := range topics {
		out[name(t)] = code(t)
	}
	return out
}

func commitReq(group string, offset int64, topics ...string) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	for _, topic := range topics {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func fetchReq(group string, topics ...string) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	for _, topic := range topics {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// TestACLOffsetCommitAndFetchPerTopic: eve commits a.x and b.x in one
// OffsetCommit: a.x is committed, b.x answers TOPIC_AUTHORIZATION_FAILED
// (and keeps the admin's offset); her OffsetFetch answers a.x's offset and
// b.x's error without its offset, and listing all leaves b.x out; group
// g2 refuses both whole.
func TestACLOffsetCommitAndFetchPerTopic(t *testing.T) {
	eve, admin, adm := aclOffsetsNode(t)
	ctx := ctxFor(t)
	if resp := direct[*kmsg.OffsetCommitResponse](t, admin, commitReq("g", 7, "b.x")); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("admin commit: %+v", resp)
	}

	resp := direct[*kmsg.OffsetCommitResponse](t, eve, commitReq("g", 3, "a.x", "b.x"))
	codes := partitionCodes(resp.Topics, func(t kmsg.OffsetCommitResponseTopic) string { return t.Topic },
		func(t kmsg.OffsetCommitResponseTopic) int16 { return t.Partitions[0].ErrorCode })
	if len(codes) != 2 || codes["a.x"] != 0 || codes["b.x"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("eve's commit: %v", codes)
	}
	offs, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := offs.Lookup("a.x", 0); a.At != 3 {
		t.Fatalf("a.x committed at %d, want 3", a.At)
	}
	if b, _ := offs.Lookup("b.x", 0); b.At != 7 {
		t.Fatalf("b.x at %d, want the admin's 7", b.At)
	}

	// Only refused topics: nothing committed, each answers its error.
	resp = direct[*kmsg.OffsetCommitResponse](t, eve, commitReq("g", 9, "b.x"))
	if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("eve's commit of b.x alone: %+v", resp)
	}
	// A group she may not read: every partition the group's error.
	resp = direct[*kmsg.OffsetCommitResponse](t, eve, commitReq("g2", 3, "a.x", "b.x"))
	for _, rt := range resp.Topics {
		if rt.Partitions[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
			t.Fatalf("eve's commit to g2: %+v", resp.Topics)
		}
	}

	fresp := direct[*kmsg.OffsetFetchResponse](t, eve, fetchReq("g", "a.x", "b.x"))
	got := map[string]kmsg.OffsetFetchResponseTopicPartition{}
	for _, rt := range fresp.Topics {
		got[rt.Topic] = rt.Partitions[0]
	}
	if a, b := got["a.x"], got["b.x"]; fresp.ErrorCode != 0 || len(got) != 2 || a.ErrorCode != 0 || a.Offset != 3 ||
		b.ErrorCode != kerr.TopicAuthorizationFailed.Code || b.Offset != -1 {
		t.Fatalf("eve's offset fetch: top %d, %+v", fresp.ErrorCode, got)
	}
	all := fetchReq("g")
	all.Topics = nil
	fresp = direct[*kmsg.OffsetFetchResponse](t, eve, all)
	if fresp.ErrorCode != 0 || len(fresp.Topics) != 1 || fresp.Topics[0].Topic != "a.x" || fresp.Topics[0].Partitions[0].Offset != 3 {
		t.Fatalf("eve's fetch of every offset: %+v", fresp)
	}
	fresp = direct[*kmsg.OffsetFetchResponse](t, eve, fetchReq("g2", "a.x"))
	if fresp.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("eve's fetch of g2: %+v", fresp)
	}
}

// TestACLOffsetDeletePerTopic: eve deletes g's offsets of a.x and b.x:
// a.x's go, b.x answers TOPIC_AUTHORIZATION_FAILED and keeps its offset;
// g2 (no DELETE) is refused whole.
func TestACLOffsetDeletePerTopic(t *testing.T) {
	eve, admin, adm := aclOffsetsNode(t)
	ctx := ctxFor(t)
	if resp := direct[*kmsg.OffsetCommitResponse](t, admin, commitReq("g", 5, "a.x", "b.x")); resp.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("admin commit: %+v", resp)
	}
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	for _, topic := range []string{"a.x", "b.x"} {
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
		req.Topics = append(req.Topics, rt)
	}
	resp := direct[*kmsg.OffsetDeleteResponse](t, eve, req)
	codes := partitionCodes(resp.Topics, func(t kmsg.OffsetDeleteResponseTopic) string { return t.Topic },
		func(t kmsg.OffsetDeleteResponseTopic) int16 { return t.Partitions[0].ErrorCode })
	if resp.ErrorCode != 0 || len(codes) != 2 || codes["a.x"] != 0 || codes["b.x"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("eve's offset delete: top %d, %v", resp.ErrorCode, codes)
	}
	offs, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := offs.Lookup("a.x", 0); ok {
		t.Fatal("a.x's offset was not deleted")
	}
	if b, _ := offs.Lookup("b.x", 0); b.At != 5 {
		t.Fatalf("b.x at %d, want 5", b.At)
	}
	req.Group = "g2"
	if resp = direct[*kmsg.OffsetDeleteResponse](t, eve, req); resp.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("eve's offset delete in g2: %+v", resp)
	}
}

// TestACLTransactionsPerTopic: AddPartitionsToTxn naming a refused topic
// adds nothing (b.x TOPIC_AUTHORIZATION_FAILED, a.x
// OPERATION_NOT_ATTEMPTED) and tx2 refuses every partition; a
// TxnOffsetCommit stages a.x and answers b.x TOPIC_AUTHORIZATION_FAILED,
// and is refused whole for tx2 or group g2.
func TestACLTransactionsPerTopic(t *testing.T) {
	eve, _, _ := aclOffsetsNode(t)
	ctx := ctxFor(t)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("tx"), 60000
	ir, err := init.RequestWith(ctx, eve)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %+v", err, ir)
	}

	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version = 3
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = "tx", ir.ProducerID, ir.ProducerEpoch
	for _, topic := range []string{"a.x", "b.x"} {
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		add.Topics = append(add.Topics, rt)
	}
	aresp := direct[*kmsg.AddPartitionsToTxnResponse](t, eve, add)
	codes := partitionCodes(aresp.Topics, func(t kmsg.AddPartitionsToTxnResponseTopic) string { return t.Topic },
		func(t kmsg.AddPartitionsToTxnResponseTopic) int16 { return t.Partitions[0].ErrorCode })
	if len(codes) != 2 || codes["a.x"] != kerr.OperationNotAttempted.Code || codes["b.x"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("add partitions: %v", codes)
	}
	add.TransactionalID = "tx2"
	aresp = direct[*kmsg.AddPartitionsToTxnResponse](t, eve, add)
	for _, rt := range aresp.Topics {
		if rt.Partitions[0].ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
			t.Fatalf("add partitions to tx2: %+v", aresp.Topics)
		}
	}
	add.TransactionalID, add.Topics = "tx", add.Topics[:1]
	if aresp = direct[*kmsg.AddPartitionsToTxnResponse](t, eve, add); aresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("add a.x alone: %+v", aresp.Topics)
	}

	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "tx", ir.ProducerID, ir.ProducerEpoch, "g"
	if aor, err := ao.RequestWith(ctx, eve); err != nil || aor.ErrorCode != 0 {
		t.Fatalf("add offsets: %v %+v", err, aor)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group = "tx", "g"
	commit.ProducerID, commit.ProducerEpoch, commit.Generation = ir.ProducerID, ir.ProducerEpoch, -1
	for _, topic := range []string{"a.x", "b.x"} {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Offset = 1
		rt.Partitions = append(rt.Partitions, rp)
		commit.Topics = append(commit.Topics, rt)
	}
	cresp := direct[*kmsg.TxnOffsetCommitResponse](t, eve, commit)
	codes = partitionCodes(cresp.Topics, func(t kmsg.TxnOffsetCommitResponseTopic) string { return t.Topic },
		func(t kmsg.TxnOffsetCommitResponseTopic) int16 { return t.Partitions[0].ErrorCode })
	if len(codes) != 2 || codes["a.x"] != 0 || codes["b.x"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("txn offset commit: %v", codes)
	}
	for _, c := range []struct{ txn, group string }{{"tx2", "g"}, {"tx", "g2"}} {
		commit.TransactionalID, commit.Group = c.txn, c.group
		want := kerr.TransactionalIDAuthorizationFailed.Code
		if c.group == "g2" {
			want = kerr.GroupAuthorizationFailed.Code
		}
		cresp = direct[*kmsg.TxnOffsetCommitResponse](t, eve, commit)
		for _, rt := range cresp.Topics {
			if rt.Partitions[0].ErrorCode != want {
				t.Fatalf("txn offset commit %s/%s: %+v", c.txn, c.group, cresp.Topics)
			}
		}
	}
}
