package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// The topic view pages its partitions by index and names each one's
// raft group and leader; configs list every topic config with its source.
func TestTopicViewPagesPartitionsWithLeaders(t *testing.T) {
	n := startNode(t)
	var items []map[string]any
	for i := range 5 {
		items = append(items, map[string]any{"queue": "clicks", "partition": fmt.Sprintf("p%d", i), "payload": i})
	}
	if code := postJSON(t, n.url+"/api/v1/push", map[string]any{"items": items}, nil); code != http.StatusCreated {
		t.Fatalf("push: %d", code)
	}
	type page struct {
		Name       string
		Kafka      bool
		Total      int `json:"totalPartitions"`
		Partitions []topicPartition
		Configs    []topicConfig
		NextCursor *string
	}
	var seen []uint32
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("the pages never end")
		}
		var p page
		url := n.url + "/api/v1/resources/topics/clicks?limit=2"
		if cursor != "" {
			url += "&cursor=" + cursor
		}
		if code := getJSON(t, url, &p); code != http.StatusOK {
			t.Fatalf("GET %s: %d", url, code)
		}
		if p.Name != "clicks" || p.Kafka || p.Total != 5 || len(p.Partitions) > 2 || len(p.Configs) != len(wire.TopicConfigDefaults()) {
			t.Fatalf("page %d: %+v", pages, p)
		}
		for _, tp := range p.Partitions {
			if tp.Name != fmt.Sprintf("p%d", tp.Index) || tp.Group < 0 || tp.Leader != n.engine.NodeID() || tp.LeaderEpoch == 0 ||
				tp.HighWatermark != 1 {
				t.Fatalf("partition: %+v", tp)
			}
			seen = append(seen, tp.Index)
		}
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
	}
	if fmt.Sprint(seen) != "[0 1 2 3 4]" {
		t.Fatalf("listed partitions %v", seen)
	}
	if code := getJSON(t, n.url+"/api/v1/resources/topics/absent", nil); code != http.StatusNotFound {
		t.Fatalf("unknown topic: %d", code)
	}
	if code := getJSON(t, n.url+"/api/v1/resources/topics/clicks?cursor=bogus", nil); code != http.StatusBadRequest {
		t.Fatalf("bad cursor: %d", code)
	}
}

func TestTopicConfigsMarkWhatIsSetOnTheTopic(t *testing.T) {
	got := topicConfigs([]wire.ConfigEntry{{Name: "cleanup.policy", Value: "compact"}})
	if len(got) != len(wire.TopicConfigDefaults()) {
		t.Fatalf("%d configs", len(got))
	}
	for _, c := range got {
		switch {
		case c.Name == "cleanup.policy" && (c.Value != "compact" || c.Source != "topic"):
			t.Fatalf("set config: %+v", c)
		case c.Name != "cleanup.policy" && c.Source != "default":
			t.Fatalf("default config: %+v", c)
		}
	}
}
