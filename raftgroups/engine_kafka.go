package raftgroups

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// The engine calls the Kafka facade makes: producer-checked appends,
// producer ids, transactions, topic administration, the node registry and
// where leadership is. Like every engine write they return once the command
// is applied on this node.

// KafkaBody is one pre-encoded wire.KafkaProduceCmd and the group holding
// its partition.
type KafkaBody struct {
	Group int
	Body  []byte
}

// KafkaProduce queues pre-encoded produce commands (built by the handler in
// their final buffers), each in its partition's group, and returns the
// function that waits for their results. A group's share commits in one
// raft entry; produces queued one after the other are applied in that
// order within each group, which is what keeps a client's pipelined
// batches to a partition in order.
func (e *Engine) KafkaProduce(bodies []KafkaBody) (func(context.Context) ([]wire.KafkaProduceResult, error), error) {
	if e.host.closed.Load() {
		return nil, ErrClosed
	}
	byGroup := map[int][]int{}
	var groups []int
	for i, b := range bodies {
		if b.Group < 0 || b.Group >= len(e.host.groups) {
			return nil, fmt.Errorf("raftgroups: no group %d", b.Group)
		}
		if _, ok := byGroup[b.Group]; !ok {
			groups = append(groups, b.Group)
		}
		byGroup[b.Group] = append(byGroup[b.Group], i)
	}
	waits := make([]func(context.Context) ([][]byte, error), len(groups))
	for k, g := range groups {
		idx := byGroup[g]
		cmds := make([]wire.Command, len(idx))
		size := 0
		for j, i := range idx {
			cmds[j] = wire.Command{Kind: wire.KindKafkaProduce, Body: bodies[i].Body}
			size += cmds[j].EncodedLen()
		}
		if size > e.host.cfg.MaxEntryBytes {
			return nil, ErrTooLarge
		}
		w, err := e.host.groups[g].prop.enqueue(cmds)
		if err != nil {
			return nil, err
		}
		waits[k] = w
	}
	return func(ctx context.Context) ([]wire.KafkaProduceResult, error) {
		out := make([]wire.KafkaProduceResult, len(bodies))
		errs := make([]error, len(groups))
		fanOut(len(groups), func(k int) {
			res, err := waits[k](ctx)
			if err != nil {
				errs[k] = err
				return
			}
			for j, i := range byGroup[groups[k]] {
				b := res[j]
				if code, bare := wire.ResultCode(b); bare {
					out[i].Code = code // refused before it was decoded
					continue
				}
				if out[i], err = wire.DecodeKafkaProduceResult(b); err != nil {
					errs[k] = fmt.Errorf("raftgroups: produce result: %w", err)
					return
				}
			}
		})
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		return out, nil
	}, nil
}

// CoordinatorGroup is the group whose leader coordinates a Kafka consumer
// group (kind 'g') or transactional id (kind 't').
func (e *Engine) CoordinatorGroup(tenant wire.ID, kind byte, id string) int {
	return e.place.Coordinator(tenant, kind, id)
}

// InitProducer allocates a producer id, or fences a transactional id's
// previous producer. A transactional id's state lives in its coordinator's
// group; an idempotent producer's id comes from any group (ids carry the
// group that made them, so they never collide).
func (e *Engine) InitProducer(ctx context.Context, c *wire.InitProducerCmd) (wire.InitProducerResult, error) {
	g := e.CoordinatorGroup(c.Tenant, 't', c.TxnID)
	if !c.Transactional {
		groups := e.TenantGroups(c.Tenant)
		g = groups[rand.IntN(len(groups))]
	}
	return proposeOne(ctx, e, g, wire.KindKafkaInitProducer, c.Encode(nil), wire.DecodeInitProducerResult)
}

// KafkaTxn is a transactional id's state, from its coordinator's group.
func (e *Engine) KafkaTxn(tenant wire.ID, txnID string) (storage.TxnInfo, bool) {
	return e.GroupStore(e.CoordinatorGroup(tenant, 't', txnID)).KafkaTxn(tenant, txnID)
}

