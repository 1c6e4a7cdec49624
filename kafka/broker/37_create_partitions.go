package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// handleCreatePartitions grows topics; new partitions are named by their
// index (spec decision 2) and placed round-robin over the raft groups as
// the first ones were. Kafka never shrinks a topic, and neither does
// this: a count not above the current one is INVALID_PARTITIONS.
func (b *Broker) handleCreatePartitions(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	tenant := b.tenantOf(c)
	cctx, cancel := context.WithTimeout(ctx, adminWait)
	defer cancel()
	// Each topic is checked first and the partition caps over the whole
	// request: over them, no topic of it grows. They are read once this
	// node has caught up (catch_up.go): a topic created or grown through
	// another node a moment ago is counted as it is.
	caughtUp := b.catchUpTenant(cctx, tenant)
	checks := make([]error, len(req.Topics))
	added := 0
	for i, t := range req.Topics {
		topic, ok := b.engine.KafkaTopic(tenant, t.Topic)
		switch {
		case caughtUp != nil:
			checks[i] = caughtUp
		case !ok:
			checks[i] = wire.ErrQueueNotFound
		case t.Count <= int32(topic.Partitions):
			checks[i] = fmt.Errorf("%w: the topic has %d partitions, asked for %d", wire.ErrInvalidPartitions, topic.Partitions, t.Count)
		case t.Count > b.cfg.MaxPartitions:
			checks[i] = fmt.Errorf("%w: at most %d partitions", errPartitionsLimits, b.cfg.MaxPartitions)
		default:
			added += int(t.Count) - topic.Partitions
		}
	}
	if err := b.checkNewPartitions(tenant, 0, added); err != nil {
		for i := range checks {
			if checks[i] == nil {
				checks[i] = err
			}
		}
	}
	if policyOf(ctx) != nil { // the plan's caps (proxy_hooks.go)
		var asks []CreateAsk
		var at []int
		for i, t := range req.Topics {
			if checks[i] == nil {
				asks = append(asks, CreateAsk{Topic: t.Topic, Partitions: int(t.Count), Exists: true})
				at = append(at, i)
			}
		}
		policyCreate(ctx, asks)
		for j, i := range at {
			checks[i] = asks[j].Err
		}
	}
	if !req.ValidateOnly { // controller_mutation_rate (client_quota_throttle.go): the partitions added
		for i, t := range req.Topics {
			if topic, ok := b.engine.KafkaTopic(tenant, t.Topic); ok && checks[i] == nil {
				checks[i] = chargeMutation(ctx, int(t.Count)-topic.Partitions)
			}
		}
	}
	for i, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		err := func() error {
			if checks[i] != nil || req.ValidateOnly {
				return checks[i]
			}
			res, err := b.engine.CreatePartitions(cctx, &wire.CreatePartitionsCmd{Tenant: tenant, Name: t.Topic, Count: uint32(t.Count)})
			if err != nil {
				return err
			}
			return res.Code.Err()
		}()
		rt.ErrorCode, rt.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
