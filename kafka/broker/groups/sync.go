package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncRequest is a SyncGroup as the coordinator needs it.
type SyncRequest struct {
	Group      string
	MemberID   string
	InstanceID string // a static member's (SyncGroup v3+)
	Generation int32
	// ProtocolType and Protocol (SyncGroup v5+, "" when not sent) must be
	// the group's.
	ProtocolType, Protocol string
	// Assignments, from the leader only, maps member ids to the bytes
	// each will receive.
	Assignments map[string][]byte
}

// SyncResult is the answer to a SyncGroup.
type SyncResult struct {
	Err          *kerr.Error
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// Sync handles a SyncGroup. Followers block until the leader's sync brings
// the assignments (or the rebalance restarts); ctx ending returns its error.
func (c *Coordinator) Sync(ctx context.Context, req SyncRequest) (SyncResult, error) {
	return await(ctx, c, "sync", req.Group, func() (SyncResult, chan SyncResult) { return c.sync(req) })
}

func (c *Coordinator) sync(req SyncRequest) (SyncResult, chan SyncResult) {
	g, m, err := c.member(req.Group, req.MemberID, req.InstanceID, req.Generation)
	if err != nil {
		return SyncResult{Err: err}, nil
	}
	if (req.ProtocolType != "" && req.ProtocolType != g.protocolType) || (req.Protocol != "" && req.Protocol != g.protocol) {
		return SyncResult{Err: kerr.InconsistentGroupProtocol}, nil
	}
	switch g.state {
	case PreparingRebalance:
		return SyncResult{Err: kerr.RebalanceInProgress}, nil
	case Stable:
		c.heartbeat(g, m)
		return SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment}, nil
	case CompletingRebalance:
	default:
		return SyncResult{Err: kerr.UnknownMemberID}, nil
	}
	if m.syncWait != nil {
		m.syncWait <- SyncResult{Err: kerr.RebalanceInProgress}
	}
	m.syncWait = make(chan SyncResult, 1)
	m.syncedGen = g.generation
	wait := m.syncWait
	c.heartbeat(g, m)
	if m.id == g.leader {
		g.join.stop()
		for _, o := range g.members {
			o.assignment = req.Assignments[o.id]
		}
		g.state = Stable
		c.log.Debug("kafka group stable", "group", g.name, "generation", g.generation)
		c.persist(g)
		for _, o := range g.members {
			if o.syncWait != nil {
				o.syncWait <- SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: o.assignment}
				o.syncWait = nil
			}
		}
	}
	return SyncResult{}, wait
}

// member finds a member of a group at a generation: UNKNOWN_MEMBER_ID when
// either is unknown, FENCED_INSTANCE_ID for an old incarnation of a static
// member (group.current), ILLEGAL_GENERATION when the generation is an
// older one, REBALANCE_IN_PROGRESS when it is newer than any this
// coordinator saw (see unseenGeneration). The caller holds c.mu.
func (c *Coordinator) member(group, id, instanceID string, generation int32) (*group, *member, *kerr.Error) {
	if c.closed {
		return nil, nil, kerr.NotCoordinator
	}
	g := c.groups[group]
	if unseenGeneration(g, generation) {
		return g, nil, kerr.RebalanceInProgress
	}
	if g == nil {
		return nil, nil, kerr.UnknownMemberID
	}
	m, err := g.current(id, instanceID)
	if err != nil {
		return g, nil, err
	}
	if generation != g.generation {
		return g, m, kerr.IllegalGeneration
	}
	return g, m, nil
}

// unseenGeneration says whether a member speaks of a generation past the
// group's here (any, for a group not in memory). Only a coordinator that
// led before this one can have formed it, in a rebalance that never
// reached the raft log (membership is recorded once a generation is
// stable). The member is told the rebalance goes on, as clients rejoin on
// that quietly, where UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION would reach
// franz-go's and librdkafka's users as errors; its join then runs as
// any rejoin does.
func unseenGeneration(g *group, generation int32) bool {
	if g == nil {
		return generation > 0
	}
	return generation > g.generation
}

