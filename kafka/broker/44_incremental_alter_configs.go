package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// handleIncrementalAlterConfigs sets or deletes (back to the default) a
// Kafka topic's configs. APPEND and SUBTRACT (list configs) are refused.
func (b *Broker) handleIncrementalAlterConfigs(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	tenant := b.tenantOf(c)
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		err := func() error {
			if r.ResourceType != kmsg.ConfigResourceTypeTopic {
				return errNotKafkaTopic
			}
			ops := make([]wire.ConfigOp, 0, len(r.Configs))
			for _, cfg := range r.Configs {
				switch cfg.Op {
				case kmsg.IncrementalAlterConfigOpSet:
					if cfg.Value == nil {
						return fmt.Errorf("%w: %s set to null", wire.ErrInvalidConfig, cfg.Name)
					}
					ops = append(ops, wire.ConfigOp{Op: wire.ConfigSet, Name: cfg.Name, Value: *cfg.Value})
				case kmsg.IncrementalAlterConfigOpDelete:
					ops = append(ops, wire.ConfigOp{Op: wire.ConfigDelete, Name: cfg.Name})
				default:
					return fmt.Errorf("%w: %s of %s", errUnsupportedOp, cfg.Op, cfg.Name)
				}
			}
			return b.alterTopic(ctx, tenant, r.ResourceName, false, req.ValidateOnly, ops)
		}()
		rr.ErrorCode, rr.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}