// TxnCoordinator reports which node leads a transactional id's group and in
// which term.
func (e *Engine) TxnCoordinator(tenant wire.ID, txnID string) (node, term uint64, ok bool) {
	return e.Leader(e.CoordinatorGroup(tenant, 't', txnID))
}

// TxnBegin marks a transaction open.
func (e *Engine) TxnBegin(ctx context.Context, c *wire.TxnBeginCmd) (wire.KafkaTxnResult, error) {
	return proposeOne(ctx, e, e.CoordinatorGroup(c.Tenant, 't', c.TxnID), wire.KindKafkaTxnBegin, c.Encode(nil), wire.DecodeKafkaTxnResult)
}

// TxnEnd commits (records and offsets) or aborts a transaction. Its state
// lives in the transactional id's group; its records and offsets in their
// partitions' groups. A commit touching only that group is one raft entry;
// one touching others is a two-phase commit whose decision entry is the
// coordinator's own TxnEnd, so the transactional id's state and the
// decision can never disagree. An abort ends the transaction there, then
// moves the producer's sequences past its batches in the other groups.
func (e *Engine) TxnEnd(ctx context.Context, c *wire.TxnEndCmd) (wire.KafkaTxnResult, error) {
	coord := e.CoordinatorGroup(c.Tenant, 't', c.TxnID)
	own, parts := e.splitKafkaTxn(c, coord)
	if len(parts) == 0 {
		return proposeOne(ctx, e, coord, wire.KindKafkaTxnEnd, own.Encode(nil), wire.DecodeKafkaTxnResult)
	}
	if !c.Commit {
		res, err := proposeOne(ctx, e, coord, wire.KindKafkaTxnEnd, own.Encode(nil), wire.DecodeKafkaTxnResult)
		if err != nil || res.Code != wire.CodeOK || c.BumpEpoch {
			return res, err // with a bumped epoch, sequences start again anyway
		}
		return res, e.abortKafkaParts(ctx, c, coord, parts)
	}
	began := int64(0)
	if info, ok := e.KafkaTxn(c.Tenant, c.TxnID); ok {
		began = info.BeganMs
	}
	xid := kafkaXID(c, began)
	others := make([]*txnPart, len(parts))
	subs := make([]wire.Command, len(parts))
	for i, p := range parts {
		others[i] = &txnPart{group: p.group}
		subs[i] = wire.Command{Kind: wire.KindKafkaTxnEnd, Body: p.cmd.Encode(nil)}
	}
	out, err := e.twoPhase(ctx, xid, coord, nil, wire.Command{Kind: wire.KindKafkaTxnEnd, Body: own.Encode(nil)}, others, subs)
	if err != nil {
		return wire.KafkaTxnResult{}, err
	}
	if out.own != nil {
		if r, err := wire.DecodeKafkaTxnResult(out.own); err == nil {
			if !out.commit && r.Code == wire.CodeOK {
				r.Code = wire.CodeConflict
			}
			return r, nil
		}
	}
	if !out.commit {
		// A participant refused (its partition is gone): the transaction is
		// aborted at the coordinator, and the producer fenced.
		abort := *own
		abort.Commit, abort.BumpEpoch = false, true
		if _, err := proposeOne(ctx, e, coord, wire.KindKafkaTxnEnd, abort.Encode(nil), wire.DecodeKafkaTxnResult); err != nil {
			return wire.KafkaTxnResult{}, err
		}
		return wire.KafkaTxnResult{Code: wire.CodePartitionNotFound}, nil
	}
	return wire.KafkaTxnResult{Code: wire.CodeOK}, nil
}

// kafkaPart is one group's share of a Kafka transaction.
type kafkaPart struct {
	group int
	cmd   *wire.TxnEndCmd
}

