package kafka

import (
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// TestACLOffsetsPerTopic: on a real node with QUEEN_ACLS=true, a
// franz-go client whose principal may READ the topics prefixed a. (and
// nothing of b.) commits offsets for a.orders and b.orders in one
// OffsetCommit: a.orders is committed, b.orders answers
// TOPIC_AUTHORIZATION_FAILED and keeps root's offset, as Kafka answers.
// Fetching them likewise: a.orders's offset, b.orders's error without its
// offset, and listing every offset of the group leaves b.orders out.
func TestACLOffsetsPerTopic(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: aclEnv()})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	base := c.Nodes[0].URL()
	root, carol := jwtOf(t, "root", "admin"), jwtOf(t, "carol", "read-write")
	for _, q := range []string{"a.orders", "b.orders"} {
		body := `{"items":[{"queue":"` + q + `","payload":1},{"queue":"` + q + `","payload":2},{"queue":"` + q + `","payload":3}]}`
		if code, resp := httpAs(ctx, t, "POST", base+"/api/v1/push", root, body); code != http.StatusCreated {
			t.Fatalf("root push %s: %d %s", q, code, resp)
		}
	}
	createACLs(ctx, t, base, root,
		aclBinding("topic", "a.", "prefixed", "User:carol", "read", "allow"),
		aclBinding("group", "cg", "literal", "User:carol", "read", "allow"),
	)
	rootAdm := kadm.NewClient(kafkaAs(t, c, root))
	rootOffs := kadm.Offsets{}
	rootOffs.AddOffset("b.orders", 0, 2, -1)
	if res, err := rootAdm.CommitOffsets(ctx, "cg", rootOffs); err != nil || res.Error() != nil {
		t.Fatalf("root commits b.orders: %v %v", err, res.Error())
	}

	// One OffsetCommit naming both topics, sent by carol's client (kadm's
	// CommitOffsets would look the topics up in Metadata first, and carol
	// may not describe b.orders: it would never send b.orders).
	carolCl := kafkaAs(t, c, carol)
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "cg", -1
	for _, topic := range []string{"a.orders", "b.orders"} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 1
		rt.Partitions = append(rt.Partitions, rp)
		commit.Topics = append(commit.Topics, rt)
	}
	cresp, err := commit.RequestWith(ctx, carolCl)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, rt := range cresp.Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if len(codes) != 2 || codes["a.orders"] != 0 || codes["b.orders"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("carol's commit: %v, want a.orders committed and b.orders TOPIC_AUTHORIZATION_FAILED", codes)
	}
	offs, err := rootAdm.FetchOffsets(ctx, "cg")
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := offs.Lookup("a.orders", 0); a.At != 1 {
		t.Fatalf("a.orders committed at %d, want 1", a.At)
	}
	if b, _ := offs.Lookup("b.orders", 0); b.At != 2 {
		t.Fatalf("b.orders at %d, want root's 2", b.At)
	}

	// Fetching: named, each topic on its own; all, b.orders left out.
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = "cg"
	for _, topic := range []string{"a.orders", "b.orders"} {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		fetch.Topics = append(fetch.Topics, rt)
	}
	fresp, err := fetch.RequestWith(ctx, carolCl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]kmsg.OffsetFetchResponseTopicPartition{}
	for _, rt := range fresp.Topics {
		got[rt.Topic] = rt.Partitions[0]
	}
	if a, b := got["a.orders"], got["b.orders"]; fresp.ErrorCode != 0 || len(got) != 2 || a.ErrorCode != 0 || a.Offset != 1 ||
		b.ErrorCode != kerr.TopicAuthorizationFailed.Code || b.Offset != -1 {
		t.Fatalf("carol's named fetch: top %d, %+v", fresp.ErrorCode, got)
	}
	mine, err := kadm.NewClient(carolCl).FetchOffsets(ctx, "cg")
	if err != nil {
		t.Fatalf("carol's fetch of every offset: %v", err)
	}
	if _, ok := mine.Lookup("b.orders", 0); ok || len(mine) != 1 {
		t.Fatalf("carol's fetch of every offset: %+v, want a.orders alone", mine)
	}
	if a, _ := mine.Lookup("a.orders", 0); a.At != 1 {
		t.Fatalf("carol's a.orders at %d, want 1", a.At)
	}
}
