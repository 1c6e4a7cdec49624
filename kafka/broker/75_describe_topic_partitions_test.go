package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describePage asks one DescribeTopicPartitions page.
func describePage(t *testing.T, cl *kgo.Client, limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, topics ...string) *kmsg.DescribeTopicPartitionsResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	for _, name := range topics {
		req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: name})
	}
	req.ResponsePartitionLimit, req.Cursor = limit, cursor
	resp, err := req.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestDescribeTopicPartitionsPages walks two topics three partitions at a
// time, following next_cursor, and checks every partition comes once, in
// order, led, and that unknown topics and a stray cursor are refused.
func TestDescribeTopicPartitionsPages(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client()
	createTopic(t, cl, "pa", 4)
	createTopic(t, cl, "pb", 3)

	var seen []string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatalf("cursor does not end: %v", seen)
		}
		resp := describePage(t, cl, 3, cursor, "pb", "pa", "nope")
		got := 0
		for _, rt := range resp.Topics {
			if *rt.Topic == "nope" {
				if rt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
					t.Fatalf("unknown topic: %+v", rt)
				}
				continue
			}
			if rt.ErrorCode != 0 || rt.TopicID == [16]byte{} {
				t.Fatalf("topic %s: %+v", *rt.Topic, rt)
			}
			for _, p := range rt.Partitions {
				if p.ErrorCode != 0 || p.LeaderID != 1 || len(p.ISR) != 1 {
					t.Fatalf("%s/%d: %+v", *rt.Topic, p.Partition, p)
				}
				seen = append(seen, fmt.Sprintf("%s/%d", *rt.Topic, p.Partition))
				got++
			}
		}
		if got > 3 {
			t.Fatalf("page of %d partitions over a limit of 3", got)
		}
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	want := "[pa/0 pa/1 pa/2 pa/3 pb/0 pb/1 pb/2]"
	if fmt.Sprint(seen) != want {
		t.Fatalf("paged %v, want %s", seen, want)
	}

	// Every topic when none is named, internal ones included.
	all := describePage(t, cl, 0, nil)
	names := map[string]bool{}
	for _, rt := range all.Topics {
		names[*rt.Topic] = rt.IsInternal
	}
	if _, ok := names["pa"]; !ok || !names["__consumer_offsets"] || all.NextCursor != nil {
		t.Fatalf("all topics: %v, cursor %+v", names, all.NextCursor)
	}

	stray := describePage(t, cl, 0, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "zz"}, "pa")
	if len(stray.Topics) != 1 || stray.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("cursor on a topic not asked for: %+v", stray.Topics)
	}
}
