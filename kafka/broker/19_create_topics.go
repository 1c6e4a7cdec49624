package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// maxCreateTopics is the most topics one CreateTopics may create (spec
// §3.4); a larger request is refused whole with THROTTLING_QUOTA_EXCEEDED.
const maxCreateTopics = 100

// adminWait bounds an admin proposal whatever the client's timeout says.
const adminWait = 30 * time.Second

// handleCreateTopics creates queues flagged as Kafka topics, partitions
// named by index and spread over the raft groups, configs validated and
// mapped (retention.ms onto the queue's retention). Any node accepts it: a
// create is a proposal (at the topic's home, then one per group holding
// its partitions). The replication
// factor is the raft group's, so any factor from 1 to the cluster size (or
// -1) is accepted and the topic is replicated to every node alike.
func (b *Broker) handleCreateTopics(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	if len(req.Topics) > maxCreateTopics {
		return kafka.ErrorResponse(req, kerr.ThrottlingQuotaExceeded.Code), nil
	}
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	tenant := b.tenantOf(c)
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	cctx, cancel := context.WithTimeout(ctx, adminWait)
	defer cancel()
	// The partition caps are checked over the whole request first: over
	// them, no topic of it is created. They (and whether a topic exists,
	// for validate-only) are read once this node has caught up
	// (catch_up.go), counting what other nodes have just created.
	caughtUp := b.catchUpTenant(cctx, tenant)
	type checked struct {
		n       int32
		configs []wire.ConfigEntry
		err     error
	}
	checks := make([]checked, len(req.Topics))
	added := 0
	for i := range req.Topics {
		c := &checks[i]
		c.n, c.configs, c.err = b.checkCreateTopic(&req.Topics[i], seen[req.Topics[i].Topic])
		if c.err == nil {
			c.err = caughtUp
		}
		if c.err == nil {
			added += int(c.n)
		}
	}
	if err := b.checkNewPartitions(tenant, 0, added); err != nil {
		for i := range checks {
			if checks[i].err == nil {
				checks[i].err = err
			}
		}
	}
	if policyOf(ctx) != nil { // the plan's caps (proxy_hooks.go)
		var asks []CreateAsk
		var at []int
		for i := range checks {
			if checks[i].err == nil {
				_, exists := b.engine.KafkaTopic(tenant, req.Topics[i].Topic)
				asks = append(asks, CreateAsk{Topic: req.Topics[i].Topic, Partitions: int(checks[i].n), Exists: exists})
				at = append(at, i)
			}
		}
		policyCreate(ctx, asks)
		for j, i := range at {
			checks[i].err = asks[j].Err
		}
	}
	if !req.ValidateOnly { // controller_mutation_rate (client_quota_throttle.go)
		for i := range checks {
			if checks[i].err == nil {
				checks[i].err = chargeMutation(ctx, int(checks[i].n))
			}
		}
	}
	for i, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		n, configs, err := checks[i].n, checks[i].configs, checks[i].err
		if err == nil && req.ValidateOnly {
			if _, exists := b.engine.KafkaTopic(tenant, t.Topic); exists {
				err = wire.ErrExists
			}
		}
		if err == nil && !req.ValidateOnly {
			var res wire.AllocResult
			res, err = b.engine.CreateTopic(cctx, &wire.CreateTopicCmd{Tenant: tenant, Name: t.Topic,
				Partitions: uint32(n), Configs: configs, ReqID: newReqID()})
			if err == nil {
				err = res.Code.Err()
			}
		}
		rt.ErrorCode, rt.ErrorMessage = errorCode(err), errorMessage(err)
		if err == nil {
			rt.NumPartitions, rt.ReplicationFactor = n, 1
			for _, e := range b.describeTopic(configs, true, nil) {
				rt.Configs = append(rt.Configs, kmsg.CreateTopicsResponseTopicConfig{Name: e.Name, Value: e.Value,
					ReadOnly: e.ReadOnly, Source: int8(e.Source), IsSensitive: e.IsSensitive})
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// checkCreateTopic validates one topic of a CreateTopics request and
// returns its partition count and configs.
func (b *Broker) checkCreateTopic(t *kmsg.CreateTopicsRequestTopic, copies int) (int32, []wire.ConfigEntry, error) {
	if copies > 1 {
		return 0, nil, fmt.Errorf("%w: topic %q listed %d times", wire.ErrBadRequest, t.Topic, copies)
	}
	if err := checkTopicName(t.Topic); err != nil {
		return 0, nil, err
	}
	n := t.NumPartitions
	switch {
	case len(t.ReplicaAssignment) > 0 && n == -1:
		n = int32(len(t.ReplicaAssignment))
	case n == -1:
		n = b.cfg.DefaultPartitions
	}
	if n <= 0 || n > b.cfg.MaxPartitions {
		return 0, nil, fmt.Errorf("%w: %d partitions (1..%d)", errPartitionsLimits, n, b.cfg.MaxPartitions)
	}
	if rf := int(t.ReplicationFactor); rf != -1 && (rf < 1 || rf > len(b.engine.Host().Peers())) {
		return 0, nil, fmt.Errorf("%w: replication factor %d", errReplicationFactor, rf)
	}
	var configs []wire.ConfigEntry
	for _, cfg := range t.Configs {
		if cfg.Value == nil {
			continue // null: the default
		}
		if err := b.checkTopicConfig(cfg.Name, *cfg.Value); err != nil {
			return 0, nil, err
		}
		configs = append(configs, wire.ConfigEntry{Name: cfg.Name, Value: *cfg.Value})
	}
	return n, configs, nil
}
