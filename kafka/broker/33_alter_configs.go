package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// handleAlterConfigs replaces a Kafka topic's configs (Kafka's full
// replacement semantics: what is not listed goes back to its default).
// Queues created over HTTP and broker settings refuse changes.
func (b *Broker) handleAlterConfigs(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	tenant := b.tenantOf(c)
	for _, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		var err error
		if r.ResourceType != kmsg.ConfigResourceTypeTopic {
			err = errNotKafkaTopic
		} else if err = b.catchUpTopics(ctx, tenant, r.ResourceName); err == nil {
			ops := make([]wire.ConfigOp, 0, len(r.Configs))
			for _, cfg := range r.Configs {
				if cfg.Value != nil {
					ops = append(ops, wire.ConfigOp{Op: wire.ConfigSet, Name: cfg.Name, Value: *cfg.Value})
				}
			}
			err = b.alterTopic(ctx, tenant, r.ResourceName, true, req.ValidateOnly, ops)
		}
		rr.ErrorCode, rr.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}
