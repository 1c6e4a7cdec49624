package raftgroups

import (
	"context"
	"fmt"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// The engine calls the Kafka facade makes: producer-checked appends,
// producer ids, transactions, topic administration, the node registry and
// where leadership is. Like every engine write they return once the command
// is applied on this node.

// KafkaProduce queues pre-encoded wire.KafkaProduceCmd bodies (built by the
// handler in their final buffers), all to commit in one raft entry, and
// returns the function that waits for their results. Produces queued one
// after the other are applied in that order, which is what keeps a
// client's pipelined batches to a partition in order.
func (e *Engine) KafkaProduce(tenant wire.ID, bodies [][]byte) (func(context.Context) ([]wire.KafkaProduceResult, error), error) {
	cmds := make([]wire.Command, len(bodies))
	size := 0
	for i, b := range bodies {
		cmds[i] = wire.Command{Kind: wire.KindKafkaProduce, Body: b}
		size += cmds[i].EncodedLen()
	}
	switch {
	case size > e.host.cfg.MaxEntryBytes:
		return nil, ErrTooLarge
	case e.host.closed.Load():
		return nil, ErrClosed
	}
	wait, err := e.group(tenant).prop.enqueue(cmds)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) ([]wire.KafkaProduceResult, error) {
		res, err := wait(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]wire.KafkaProduceResult, len(res))
		for i, b := range res {
			if code, bare := wire.ResultCode(b); bare {
				out[i].Code = code // refused before it was decoded
				continue
			}
			if out[i], err = wire.DecodeKafkaProduceResult(b); err != nil {
				return nil, fmt.Errorf("raftgroups: produce result: %w", err)
			}
		}
		return out, nil
	}, nil
}

// InitProducer allocates a producer id, or fences a transactional id's
// previous producer.
func (e *Engine) InitProducer(ctx context.Context, c *wire.InitProducerCmd) (wire.InitProducerResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindKafkaInitProducer, c.Encode(nil), wire.DecodeInitProducerResult)
}

// CreateTopic creates a Kafka topic.
func (e *Engine) CreateTopic(ctx context.Context, c *wire.CreateTopicCmd) (wire.CodeResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindKafkaCreateTopic, c.Encode(nil), wire.DecodeCodeResult)
}

// CreatePartitions grows a topic.
func (e *Engine) CreatePartitions(ctx context.Context, c *wire.CreatePartitionsCmd) (wire.CodeResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindKafkaCreatePartitions, c.Encode(nil), wire.DecodeCodeResult)
}

// DeleteTopic deletes a topic and its Kafka bookkeeping.
func (e *Engine) DeleteTopic(ctx context.Context, c *wire.DeleteTopicCmd) (wire.CodeResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindKafkaDeleteTopic, c.Encode(nil), wire.DecodeCodeResult)
}

// AlterTopicConfig changes a Kafka topic's configs.
func (e *Engine) AlterTopicConfig(ctx context.Context, c *wire.TopicConfigCmd) (wire.CodeResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindKafkaTopicConfig, c.Encode(nil), wire.DecodeCodeResult)
}

// TxnBegin marks a transaction open.
func (e *Engine) TxnBegin(ctx context.Context, c *wire.TxnBeginCmd) (wire.KafkaTxnResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindKafkaTxnBegin, c.Encode(nil), wire.DecodeKafkaTxnResult)
}

// TxnEnd commits (records and offsets, in one command) or aborts a
// transaction.
func (e *Engine) TxnEnd(ctx context.Context, c *wire.TxnEndCmd) (wire.KafkaTxnResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindKafkaTxnEnd, c.Encode(nil), wire.DecodeKafkaTxnResult)
}

// RegisterKafkaNode records this node's advertised Kafka address in group
// 0's node registry.
func (e *Engine) RegisterKafkaNode(ctx context.Context, c *wire.RegisterNodeCmd) error {
	if e.host.closed.Load() {
		return ErrClosed
	}
	res, err := e.host.groups[0].prop.submit(ctx, []wire.Command{{Kind: wire.KindKafkaRegisterNode, Body: c.Encode(nil)}})
	if err != nil {
		return err
	}
	if code, _ := wire.ResultCode(res[0]); code != wire.CodeOK {
		return fmt.Errorf("raftgroups: register node: %w", code.Err())
	}
	return nil
}

// KafkaNodes is the node registry as this node has applied it.
func (e *Engine) KafkaNodes() []storage.NodeAddr { return e.host.groups[0].store.KafkaNodes() }

// NodeID is this node's id (its Kafka broker id).
func (e *Engine) NodeID() uint64 { return e.host.cfg.NodeID }

// Leader reports which node leads tenant's group and in which term; ok is
// false while there is no leader (an election).
func (e *Engine) Leader(tenant wire.ID) (node, term uint64, ok bool) {
	g := e.group(tenant)
	id, term, valid, err := g.nh.GetLeaderID(g.shardID)
	if err != nil || !valid || id == 0 {
		return 0, 0, false
	}
	return id, term, true
}

// ClusterLeader reports who leads group 0 (Kafka's controller).
func (e *Engine) ClusterLeader() (uint64, bool) {
	g := e.host.groups[0]
	id, _, valid, err := g.nh.GetLeaderID(g.shardID)
	return id, err == nil && valid && id != 0
}

// LedOpenTxns lists the open transactions of every group this node leads:
// the transactions this node coordinates.
func (e *Engine) LedOpenTxns() []storage.TxnInfo {
	var out []storage.TxnInfo
	for _, g := range e.host.groups {
		if e.host.leads(g) {
			out = append(out, g.store.KafkaOpenTxns()...)
		}
	}
	return out
}
