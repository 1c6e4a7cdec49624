package broker

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// handleDescribeConfigs describes topics (every config queen accepts, set
// or default), groups (group_configs.go) and brokers (the settings that come from the environment).
func (b *Broker) handleDescribeConfigs(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	tenant := b.tenantOf(c)
	// Read-your-writes (catch_up.go): configs altered, or a topic created,
	// through another node a moment ago are described as they are now.
	caughtUp := b.catchUpDescribed(ctx, tenant, req)
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		var err error
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if err = caughtUp; err != nil {
				break
			}
			set, isKafka, ok := b.engine.TopicConfigs(tenant, r.ResourceName)
			if !ok {
				err = wire.ErrQueueNotFound
				break
			}
			rr.Configs = b.describeTopic(set, isKafka, r.ConfigNames)
		case kmsg.ConfigResourceTypeGroupConfig:
			var set map[string]string
			if err = caughtUp; err != nil {
				break
			}
			if set, _, err = b.groupConfigs(tenant, r.ResourceName); err == nil {
				rr.Configs = describeGroupConfigs(set, r.ConfigNames)
			}
		case kmsg.ConfigResourceTypeBroker:
			if id, perr := strconv.Atoi(r.ResourceName); r.ResourceName != "" && (perr != nil || id < 0) {
				err = wire.ErrBadRequest
				break
			}
			rr.Configs = b.describeBroker(r.ConfigNames)
		default:
			err = wire.ErrBadRequest
		}
		rr.ErrorCode, rr.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// catchUpDescribed catches this node up on the homes of the topics a
// DescribeConfigs names, and on the tenant's KV group (which holds group
// configs) when it names a group.
func (b *Broker) catchUpDescribed(ctx context.Context, tenant wire.ID, req *kmsg.DescribeConfigsRequest) error {
	var topics []string
	groups := false
	for _, r := range req.Resources {
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			topics = append(topics, r.ResourceName)
		case kmsg.ConfigResourceTypeGroupConfig:
			groups = true
		}
	}
	if err := b.catchUpTopics(ctx, tenant, topics...); err != nil || !groups {
		return err
	}
	return b.catchUpKV(ctx, tenant)
}
