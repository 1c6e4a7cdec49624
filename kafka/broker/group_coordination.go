package broker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/broker/groups"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

// Group coordination plumbing shared by the group API keys: whether this
// node coordinates a consumer group, and the in-memory coordinator that
// holds it while it does. A consumer group is coordinated by the leader of
// the raft group its id hashes onto (Engine.CoordinatorGroup, as Kafka
// hashes group ids onto __consumer_offsets partitions), so a tenant's
// consumer groups spread over the nodes.

// leadershipCheckInterval is how often coordinators check that this node
// still leads their raft group.
const leadershipCheckInterval = time.Second

// maxOffsetMetadata is Kafka's offset.metadata.max.bytes.
const maxOffsetMetadata = 4096

// coordKey names one coordinator: the consumer groups of a tenant hashed
// onto one raft group.
type coordKey struct {
	tenant wire.ID
	group  int // the raft group
}

// coordinators holds one groups.Coordinator per tenant and raft group this
// node leads, stamped with the raft term it was built in. Losing that
// group's leadership (or winning it back in a later term, after another
// node coordinated meanwhile) discards it: clients rebuild their consumer
// groups at the new leader by rejoining (spec §3.1).
type coordinators struct {
	engine *raftgroups.Engine
	self   uint64
	cfg    groups.Config

	mu       sync.Mutex
	closed   bool
	byKey    map[coordKey]*termCoordinator
	watching bool
	stop     chan struct{}
	wg       sync.WaitGroup
	log      *slog.Logger

	// ctx ends at close: it bounds the barrier reads and membership
	// writes the coordinators make.
	ctx    context.Context
	cancel context.CancelFunc

	// pending holds the newest membership of each group not yet written
	// (members_writer.go); kick wakes the writer. pmu guards it alone:
	// coordinators enqueue under their own lock, which mu is held around
	// (Close), so enqueue must not take mu.
	pmu     sync.Mutex
	pending map[memberKey]pendingMembers
	kick    chan struct{}
	// seq orders enqueued memberships; enqueued is the newest seq of each
	// group, tried the newest whose write was tried, written the newest
	// whose write succeeded. wrote is closed and replaced after each write.
	seq      uint64
	enqueued map[memberKey]uint64
	tried    map[memberKey]uint64
	written  map[memberKey]uint64
	wrote    chan struct{}
}

type termCoordinator struct {
	term uint64
	c    *groups.Coordinator
}

func newCoordinators(engine *raftgroups.Engine, cfg Config, log *slog.Logger) *coordinators {
	gc := groups.Config{
		MinSessionTimeout:     cfg.GroupMinSessionTimeout,
		MaxSessionTimeout:     cfg.GroupMaxSessionTimeout,
		InitialRebalanceDelay: cfg.GroupJoinDelay,
		Logger:                log,

		ConsumerSessionTimeout:    cfg.ConsumerGroupSessionTimeout,
		ConsumerHeartbeatInterval: cfg.ConsumerGroupHeartbeatInterval,
	}
	if gc.MaxSessionTimeout <= 0 {
		gc.MinSessionTimeout, gc.MaxSessionTimeout = 6*time.Second, 5*time.Minute // spec §3.6 defaults
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &coordinators{engine: engine, self: uint64(cfg.NodeID), cfg: gc, log: log,
		byKey: map[coordKey]*termCoordinator{}, stop: make(chan struct{}),
		ctx: ctx, cancel: cancel, pending: map[memberKey]pendingMembers{}, kick: make(chan struct{}, 1),
		enqueued: map[memberKey]uint64{}, tried: map[memberKey]uint64{}, written: map[memberKey]uint64{},
		wrote: make(chan struct{})}
}

// get returns the coordinator of the tenant's consumer groups hashed onto
// raft group k.group when this node leads it, else NOT_COORDINATOR
// (another node leads: clients look it up again) or
// COORDINATOR_NOT_AVAILABLE (no leader right now). A coordinator built in
// a new term starts from the memberships recorded in raft, read after a
// barrier; until that read succeeds clients hear
// COORDINATOR_LOAD_IN_PROGRESS and retry, as from a Kafka coordinator
// loading its partition of __consumer_offsets.
func (cs *coordinators) get(k coordKey) (*groups.Coordinator, *kerr.Error) {
	leader, term, ok := cs.engine.Leader(k.group)
	if !ok {
		return nil, kerr.CoordinatorNotAvailable
	}
	if leader != cs.self {
		return nil, kerr.NotCoordinator
	}
	if c, kErr, found := cs.current(k, term); found {
		return c, kErr
	}
	ctx, cancel := context.WithTimeout(cs.ctx, restoreTimeout)
	recorded, err := cs.engine.GroupMembers(ctx, k.group, k.tenant)
	cancel()
	if err != nil {
		cs.log.Warn("kafka group memberships not read", "raft_group", k.group, "err", err)
		return nil, kerr.CoordinatorLoadInProgress
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil, kerr.CoordinatorNotAvailable
	}
	if tc := cs.byKey[k]; tc != nil && tc.term == term {
		return tc.c, nil // built by a request that read at the same time
	}
	if tc := cs.byKey[k]; tc != nil {
		tc.c.Close()
	}
	cfg := cs.cfg
	cfg.Known = func(group string) bool { return cs.engine.HasGroup(k.tenant, group) }
	cfg.Topics = func() []groups.TopicInfo { return consumerTopicInfos(cs.engine, k.tenant) }
	cfg.Restore = map[string]groups.Recorded{}
	for name, m := range recorded {
		cfg.Restore[name] = groups.Recorded{Generation: m.Generation, State: m.State}
	}
	cfg.Persist = func(group string, generation int32, state []byte) { cs.enqueue(k, term, group, generation, state) }
	tc := &termCoordinator{term: term, c: groups.New(cfg)}
	cs.byKey[k] = tc
	if !cs.watching {
		cs.watching = true
		cs.wg.Add(2)
		go cs.watch()
		go cs.writer()
	}
	return tc.c, nil
}

// current returns the coordinator of k built in term, if there is one.
func (cs *coordinators) current(k coordKey, term uint64) (*groups.Coordinator, *kerr.Error, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil, kerr.CoordinatorNotAvailable, true
	}
	if tc := cs.byKey[k]; tc != nil && tc.term == term {
		return tc.c, nil, true
	}
	return nil, nil, false
}