// Heartbeat keeps a member's session alive and tells it whether a
// rebalance is under way (REBALANCE_IN_PROGRESS: join again).
func (c *Coordinator) Heartbeat(group, memberID, instanceID string, generation int32) *kerr.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, m, err := c.member(group, memberID, instanceID, generation)
	if err != nil {
		return err
	}
	switch g.state {
	case PreparingRebalance:
		c.heartbeat(g, m)
		return kerr.RebalanceInProgress
	case CompletingRebalance, Stable:
		// A member between its join answer and its sync answer is alive
		// and in step: it is not told to rejoin.
		c.heartbeat(g, m)
		return nil
	}
	return kerr.UnknownMemberID
}

// Leaving is one member a LeaveGroup removes: by member id, by member id
// and instance id, or (v3+, admin tools) by instance id alone.
type Leaving struct {
	MemberID   string
	InstanceID string
}

// Leave removes members (LeaveGroup) and returns one code per member, in
// order. The group rebalances without them.
func (c *Coordinator) Leave(group string, leaving []Leaving) []*kerr.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*kerr.Error, len(leaving))
	g := c.groups[group]
	for i, l := range leaving {
		switch {
		case c.closed:
			out[i] = kerr.NotCoordinator
		case g == nil:
			out[i] = kerr.UnknownMemberID
		case l.MemberID == "" && l.InstanceID != "":
			m := g.members[g.static[l.InstanceID]]
			if m == nil {
				out[i] = kerr.UnknownMemberID
				continue
			}
			c.log.Debug("kafka group static member removed", "group", group, "instance", l.InstanceID, "member", m.id)
			c.removeAndRebalance(g, m)
		case g.pending[l.MemberID] != nil:
			g.pending[l.MemberID].stop()
			delete(g.pending, l.MemberID)
			if g.state == PreparingRebalance {
				c.tryCompleteJoin(g)
			}
			c.checkIdle(g)
		default:
			m, err := g.current(l.MemberID, l.InstanceID)
			if err != nil {
				out[i] = err
				continue
			}
			c.log.Debug("kafka group member left", "group", group, "member", m.id)
			c.removeAndRebalance(g, m)
		}
	}
	return out
}

// ValidateCommit says whether an OffsetCommit from memberID at generation
// may be written, as Kafka's classic groups decide: a commit with a
// negative generation and no member is an admin or simple-consumer commit,
// allowed while the group has no members; otherwise the member must be in
// the group at its generation, and not between join and sync. A valid
// commit counts as a heartbeat.
func (c *Coordinator) ValidateCommit(group, memberID, instanceID string, generation int32) *kerr.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return kerr.NotCoordinator
	}
	g := c.groups[group]
	if g == nil {
		if generation < 0 {
			return nil
		}
		// A member of a generation this coordinator never saw (an earlier
		// leader's): it must rejoin.
		return kerr.RebalanceInProgress
	}
	if generation < 0 && memberID == "" {
		if g.state == Empty {
			return nil
		}
		return kerr.UnknownMemberID
	}
	g, m, err := c.member(group, memberID, instanceID, generation)
	if err != nil {
		return err
	}
	if g.state == CompletingRebalance {
		return kerr.RebalanceInProgress
	}
	c.heartbeat(g, m)
	return nil
}

// Subscriptions reports the topics the group's live members consume, for
// OffsetDelete. inMemory is false when the group is not here. A non-empty
// group whose members are not Kafka consumers (unreadable metadata) answers
// NON_EMPTY_GROUP, since nothing can say which topics it uses.
func (c *Coordinator) Subscriptions(group string) (topics map[string]bool, inMemory bool, err *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false, kerr.NotCoordinator
	}
	if cg := c.consumers[group]; cg != nil {
		topics = map[string]bool{}
		for _, ts := range c.resolve(cg) {
			for _, t := range ts {
				topics[t.Name] = true
			}
		}
		return topics, true, nil
	}
	g := c.groups[group]
	if g == nil {
		return nil, false, nil
	}
	topics = map[string]bool{}
	if len(g.members) == 0 {
		return topics, true, nil
	}
	if g.protocolType != "consumer" {
		return nil, true, kerr.NonEmptyGroup
	}
	for _, m := range g.members {
		for _, p := range m.protocols {
			var meta kmsg.ConsumerMemberMetadata
			if err := meta.ReadFrom(p.Metadata); err != nil {
				continue
			}
			for _, t := range meta.Topics {
				topics[t] = true
			}
		}
	}
	return topics, true, nil
}
