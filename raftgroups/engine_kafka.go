package raftgroups

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// The engine calls the Kafka facade makes: producer-checked appends,
// producer ids, transactions, topic administration, the node registry and
// where leadership is. Like every engine write they return once the command
// is applied on this node.

// KafkaBody is one pre-encoded command of a produce (wire.KafkaProduceCmd,
// or wire.KafkaStageCmd for a transactional batch) and the group holding
// its partition. Tail, when set, ends the command (wire.Command.Tail): the
// batch as it arrived, copied only into the raft entry.
type KafkaBody struct {
	Group int
	Kind  wire.Kind // KindKafkaProduce when zero
	Body  []byte
	Tail  []byte
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
			kind := bodies[i].Kind
			if kind == 0 {
				kind = wire.KindKafkaProduce
			}
			cmds[j] = wire.Command{Kind: kind, Body: bodies[i].Body, Tail: bodies[i].Tail}
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
//
// Fencing a transactional id aborts its open transaction. The new epoch is
// answered only once that transaction (and any earlier one not yet
// settled) is resolved in every group it wrote to; until then the answer
// is CodeTxnUnsettled (Kafka's CONCURRENT_TRANSACTIONS), which clients
// retry. So the new epoch's batches always follow the old one's markers.
func (e *Engine) InitProducer(ctx context.Context, c *wire.InitProducerCmd) (wire.InitProducerResult, error) {
	if !c.Transactional {
		groups := e.TenantGroups(c.Tenant)
		return proposeOne(ctx, e, groups[rand.IntN(len(groups))], wire.KindKafkaInitProducer, c.Encode(nil), wire.DecodeInitProducerResult)
	}
	g := e.CoordinatorGroup(c.Tenant, 't', c.TxnID)
	if err := e.Barrier(ctx, g); err != nil {
		return wire.InitProducerResult{}, err
	}
	if !e.settleIDWithin(ctx, g, c.Tenant, c.TxnID) {
		return wire.InitProducerResult{Code: wire.CodeTxnUnsettled}, nil
	}
	res, err := proposeOne(ctx, e, g, wire.KindKafkaInitProducer, c.Encode(nil), wire.DecodeInitProducerResult)
	if err != nil || res.Code != wire.CodeOK {
		return res, err
	}
	// The init applied here: the state says whether it aborted a
	// transaction (it is then unsettled), whatever this node read before.
	if !e.settleIDWithin(ctx, g, c.Tenant, c.TxnID) {
		return wire.InitProducerResult{Code: wire.CodeTxnUnsettled}, nil
	}
	return res, nil
}

// settleWait bounds how long an InitProducerId waits for a group to
// resolve the transaction it ends before answering "retry": a client told
// CONCURRENT_TRANSACTIONS soon comes back, one left waiting may time out.
const settleWait = 5 * time.Second

// settleIDWithin settles transactional id txnID's last transaction, when
// this node's replica of its coordinator group shows it unsettled, within
// settleWait, and reports whether the id may go on.
func (e *Engine) settleIDWithin(ctx context.Context, coord int, tenant wire.ID, txnID string) bool {
	info, ok := e.KafkaTxn(tenant, txnID)
	if !ok || info.Unsettled.IsZero() {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, settleWait)
	defer cancel()
	if err := e.settleTxn(ctx, coord, info); err != nil {
		e.host.log.Debug("raft: settling a transaction for an init", "transactional_id", txnID, "err", err)
		return false
	}
	return true
}

// settleTxn makes sure the ended transaction info.Unsettled is resolved in
// every group it staged in, as its coordinator decided (an abort is
// recorded if nothing was), then lets the transactional id begin its next.
// Resolving is idempotent: a group that resolved it already answers as it
// did.
func (e *Engine) settleTxn(ctx context.Context, coord int, info storage.TxnInfo) error {
	commit, err := e.decisionOf(ctx, coord, info.Unsettled)
	if err != nil {
		return err
	}
	return e.settleTxnAs(ctx, coord, info, commit)
}

// settleTxnAs is settleTxn for a transaction whose decision is known.
func (e *Engine) settleTxnAs(ctx context.Context, coord int, info storage.TxnInfo, commit bool) error {
	xid := info.Unsettled
	body := (&wire.XResolveCmd{ID: xid, Commit: commit}).Encode(nil)
	groups := groupsOf(info.Groups)
	errs := make([]error, len(groups))
	fanOut(len(groups), func(i int) {
		if groups[i] < len(e.host.groups) {
			_, errs[i] = e.Propose(ctx, groups[i], wire.Command{Kind: wire.KindXResolve, Body: body})
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if e.ActiveFormat(coord) >= wire.FormatV2 { // before it, nothing waits for the settle
		settled := wire.TxnSettledCmd{Tenant: info.Tenant, TxnID: info.TxnID, XID: xid}
		if _, err := proposeOne(ctx, e, coord, wire.KindKafkaTxnSettled, settled.Encode(nil), wire.DecodeCodeResult); err != nil {
			return err
		}
	}
	if commit {
		e.host.forget(coord, xid)
	}
	return nil
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

// TxnBegin opens a producer's transaction (if it is not open) and records
// the groups it stages records or offsets in (TxnBeginCmd.Groups).
func (e *Engine) TxnBegin(ctx context.Context, c *wire.TxnBeginCmd) (wire.KafkaTxnResult, error) {
	return proposeOne(ctx, e, e.CoordinatorGroup(c.Tenant, 't', c.TxnID), wire.KindKafkaTxnBegin, c.Encode(nil), wire.DecodeKafkaTxnResult)
}

// KafkaStageDeadline is when a group's staged part of a transaction, still
// undecided, asks the coordinator group for the decision (and records an
// abort when there is none): well after the transaction's own timeout, at
// which the coordinator's leader aborts it itself.
func KafkaStageDeadline(info storage.TxnInfo) int64 {
	return info.BeganMs + int64(info.TimeoutMs) + stageGraceMs
}

// stageGraceMs is how long past a transaction's timeout its participants
// wait for the coordinator before deciding for it.
const stageGraceMs = 60_000

// TxnEnd ends a transaction at its coordinator group, committed or aborted,
// and resolves the pieces it staged in every group it recorded. The
// coordinator's EndTxn is the decision entry of a two-phase commit
// (wire/xtxn.go): the first decision recorded for the transaction stands,
// so a participant that gave up waiting and recorded an abort turns a late
// commit into an abort (answered CodeConflict), and the transactional id's
// state always agrees with what its participants did. Participants not
// reached now are resolved by the coordinator's finisher (settleKafkaTxns),
// and the id begins no new transaction before that.
func (e *Engine) TxnEnd(ctx context.Context, c *wire.TxnEndCmd) (wire.KafkaTxnResult, error) {
	coord := e.CoordinatorGroup(c.Tenant, 't', c.TxnID)
	if err := e.Barrier(ctx, coord); err != nil {
		return wire.KafkaTxnResult{}, err
	}
	info, ok := e.KafkaTxn(c.Tenant, c.TxnID)
	if !ok || info.ProducerID != c.ProducerID || info.TxnSeq != c.TxnSeq {
		// Not this transaction (or not open): the state machine answers why.
		return proposeOne(ctx, e, coord, wire.KindKafkaTxnEnd, c.Encode(nil), wire.DecodeKafkaTxnResult)
	}
	xid := storage.KafkaTxnXID(info)
	var participants []uint16
	for _, g := range groupsOf(info.Groups) {
		if g < len(e.host.groups) {
			participants = append(participants, uint16(g))
		}
	}
	decide := wire.XDecideCmd{ID: xid, Commit: c.Commit, Participants: participants,
		Own: wire.Command{Kind: wire.KindKafkaTxnEnd, Body: c.Encode(nil)}}
	d, err := proposeOne(ctx, e, coord, wire.KindXDecide, decide.Encode(nil), wire.DecodeXDecideResult)
	if err != nil {
		return wire.KafkaTxnResult{}, err
	}
	res, err := wire.DecodeKafkaTxnResult(d.Own)
	if err != nil {
		return wire.KafkaTxnResult{}, fmt.Errorf("raftgroups: end transaction result: %w", err)
	}
	if res.Code != wire.CodeOK && !d.Commit {
		return res, nil // refused (fenced, not open): nothing to resolve for it
	}
	if c.Commit != d.Commit {
		res.Code = wire.CodeConflict // it had already ended the other way
	}
	if d.Commit {
		e.host.crashAt(FaultAfterDecide)
	}
	// Resolve every group it staged in and let the id begin its next
	// transaction. Not reached now, the coordinator's finisher
	// (settleKafkaTxns) does it; the id's next transaction waits for it.
	ended := info
	ended.Unsettled = xid
	if err := e.settleTxnAs(ctx, coord, ended, d.Commit); err != nil {
		return wire.KafkaTxnResult{}, fmt.Errorf("%w: a group did not resolve the transaction: %w", ErrNoLeader, err)
	}
	return res, nil
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

// TopicSettings is what a topic's configs make queen do, from its home.
func (e *Engine) TopicSettings(tenant wire.ID, name string) (wire.TopicSettings, bool) {
	return e.GroupStore(e.Home(tenant, name)).TopicSettings(tenant, name)
}

// CleanedTopics lists the Kafka topics whose configs ask for the log
// cleaner, from every home store on this node (each topic once: it has
// one home).
func (e *Engine) CleanedTopics() []storage.CleanedTopic {
	var out []storage.CleanedTopic
	for _, g := range e.host.groups {
		out = append(out, g.store.CleanedTopics()...)
	}
	return out
}

// LogClean proposes a Kafka log clean to the raft group holding its
// partition.
func (e *Engine) LogClean(ctx context.Context, group int, c *wire.LogCleanCmd) (wire.CountResult, error) {
	if group < 0 || group >= len(e.host.groups) {
		return wire.CountResult{Code: wire.CodePartitionNotFound}, nil
	}
	return proposeOne(ctx, e, group, wire.KindKafkaLogClean, c.Encode(nil), wire.DecodeCountResult)
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

// KafkaNodes is the node registry as this node has applied it, less nodes
// no longer in the raft membership (removed or replaced): clients must not
// be sent to a node that left.
func (e *Engine) KafkaNodes() []storage.NodeAddr {
	return slices.DeleteFunc(e.host.groups[0].store.KafkaNodes(), func(n storage.NodeAddr) bool { return !e.host.IsMember(n.ID) })
}

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
		if e.host.leads(g) && !e.host.following(g) { // a standby's source ends them
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

// SaveGroupMembers records a consumer group's membership in raft group n,
// the group its coordinator leads, so the next coordinator continues it.
func (e *Engine) SaveGroupMembers(ctx context.Context, n int, c *wire.GroupMembersCmd) error {
	_, err := proposeOne(ctx, e, n, wire.KindGroupMembers, c.Encode(nil), wire.DecodeCodeResult)
	return err
}

// GroupMembers returns the memberships of the tenant's consumer groups
// recorded in raft group n, after a barrier: a coordinator taking over
// must see every membership its predecessor committed.
func (e *Engine) GroupMembers(ctx context.Context, n int, tenant wire.ID) (map[string]storage.GroupMembers, error) {
	if err := e.Barrier(ctx, n); err != nil {
		return nil, err
	}
	return e.GroupStore(n).GroupMembersOf(tenant), nil
}
