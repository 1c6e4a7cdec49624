package api

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/wire"
)

// topicAnswer is a queue seen as a Kafka topic (spec README decision 2): a
// page of its partitions with the node leading each, and its configs as
// DescribeConfigs would list them.
type topicAnswer struct {
	Name string `json:"name"`
	// Kafka is true for a topic created through Kafka (its configs may be
	// altered there); a queue created over HTTP shows its configs
	// read-only.
	Kafka      bool             `json:"kafka"`
	Partitions []topicPartition `json:"partitions"`
	Total      int              `json:"totalPartitions"`
	Configs    []topicConfig    `json:"configs"`
	NextCursor *string          `json:"nextCursor"`
}

type topicPartition struct {
	Index  uint32 `json:"index"`
	Name   string `json:"name"`
	Group  int    `json:"group"`
	Leader uint64 `json:"leader"` // node id, 0 during an election
	// LeaderEpoch is the raft term of the partition's group, the epoch
	// Kafka clients see in Metadata.
	LeaderEpoch    uint64 `json:"leaderEpoch"`
	HighWatermark  uint64 `json:"highWatermark"`
	LogStartOffset uint64 `json:"logStartOffset"`
}

type topicConfig struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Source is "topic" for a value set on the topic, "default" for the
	// default (where the broker's own settings, such as
	// QUEEN_KAFKA_MAX_MESSAGE_BYTES, change a default, the Kafka
	// facade's DescribeConfigs shows the broker's value).
	Source string `json:"source"`
}

// getTopic is GET /api/v1/resources/topics/:topic[?limit=&cursor=] for
// the dashboard's Kafka topics page: a page of partitions (by index) with
// their leaders and offsets, and the topic's configs.
func (s *Server) getTopic(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	name := pathArg(ctx, "topic")
	_, q, page, next, err := s.partitionsOfQueue(ctx, name, false, maxPageLimit)
	if err != nil {
		return err
	}
	set, kafka, _ := s.engine.TopicConfigs(tenant, name)
	ans := topicAnswer{Name: q.Name, Kafka: kafka, Partitions: make([]topicPartition, 0, len(page)),
		Total: q.QueueInfo.Partitions, Configs: topicConfigs(set), NextCursor: next}
	for i := range page {
		p := &page[i]
		tp := topicPartition{Index: p.Index, Name: p.Name, HighWatermark: p.HighWatermark, LogStartOffset: p.LogStart, Group: -1}
		if d, ok := s.engine.DirByIndex(tenant, name, p.Index); ok {
			tp.Group = int(d.Group)
			tp.Leader, tp.LeaderEpoch, _ = s.engine.Leader(int(d.Group))
		}
		ans.Partitions = append(ans.Partitions, tp)
	}
	writeJSON(ctx, http.StatusOK, ans)
	return nil
}

// topicConfigs lists every topic config with the value set on the topic
// or its default, in the defaults' order.
func topicConfigs(set []wire.ConfigEntry) []topicConfig {
	defs := wire.TopicConfigDefaults()
	out := make([]topicConfig, 0, len(defs))
	for _, d := range defs {
		c := topicConfig{Name: d.Name, Value: d.Value, Source: "default"}
		for _, e := range set {
			if e.Name == d.Name {
				c.Value, c.Source = e.Value, "topic"
			}
		}
		out = append(out, c)
	}
	return out
}