// splitKafkaTxn splits a TxnEnd's pushes and offsets by the group holding
// their partitions: own is the coordinator's share (with the whole
// transaction's identity), parts the others'.
func (e *Engine) splitKafkaTxn(c *wire.TxnEndCmd, coord int) (*wire.TxnEndCmd, []kafkaPart) {
	own := *c
	own.Pushes, own.Offsets = nil, nil
	by := map[int]*wire.TxnEndCmd{}
	var groups []int
	get := func(queue string, index uint32) *wire.TxnEndCmd {
		g := coord
		if d, ok := e.DirByIndex(c.Tenant, queue, index); ok {
			g = int(d.Group)
		}
		if g == coord {
			return &own
		}
		p := by[g]
		if p == nil {
			p = &wire.TxnEndCmd{Tenant: c.Tenant, TxnID: c.TxnID, ProducerID: c.ProducerID, Epoch: c.Epoch,
				TxnSeq: c.TxnSeq, Commit: c.Commit, BumpEpoch: c.BumpEpoch, StateTTLMs: c.StateTTLMs}
			by[g] = p
			groups = append(groups, g)
		}
		return p
	}
	for _, p := range c.Pushes {
		t := get(p.Queue, p.PartitionIndex)
		t.Pushes = append(t.Pushes, p)
	}
	for _, o := range c.Offsets {
		t := get(o.Queue, o.PartitionIndex)
		t.Offsets = append(t.Offsets, o)
	}
	slices.Sort(groups)
	parts := make([]kafkaPart, len(groups))
	for i, g := range groups {
		parts[i] = kafkaPart{group: g, cmd: by[g]}
	}
	return &own, parts
}

// abortKafkaParts moves the producer's sequences past an aborted
// transaction's batches in the groups other than the coordinator's: a
// prepare resolved as an abort in the same entry.
func (e *Engine) abortKafkaParts(ctx context.Context, c *wire.TxnEndCmd, coord int, parts []kafkaPart) error {
	began := int64(0)
	if info, ok := e.KafkaTxn(c.Tenant, c.TxnID); ok {
		began = info.BeganMs
	}
	xid := kafkaXID(c, began)
	xid[15] ^= 0xff // not the commit's id
	errs := make([]error, len(parts))
	fanOut(len(parts), func(i int) {
		p := parts[i]
		prep := wire.XPrepareCmd{ID: xid, Coord: uint16(coord), Sub: wire.Command{Kind: wire.KindKafkaTxnEnd, Body: p.cmd.Encode(nil)}}
		res := wire.XResolveCmd{ID: xid, Commit: false}
		out, err := e.Propose(ctx, p.group, wire.Command{Kind: wire.KindXPrepare, Body: prep.Encode(nil)},
			wire.Command{Kind: wire.KindXResolve, Body: res.Encode(nil)})
		if err != nil {
			errs[i] = err
			return
		}
		if r, err := wire.DecodeXResolveResult(out[0]); err != nil || r.Code != wire.CodeOK {
			errs[i] = fmt.Errorf("raftgroups: abort in group %d: prepare answered %v %v", p.group, r.Code, err)
		}
	})
	return errors.Join(errs...)
}

// CreateTopic creates a Kafka topic at its home and its partitions in their
// groups.
func (e *Engine) CreateTopic(ctx context.Context, c *wire.CreateTopicCmd) (wire.AllocResult, error) {
	c.Place = e.place.Queue(c.Tenant, c.Name)
	res, err := proposeOne(ctx, e, e.Home(c.Tenant, c.Name), wire.KindKafkaCreateTopic, c.Encode(nil), wire.DecodeAllocResult)
	if err != nil || res.Code != wire.CodeOK {
		return res, err
	}
	return res, e.ensureDirShards(ctx, c.Tenant, c.Name, &res)
}

// CreatePartitions grows a topic.
func (e *Engine) CreatePartitions(ctx context.Context, c *wire.CreatePartitionsCmd) (wire.AllocResult, error) {
	res, err := proposeOne(ctx, e, e.Home(c.Tenant, c.Name), wire.KindKafkaCreatePartitions, c.Encode(nil), wire.DecodeAllocResult)
	if err != nil || res.Code != wire.CodeOK {
		return res, err
	}
	return res, e.ensureDirShards(ctx, c.Tenant, c.Name, &res)
}