// watch discards the coordinators of raft groups this node no longer
// leads, so joins parked there hear NOT_COORDINATOR now rather than at
// their rebalance timeout.
func (cs *coordinators) watch() {
	defer cs.wg.Done()
	t := time.NewTicker(leadershipCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-cs.stop:
			return
		case <-t.C:
		}
		cs.mu.Lock()
		for k, tc := range cs.byKey {
			if leader, term, ok := cs.engine.Leader(k.group); !ok || leader != cs.self || term != tc.term {
				tc.c.Close()
				delete(cs.byKey, k)
			}
		}
		cs.mu.Unlock()
	}
}

// close stops the watcher and every coordinator.
func (cs *coordinators) close() {
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		return
	}
	cs.closed = true
	for k, tc := range cs.byKey {
		tc.c.Close()
		delete(cs.byKey, k)
	}
	close(cs.stop)
	cs.mu.Unlock()
	cs.cancel()
	cs.wg.Wait()
}

// groupCoordinator is the coordinator of a consumer group of the
// connection's tenant, or the Kafka error to answer with. Queen's implicit
// queue-mode group is no Kafka group: clients joining it, committing to it
// or deleting it would move the positions of every competing HTTP
// consumer.
func (b *Broker) groupCoordinator(c *kafka.Conn, group string) (wire.ID, *groups.Coordinator, *kerr.Error) {
	tenant := b.tenantOf(c)
	if group == wire.QueueModeGroup {
		return tenant, nil, kerr.InvalidGroupID
	}
	coord, err := b.groups.get(b.groupKey(tenant, group))
	return tenant, coord, err
}

// groupKey names the coordinator of the tenant's consumer group.
func (b *Broker) groupKey(tenant wire.ID, group string) coordKey {
	return coordKey{tenant, b.engine.CoordinatorGroup(tenant, 'g', group)}
}

// ledCoordinators returns the coordinators of the tenant's consumer groups
// on every raft group of the tenant this node leads, by raft group, or
// COORDINATOR_NOT_AVAILABLE while one of those groups has no leader (the
// consumer groups it coordinates are nowhere to be listed then).
func (b *Broker) ledCoordinators(tenant wire.ID) (map[int]*groups.Coordinator, *kerr.Error) {
	out := map[int]*groups.Coordinator{}
	for _, n := range b.engine.TenantGroups(tenant) {
		coord, kErr := b.groups.get(coordKey{tenant, n})
		switch kErr {
		case nil:
			out[n] = coord
		case kerr.NotCoordinator:
		default:
			return nil, kErr
		}
	}
	return out, nil
}

// admitGroupCommit checks that offsets of group may be committed by member
// at generation through this node: it coordinates the group and the member
// (not fenced by a newer incarnation of its static instance) is in it at
// that generation (see groups.Coordinator.AdmitCommit; a consumer-protocol
// member at its epoch, holding the partitions).
// OffsetCommit asks it before writing; TxnOffsetCommit v3, which carries
// the member and generation too, can ask it as well.
func (b *Broker) admitGroupCommit(c *kafka.Conn, cm groups.Commit) (wire.ID, *kerr.Error) {
	tenant, coord, kErr := b.groupCoordinator(c, cm.Group)
	if kErr == nil {
		kErr = b.admitGroup(tenant, coord, cm.Group)
	}
	if kErr != nil {
		return tenant, kErr
	}
	return tenant, coord.AdmitCommit(cm)
}

// nullable is s as a nullable string of a response, null for "".
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// deref is a nullable string of a request, "" for null.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// answerPositions writes the outcome of a write of group positions into
// each partition's response slot: the engine's error for every slot when
// the write failed, else the store's code for each.
func answerPositions(c *kafka.Conn, what, group string, slots []*int16, err error, code func(i int) wire.Code) {
	if err != nil {
		c.Logger().Warn("kafka group offsets not written", "op", what, "group", group, "err", err)
	}
	for i, slot := range slots {
		if err != nil {
			*slot = coordinatorCode(err)
		} else {
			*slot = coordinatorCode(code(i).Err())
		}
	}
}

// errCode is the wire code of a Kafka error (0 for none).
func errCode(err *kerr.Error) int16 {
	if err == nil {
		return 0
	}
	return err.Code
}

func millis(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }
