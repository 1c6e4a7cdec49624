package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// handleMetadata lists the tenant's queues as topics (spec decision 2):
// partition i is the queue's partition with permanent index i, led (and
// replicated, as far as a client can tell) by the node leading the tenant's
// raft group (decision 8). Any node answers, from its own replica. Unknown
// topics are created when the client allows it (always before v4), with
// QUEEN_KAFKA_DEFAULT_PARTITIONS partitions.
func (b *Broker) handleMetadata(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	tenant := b.tenantOf(c)
	store := b.engine.Store(tenant)
	resp.Brokers = b.brokers()
	cid := clusterID
	resp.ClusterID = &cid
	resp.ControllerID = b.controllerID()

	var topics []storage.Topic
	var missing []string
	if req.Topics == nil {
		topics = store.KafkaTopics(tenant)
	} else {
		for _, t := range req.Topics {
			if t.Topic == nil {
				continue // by topic id (v10+): not spoken
			}
			if topic, ok := store.KafkaTopic(tenant, *t.Topic); ok {
				topics = append(topics, topic)
			} else {
				missing = append(missing, *t.Topic)
			}
		}
	}
	autoCreate := req.Version < 4 || req.AllowAutoTopicCreation
	leader, leaderOK := b.leader(tenant)
	for _, name := range missing {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		err := b.autoCreate(ctx, tenant, name, autoCreate)
		if err == nil {
			if topic, ok := store.KafkaTopic(tenant, name); ok {
				topics = append(topics, topic)
				continue
			}
			err = wire.ErrQueueNotFound
		}
		rt.ErrorCode = errorCode(err)
		if rt.ErrorCode == kerr.UnknownServerError.Code {
			rt.ErrorCode = kerr.LeaderNotAvailable.Code // retriable: the client asks again
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for _, t := range topics {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr(t.Name)
		rt.Partitions = make([]kmsg.MetadataResponseTopicPartition, t.Partitions)
		for i := range rt.Partitions {
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition, p.Leader, p.LeaderEpoch = int32(i), leader, -1
			if leaderOK {
				p.Replicas, p.ISR = []int32{leader}, []int32{leader}
			} else {
				p.ErrorCode = kerr.LeaderNotAvailable.Code
				p.Replicas, p.ISR = []int32{}, []int32{}
			}
			rt.Partitions[i] = p
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// autoCreate creates a topic a client asked about, when allowed; a topic
// that appeared meanwhile is as good as created.
func (b *Broker) autoCreate(ctx context.Context, tenant wire.ID, name string, allowed bool) error {
	if !allowed {
		return wire.ErrQueueNotFound
	}
	if err := checkTopicName(name); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := b.engine.CreateTopic(cctx, &wire.CreateTopicCmd{Tenant: tenant, Name: name,
		Partitions: uint32(b.cfg.DefaultPartitions), ReqID: newReqID()})
	if err != nil && !errors.Is(err, wire.ErrExists) {
		b.log.Debug("kafka: auto-creating a topic failed", "topic", name, "err", err)
		return err
	}
	return nil
}

// maxTopicName is Kafka's limit on a topic name's length.
const maxTopicName = 249

// checkTopicName applies Kafka's topic naming rules: 1 to 249 of
// [a-zA-Z0-9._-], and not "." or "..". Topics named otherwise can only come
// from HTTP queues, which Kafka clients still see by their names.
func checkTopicName(name string) error {
	if name == "" || len(name) > maxTopicName || name == "." || name == ".." {
		return fmt.Errorf("%w: %q", errInvalidTopic, name)
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-'
		if !ok {
			return fmt.Errorf("%w: %q has %q", errInvalidTopic, name, ch)
		}
	}
	return nil
}
