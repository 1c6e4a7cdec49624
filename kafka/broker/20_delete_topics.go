package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// handleDeleteTopics deletes queues, however they were created (spec §3.2),
// with their messages, consumer positions and Kafka bookkeeping. Kafka's
// internal topics are not queues and are refused (internal_topics.go).
func (b *Broker) handleDeleteTopics(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	tenant := b.tenantOf(c)
	names := req.TopicNames
	for _, t := range req.Topics {
		if t.Topic != nil {
			names = append(names, *t.Topic)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, adminWait)
	defer cancel()
	for _, name := range names {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		var err error
		if isInternalTopic(name) {
			err = errInternalTopic
		} else if topic, ok := b.engine.KafkaTopic(tenant, name); ok {
			err = chargeMutation(ctx, topic.Partitions) // controller_mutation_rate (client_quota_throttle.go)
		}
		if err == nil && !isInternalTopic(name) {
			var res wire.CodeResult
			res, err = b.engine.DeleteTopic(cctx, &wire.DeleteTopicCmd{Tenant: tenant, Name: name})
			if err == nil {
				err = res.Code.Err()
			}
		}
		rt.ErrorCode, rt.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
