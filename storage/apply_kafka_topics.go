package storage

import (
	"github.com/queen-mq/queen/wire"
)

// applyCreateTopic creates a Kafka topic: a queue flagged as Kafka's, with
// Partitions partitions named by index and its configs applied. The same
// request retried finds its own topic and answers OK.
func (s *Store) applyCreateTopic(ctx *applyCtx, c *wire.CreateTopicCmd) wire.AllocResult {
	if q := s.queue(c.Tenant, c.Name); q != nil {
		if tm := s.kafka.topics[q.id]; q.home && tm != nil && !c.ReqID.IsZero() && tm.createReq == c.ReqID {
			return q.allocResult(ctx, wire.CodeOK)
		}
		return wire.AllocResult{Code: wire.CodeExists}
	}
	if !s.homeFor(&c.Place) || c.Partitions > wire.MaxAllocPartitions {
		return wire.AllocResult{Code: wire.CodeBadRequest}
	}
	configs := make([]wire.ConfigEntry, 0, len(c.Configs))
	for _, e := range c.Configs {
		if wire.CheckTopicConfig(e.Name, e.Value) != nil {
			return wire.AllocResult{Code: wire.CodeBadRequest}
		}
		configs = append(configs, e)
	}
	sortConfigs(configs)
	cfg := wire.DefaultQueueConfig()
	wire.ApplyTopicConfigs(&cfg, configs)
	q := s.createCatalog(ctx, c.Tenant, c.Name, "", "", cfg, true, c.Place)
	for range c.Partitions {
		s.addDirEntry(ctx, q, "")
	}
	tm := &topicMeta{createReq: c.ReqID}
	tm.setConfigs(configs)
	s.kafka.topics[q.id] = tm
	ctx.set(topicKey(q.id), tm.encode())
	ctx.touch(q)
	res := q.allocResult(ctx, wire.CodeOK)
	res.Created = true
	return res
}

// allocResult answers with a home's catalog and whole directory (a Kafka
// topic's: a few partitions).
func (q *queueState) allocResult(ctx *applyCtx, code wire.Code) wire.AllocResult {
	res := wire.AllocResult{Code: code, Catalog: q.catalog(), Parts: make([]wire.DirEntry, len(q.dir))}
	for i := range q.dir {
		res.Parts[i] = q.dirEntryAt(ctx.get, uint32(i))
	}
	return res
}

// applyCreatePartitions grows a topic (however it was created) to Count
// partitions named by index. Kafka never shrinks a topic.
func (s *Store) applyCreatePartitions(ctx *applyCtx, c *wire.CreatePartitionsCmd) wire.AllocResult {
	q := s.queue(c.Tenant, c.Name)
	switch {
	case q == nil:
		return wire.AllocResult{Code: wire.CodeQueueNotFound}
	case !q.home:
		return wire.AllocResult{Code: wire.CodeBadRequest}
	}
	n := uint32(len(q.dir))
	switch {
	case c.Count == n && ctx.retry:
		return q.allocResult(ctx, wire.CodeOK) // our own first attempt
	case c.Count <= n || c.Count > wire.MaxAllocPartitions:
		return wire.AllocResult{Code: wire.CodeInvalidPartitions}
	}
	for ; n < c.Count; n++ {
		s.addDirEntry(ctx, q, "")
	}
	ctx.touch(q)
	return q.allocResult(ctx, wire.CodeOK)
}

// applyDeleteTopic deletes a topic's queue (and with it the Kafka
// bookkeeping, see forgetKafkaQueue); a retried proposal that finds it gone
// answers OK.
func (s *Store) applyDeleteTopic(ctx *applyCtx, c *wire.DeleteTopicCmd) wire.DeleteQueueResult {
	q := s.queue(c.Tenant, c.Name)
	if q == nil {
		if ctx.retry {
			return wire.DeleteQueueResult{Code: wire.CodeOK}
		}
		return wire.DeleteQueueResult{Code: wire.CodeQueueNotFound}
	}
	return s.applyDeleteQueue(ctx, &wire.DeleteQueueCmd{Tenant: c.Tenant, Queue: c.Name})
}

// applyTopicConfig changes a Kafka topic's configs and the queue options
// they map onto. Queues created over HTTP keep their options (CodeConflict):
// they are configured with /api/v1/configure (spec §3.2). One invalid op
// refuses the whole command.
func (s *Store) applyTopicConfig(ctx *applyCtx, c *wire.TopicConfigCmd) wire.CodeResult {
	q := s.queue(c.Tenant, c.Name)
	switch {
	case q == nil:
		return wire.CodeResult{Code: wire.CodeQueueNotFound}
	case !q.home:
		return wire.CodeResult{Code: wire.CodeBadRequest}
	case !q.kafka:
		return wire.CodeResult{Code: wire.CodeConflict}
	}
	tm := s.kafka.topics[q.id]
	if tm == nil {
		tm = &topicMeta{}
	}
	next := map[string]string{}
	if !c.Replace {
		for _, e := range tm.configs {
			next[e.Name] = e.Value
		}
	}
	for _, op := range c.Ops {
		switch op.Op {
		case wire.ConfigSet:
			if wire.CheckTopicConfig(op.Name, op.Value) != nil {
				return wire.CodeResult{Code: wire.CodeBadRequest}
			}
			next[op.Name] = op.Value
		case wire.ConfigDelete:
			delete(next, op.Name)
		default:
			return wire.CodeResult{Code: wire.CodeBadRequest}
		}
	}
	configs := make([]wire.ConfigEntry, 0, len(next))
	for name, v := range next {
		configs = append(configs, wire.ConfigEntry{Name: name, Value: v})
	}
	sortConfigs(configs)
	tm.setConfigs(configs)
	s.kafka.topics[q.id] = tm
	ctx.set(topicKey(q.id), tm.encode())
	wire.ApplyTopicConfigs(&q.cfg, configs)
	q.cfgVer++
	s.noteQueueConfig(q) // retention may have turned on or off
	ctx.set(queueKey(q.id), q.encodeMeta())
	ctx.touch(q)
	return wire.CodeResult{Code: wire.CodeOK}
}

// applyRegisterNode records a node's advertised Kafka address.
func (s *Store) applyRegisterNode(ctx *applyCtx, c *wire.RegisterNodeCmd) wire.CodeResult {
	if c.NodeID == 0 || c.KafkaAddr == "" {
		return wire.CodeResult{Code: wire.CodeBadRequest}
	}
	if s.kafka.nodes[c.NodeID] != c.KafkaAddr {
		s.kafka.nodes[c.NodeID] = c.KafkaAddr
		ctx.set(nodeKey(c.NodeID), []byte(c.KafkaAddr))
	}
	return wire.CodeResult{Code: wire.CodeOK}
}
