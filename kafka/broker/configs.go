package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/wire"
)

// describeTopic lists a topic's configs as DescribeConfigs shows them: every
// config queen accepts, with the value set on the topic (DYNAMIC_TOPIC_CONFIG)
// or its default (DEFAULT_CONFIG). Queues created over HTTP show their
// options read-only. names filters (nil: all).
func (b *Broker) describeTopic(set []wire.ConfigEntry, kafkaTopic bool, names []string) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range b.topicDefaults() {
		if names != nil && !slices.Contains(names, d.Name) {
			continue
		}
		e := kmsg.NewDescribeConfigsResponseResourceConfig()
		e.Name, e.Value, e.ReadOnly = d.Name, kmsg.StringPtr(d.Value), !kafkaTopic
		e.IsDefault, e.Source = true, kmsg.ConfigSourceDefaultConfig
		for _, s := range set {
			if s.Name == d.Name {
				e.Value, e.IsDefault, e.Source = kmsg.StringPtr(s.Value), false, kmsg.ConfigSourceDynamicTopicConfig
			}
		}
		out = append(out, e)
	}
	return out
}

// topicDefaults are the topic configs' defaults on this broker: Kafka's,
// but a topic's max.message.bytes defaults to the broker's
// message.max.bytes (QUEEN_KAFKA_MAX_MESSAGE_BYTES), as in Kafka, and its
// min.insync.replicas to the raft quorum, which every acknowledged write
// reached.
func (b *Broker) topicDefaults() []wire.ConfigEntry {
	defs := wire.TopicConfigDefaults()
	for i := range defs {
		switch defs[i].Name {
		case "max.message.bytes":
			defs[i].Value = strconv.Itoa(b.cfg.MaxMessageBytes)
		case "min.insync.replicas":
			defs[i].Value = strconv.Itoa(b.quorum())
		}
	}
	return defs
}

// quorum is how many replicas a raft commit reaches: a majority of the
// voters.
func (b *Broker) quorum() int { return len(b.engine.Host().Peers())/2 + 1 }

// checkTopicConfig is wire.CheckTopicConfig and what only the broker
// knows: min.insync.replicas may not exceed the raft quorum, since no
// commit waits for more replicas than that.
func (b *Broker) checkTopicConfig(name, value string) error {
	if err := wire.CheckTopicConfig(name, value); err != nil {
		return err
	}
	if name == "min.insync.replicas" {
		if n, _ := strconv.Atoi(value); n > b.quorum() {
			return fmt.Errorf("%w: min.insync.replicas=%d exceeds the raft quorum of %d", wire.ErrInvalidConfig, n, b.quorum())
		}
	}
	return nil
}

// describeBroker lists the broker settings a client may want to read; they
// come from the environment and are read-only.
func (b *Broker) describeBroker(names []string) []kmsg.DescribeConfigsResponseResourceConfig {
	static := []wire.ConfigEntry{
		{Name: "advertised.listeners", Value: "PLAINTEXT://" + b.cfg.AdvertisedAddr},
		{Name: "auto.create.topics.enable", Value: "true"},
		{Name: "broker.id", Value: strconv.Itoa(int(b.cfg.NodeID))},
		{Name: "default.replication.factor", Value: "1"},
		{Name: "log.dirs", Value: b.cfg.LogDir},
		{Name: "log.retention.ms", Value: "-1"},
		{Name: "message.max.bytes", Value: strconv.Itoa(b.cfg.MaxMessageBytes)},
		{Name: "min.insync.replicas", Value: strconv.Itoa(b.quorum())},
		{Name: "num.partitions", Value: strconv.Itoa(int(b.cfg.DefaultPartitions))},
		{Name: "producer.id.expiration.ms", Value: strconv.FormatInt(b.cfg.DedupWindow.Milliseconds(), 10)},
		{Name: "transaction.max.timeout.ms", Value: strconv.FormatInt(b.cfg.TxnMaxTimeout.Milliseconds(), 10)},
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, s := range static {
		if names != nil && !slices.Contains(names, s.Name) {
			continue
		}
		e := kmsg.NewDescribeConfigsResponseResourceConfig()
		e.Name, e.Value, e.ReadOnly, e.Source = s.Name, kmsg.StringPtr(s.Value), true, kmsg.ConfigSourceStaticBrokerConfig
		out = append(out, e)
	}
	return out
}

// alterTopic applies config changes to a topic: AlterConfigs (replace) and
// IncrementalAlterConfigs share it. Values are validated here so a bad one
// is refused before anything is proposed. Both have caught this node up on
// the topic's home (catch_up.go), so it exists here if it exists at all.
func (b *Broker) alterTopic(ctx context.Context, tenant wire.ID, name string, replace, validateOnly bool, ops []wire.ConfigOp) error {
	for _, op := range ops {
		v := op.Value
		if op.Op == wire.ConfigDelete {
			v = defaultOf(op.Name) // only the name must be known
		}
		if err := b.checkTopicConfig(op.Name, v); err != nil {
			return err
		}
	}
	_, isKafka, ok := b.engine.TopicConfigs(tenant, name)
	switch {
	case !ok:
		return wire.ErrQueueNotFound
	case !isKafka:
		return errNotKafkaTopic
	case validateOnly:
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, adminWait)
	defer cancel()
	_, err := b.engine.AlterTopicConfig(cctx, &wire.TopicConfigCmd{Tenant: tenant, Name: name, Replace: replace, Ops: ops})
	if errors.Is(err, wire.ErrConflict) {
		return errNotKafkaTopic
	}
	return err
}

// defaultOf is the default value of a topic config ("" when unknown).
func defaultOf(name string) string {
	for _, d := range wire.TopicConfigDefaults() {
		if d.Name == name {
			return d.Value
		}
	}
	return ""
}
