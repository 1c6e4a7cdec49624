package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// handleIncrementalAlterConfigs sets or deletes (back to the default) a
// Kafka topic's configs or a group's (group_configs.go), and appends to or subtracts from its list configs
// (cleanup.policy and the throttled replica lists), as Kafka does.
func (b *Broker) handleIncrementalAlterConfigs(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	tenant := b.tenantOf(c)
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		err := func() error {
			switch r.ResourceType {
			case kmsg.ConfigResourceTypeGroupConfig:
				return b.alterGroupConfigs(ctx, tenant, r.ResourceName, req.ValidateOnly, r.Configs)
			case kmsg.ConfigResourceTypeTopic:
			default:
				return errNotKafkaTopic
			}
			// An APPEND or SUBTRACT edits what the topic has now, and a
			// topic created through another node a moment ago exists.
			if err := b.catchUpTopics(ctx, tenant, r.ResourceName); err != nil {
				return err
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
				case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
					v, err := b.editListConfig(tenant, r.ResourceName, cfg)
					if err != nil {
						return err
					}
					ops = append(ops, wire.ConfigOp{Op: wire.ConfigSet, Name: cfg.Name, Value: v})
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

// listConfigs are the topic configs whose value is a comma-separated list.
var listConfigs = []string{"cleanup.policy", "follower.replication.throttled.replicas", "leader.replication.throttled.replicas"}

// editListConfig is a list config's value after an APPEND (the items not
// in it yet added) or a SUBTRACT (the items removed) on what the topic has
// now. Other configs refuse both, as in Kafka.
func (b *Broker) editListConfig(tenant wire.ID, topic string, cfg kmsg.IncrementalAlterConfigsRequestResourceConfig) (string, error) {
	if !slices.Contains(listConfigs, cfg.Name) {
		return "", fmt.Errorf("%w: %s of %s, which is not a list", errUnsupportedOp, cfg.Op, cfg.Name)
	}
	if cfg.Value == nil {
		return "", fmt.Errorf("%w: %s of %s with null", wire.ErrInvalidConfig, cfg.Op, cfg.Name)
	}
	current := defaultOf(cfg.Name)
	set, _, _ := b.engine.TopicConfigs(tenant, topic)
	for _, e := range set {
		if e.Name == cfg.Name {
			current = e.Value
		}
	}
	items := splitList(current)
	for _, item := range splitList(*cfg.Value) {
		switch i := slices.Index(items, item); {
		case cfg.Op == kmsg.IncrementalAlterConfigOpAppend && i < 0:
			items = append(items, item)
		case cfg.Op == kmsg.IncrementalAlterConfigOpSubtract && i >= 0:
			items = slices.Delete(items, i, i+1)
		}
	}
	return strings.Join(items, ","), nil
}

// splitList splits a list config's value, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
