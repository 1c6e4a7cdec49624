package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/wire"
)

// TestTopicIDs: Metadata v10+ gives every topic a non-zero id, the same on
// every ask, a new one when the topic is deleted and created again; v12
// finds topics by id, and an unknown id answers UNKNOWN_TOPIC_ID.
func TestTopicIDs(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client()
	createTopic(t, cl, "ids", 2)
	ids := func() map[string][16]byte {
		out := map[string][16]byte{}
		for _, rt := range metadata(t, cl, false).Topics {
			out[*rt.Topic] = rt.TopicID
		}
		return out
	}
	first := ids()
	if first["ids"] == ([16]byte{}) || first["__consumer_offsets"] == ([16]byte{}) || first["ids"] == first["__consumer_offsets"] {
		t.Fatalf("topic ids: %v", first)
	}
	if again := ids(); again["ids"] != first["ids"] {
		t.Fatalf("id changed between asks: %v then %v", first["ids"], again["ids"])
	}

	byID := kmsg.NewPtrMetadataRequest()
	for _, id := range [][16]byte{first["ids"], first["__consumer_offsets"], {1}} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		byID.Topics = append(byID.Topics, rt)
	}
	resp, err := byID.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Topics
	if len(got) != 3 {
		t.Fatalf("by id: %+v", got)
	}
	found := map[[16]byte]kmsg.MetadataResponseTopic{}
	for _, rt := range got {
		found[rt.TopicID] = rt
	}
	if rt := found[first["ids"]]; rt.ErrorCode != 0 || rt.Topic == nil || *rt.Topic != "ids" || len(rt.Partitions) != 2 {
		t.Fatalf("ids by id: %+v", rt)
	}
	if rt := found[first["__consumer_offsets"]]; !rt.IsInternal || *rt.Topic != "__consumer_offsets" {
		t.Fatalf("__consumer_offsets by id: %+v", rt)
	}
	if rt := found[[16]byte{1}]; rt.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown id: %+v", rt)
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"ids"}
	if _, err := del.RequestWith(ctxFor(t), cl); err != nil {
		t.Fatal(err)
	}
	createTopic(t, cl, "ids", 2)
	if again := ids(); again["ids"] == first["ids"] {
		t.Fatal("a topic created again kept its id")
	}
	if topicIDOf(wire.DefaultTenant, "ids", 1) == topicIDOf(wire.ID{1}, "ids", 1) {
		t.Fatal("two tenants' topics of one name share an id")
	}
}