// ensureDirShards creates an allocation's partitions in their groups.
func (e *Engine) ensureDirShards(ctx context.Context, tenant wire.ID, queue string, res *wire.AllocResult) error {
	home := e.Home(tenant, queue)
	r := &resolved{cat: res.Catalog, parts: res.Parts, ensure: map[int]*wire.EnsureShardCmd{}}
	for _, d := range res.Parts {
		g := int(d.Group)
		if g == home || g >= len(e.host.groups) {
			continue
		}
		es := r.ensure[g]
		if es == nil {
			es = &wire.EnsureShardCmd{Tenant: tenant, Queue: queue, Catalog: res.Catalog}
			r.ensure[g] = es
		}
		es.Parts = append(es.Parts, d)
	}
	return e.ensureShards(ctx, r)
}

// DeleteTopic deletes a topic and its Kafka bookkeeping everywhere.
func (e *Engine) DeleteTopic(ctx context.Context, c *wire.DeleteTopicCmd) (wire.CodeResult, error) {
	res, err := proposeOne(ctx, e, e.Home(c.Tenant, c.Name), wire.KindKafkaDeleteTopic, c.Encode(nil), wire.DecodeDeleteQueueResult)
	if err != nil || res.Code != wire.CodeOK {
		return wire.CodeResult{Code: res.Code}, err
	}
	return wire.CodeResult{Code: wire.CodeOK}, e.dropShards(ctx, c.Tenant, c.Name, res.Inc, res.Groups)
}

// AlterTopicConfig changes a Kafka topic's configs at its home and carries
// the options they map onto to its other groups.
func (e *Engine) AlterTopicConfig(ctx context.Context, c *wire.TopicConfigCmd) (wire.CodeResult, error) {
	res, err := proposeOne(ctx, e, e.Home(c.Tenant, c.Name), wire.KindKafkaTopicConfig, c.Encode(nil), wire.DecodeCodeResult)
	if err != nil || res.Code != wire.CodeOK {
		return res, err
	}
	if cat, ok := e.Catalog(c.Tenant, c.Name); ok {
		return res, e.propagateCatalog(ctx, c.Tenant, c.Name, cat)
	}
	return res, nil
}

// KafkaTopics lists the tenant's queues as topics, from their homes.
func (e *Engine) KafkaTopics(tenant wire.ID) []storage.Topic {
	var out []storage.Topic
	for _, g := range e.TenantGroups(tenant) {
		out = append(out, e.GroupStore(g).KafkaTopics(tenant)...)
	}
	slices.SortFunc(out, func(a, b storage.Topic) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// KafkaTopic is one topic, from its home.
func (e *Engine) KafkaTopic(tenant wire.ID, name string) (storage.Topic, bool) {
	return e.GroupStore(e.Home(tenant, name)).KafkaTopic(tenant, name)
}

// TopicConfigs is a topic's configs, from its home.
func (e *Engine) TopicConfigs(tenant wire.ID, name string) (configs []wire.ConfigEntry, kafka, ok bool) {
	return e.GroupStore(e.Home(tenant, name)).TopicConfigs(tenant, name)
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

// ClusterLeader reports who leads group 0 (Kafka's controller).
func (e *Engine) ClusterLeader() (uint64, bool) {
	id, _, ok := e.Leader(0)
	return id, ok
}

// PartitionLeader reports which node leads the group holding partition
// index of a queue, and its term (the partition's leader epoch).
func (e *Engine) PartitionLeader(tenant wire.ID, queue string, index uint32) (node, term uint64, ok bool) {
	d, found := e.DirByIndex(tenant, queue, index)
	if !found {
		return 0, 0, false
	}
	return e.Leader(int(d.Group))
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

// HasGroup reports whether any of the tenant's groups holds positions or a
// subscription of consumer group name.
func (e *Engine) HasGroup(tenant wire.ID, name string) bool {
	for _, g := range e.TenantGroups(tenant) {
		if e.GroupStore(g).HasGroup(tenant, name) {
			return true
		}
	}
	return false
}

// GroupNames lists the tenant's consumer groups over all its raft groups.
func (e *Engine) GroupNames(tenant wire.ID) []string {
	var out []string
	for _, g := range e.TenantGroups(tenant) {
		out = append(out, e.GroupStore(g).GroupNames(tenant)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
