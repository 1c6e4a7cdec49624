package groups

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// JoinRequest is a JoinGroup as the coordinator needs it.
type JoinRequest struct {
	Group            string
	MemberID         string // "" for a member joining for the first time
	ClientID         string
	ClientHost       string
	ProtocolType     string
	Protocols        []Protocol
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration // JoinGroup v0 has none: pass SessionTimeout
	// RequireKnownMemberID (JoinGroup v4+) answers a first join with
	// MEMBER_ID_REQUIRED and a member id to join again with, so a client
	// that times out and retries cannot leave orphan members behind.
	RequireKnownMemberID bool
	// InstanceID is the member's group.instance.id (JoinGroup v5+), ""
	// for a dynamic member (static.go).
	InstanceID string
	// SkipAssignment (JoinGroup v9+) lets a static leader that rejoins a
	// stable group be told it leads without being asked to assign
	// (KIP-814).
	SkipAssignment bool
}

// JoinMember is one member as the leader's JoinGroup response lists it.
type JoinMember struct {
	MemberID   string
	InstanceID string // a static member's
	Metadata   []byte
}

// JoinResult is the answer to a JoinGroup.
type JoinResult struct {
	Err          *kerr.Error
	Generation   int32
	ProtocolType string
	Protocol     string
	LeaderID     string
	MemberID     string
	Members      []JoinMember // the leader's only: every member with its metadata
	// SkipAssignment tells a leader to keep the current assignments: a
	// static leader rejoined a stable group (KIP-814).
	SkipAssignment bool
}

// Join handles a JoinGroup. It blocks until the rebalance the join takes
// part in completes (or ctx ends, which returns ctx's error: the client is
// gone), as Kafka parks JoinGroup requests.
func (c *Coordinator) Join(ctx context.Context, req JoinRequest) (JoinResult, error) {
	return await(ctx, c, "join", req.Group, func() (JoinResult, chan JoinResult) { return c.join(req) })
}

// await runs op under c.mu and, when op parks the request, waits for its
// answer or for ctx to end.
func await[R any](ctx context.Context, c *Coordinator, what, group string, op func() (R, chan R)) (R, error) {
	c.mu.Lock()
	res, wait := op()
	c.mu.Unlock()
	if wait == nil {
		return res, nil
	}
	select {
	case r := <-wait:
		return r, nil
	case <-ctx.Done():
		var zero R
		return zero, fmt.Errorf("groups: %s of %q abandoned: %w", what, group, ctx.Err())
	}
}

func (c *Coordinator) join(req JoinRequest) (JoinResult, chan JoinResult) {
	switch {
	case c.closed:
		return errJoin(kerr.NotCoordinator, req.MemberID), nil
	case req.Group == "":
		return errJoin(kerr.InvalidGroupID, req.MemberID), nil
	case req.SessionTimeout < c.cfg.MinSessionTimeout || req.SessionTimeout > c.cfg.MaxSessionTimeout:
		return errJoin(kerr.InvalidSessionTimeout, req.MemberID), nil
	case req.ProtocolType == "" || len(req.Protocols) == 0:
		return errJoin(kerr.InconsistentGroupProtocol, req.MemberID), nil
	}
	if c.consumers[req.Group] != nil {
		// A consumer-protocol group with members: one kind at a time.
		return errJoin(kerr.InconsistentGroupProtocol, req.MemberID), nil
	}
	g := c.groups[req.Group]
	if g != nil && !g.supports(req.ProtocolType, req.Protocols) {
		return errJoin(kerr.InconsistentGroupProtocol, req.MemberID), nil
	}
	if g == nil {
		if req.MemberID != "" {
			// A member of a group this coordinator does not know (it was
			// built by an earlier leader): it must join afresh.
			return errJoin(kerr.UnknownMemberID, req.MemberID), nil
		}
		g = newGroup(req.Group)
		c.groups[req.Group] = g
	}
	g.idle.stop()
	if req.MemberID == "" && req.InstanceID != "" {
		return c.joinStatic(g, req)
	}
	if req.MemberID == "" {
		id := c.cfg.NewMemberID(req.ClientID)
		if req.RequireKnownMemberID {
			c.addPending(g, id, req.SessionTimeout)
			return errJoin(kerr.MemberIDRequired, id), nil
		}
		return JoinResult{}, c.addMember(g, id, req)
	}
	if p, ok := g.pending[req.MemberID]; ok {
		p.stop()
		delete(g.pending, req.MemberID)
		return JoinResult{}, c.addMember(g, req.MemberID, req)
	}
	m, err := g.current(req.MemberID, req.InstanceID)
	if err != nil {
		c.checkIdle(g)
		return errJoin(err, req.MemberID), nil
	}
	switch g.state {
	case CompletingRebalance:
		if sameProtocols(m.protocols, req.Protocols) {
			// A retried join of this generation: answer it again.
			return c.joinResult(g, m), nil
		}
	case Stable:
		if m.id != g.leader && sameProtocols(m.protocols, req.Protocols) {
			c.heartbeat(g, m)
			return c.joinResult(g, m), nil
		}
		// The leader rejoining (it saw new topics) or changed metadata
		// (a cooperative member's owned partitions) starts a rebalance.
	}
	return JoinResult{}, c.updateMember(g, m, req)
}

// addPending remembers a member id handed out with MEMBER_ID_REQUIRED; it
// is forgotten unless the client joins with it within its session timeout.
func (c *Coordinator) addPending(g *group, id string, session time.Duration) {
	g.pending[id] = c.after(session, func() {
		delete(g.pending, id)
		if g.state == PreparingRebalance {
			c.tryCompleteJoin(g)
		}
		c.checkIdle(g)
	})
}

func (c *Coordinator) addMember(g *group, id string, req JoinRequest) chan JoinResult {
	g.joinSeq++
	m := &member{id: id, instanceID: req.InstanceID, clientID: req.ClientID, clientHost: req.ClientHost, seq: g.joinSeq}
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	g.members[id] = m
	if m.instanceID != "" {
		g.static[m.instanceID] = id
	}
	if g.leader == "" {
		g.leader = id
	}
	if g.initial {
		g.newMemberAdded = true
	}
	return c.updateMember(g, m, req)
}

// updateMember records a member's (re)join and moves the group toward a
// rebalance that includes it.
func (c *Coordinator) updateMember(g *group, m *member, req JoinRequest) chan JoinResult {
	m.protocols = req.Protocols
	m.sessionTimeout, m.rebalanceTimeout = req.SessionTimeout, req.RebalanceTimeout
	if m.joinWait != nil {
		// The client sent a second join before the first was answered:
		// the first connection is gone or confused; it gets a retryable error.
		m.joinWait <- errJoin(kerr.RebalanceInProgress, m.id)
	}
	m.joinWait = make(chan JoinResult, 1)
	c.heartbeat(g, m)
	wait := m.joinWait
	if g.state == PreparingRebalance {
		c.tryCompleteJoin(g)
	} else {
		c.prepareRebalance(g)
	}
	return wait
}

// prepareRebalance starts a rebalance: members must join again. An empty
// group waits the initial delay for more members first.
func (c *Coordinator) prepareRebalance(g *group) {
	if g.state == CompletingRebalance {
		for _, m := range g.members {
			m.assignment = nil
			if m.syncWait != nil {
				m.syncWait <- SyncResult{Err: kerr.RebalanceInProgress}
				m.syncWait = nil
			}
		}
	}
	wasEmpty := g.state == Empty
	g.state = PreparingRebalance
	g.join.stop()
	timeout := g.maxRebalanceTimeout()
	c.log.Debug("kafka group rebalancing", "group", g.name, "generation", g.generation, "members", len(g.members))
	if wasEmpty && c.cfg.InitialRebalanceDelay > 0 {
		delay := c.cfg.InitialRebalanceDelay
		if g.generation == 0 && c.cfg.Known != nil && c.cfg.Known(g.name) {
			delay *= 2 // moved here: see Config.Known
		}
		delay = min(delay, timeout)
		g.initial, g.newMemberAdded = true, false
		g.initialRemaining = max(timeout-delay, 0)
		g.join = c.after(delay, func() { c.initialDelayExpired(g) })
		return
	}
	g.initial = false
	g.join = c.after(timeout, func() { c.completeJoin(g) })
	c.tryCompleteJoin(g)
}

// initialDelayExpired extends the initial delay while members keep
// arriving, up to the rebalance timeout, then completes the join (Kafka's
// InitialDelayedJoin).
func (c *Coordinator) initialDelayExpired(g *group) {
	if g.newMemberAdded && g.initialRemaining > 0 {
		delay := min(c.cfg.InitialRebalanceDelay, g.initialRemaining)
		g.initialRemaining -= delay
		g.newMemberAdded = false
		g.join = c.after(delay, func() { c.initialDelayExpired(g) })
		return
	}
	c.completeJoin(g)
}

func (c *Coordinator) tryCompleteJoin(g *group) {
	if !g.initial && g.allJoined() {
		c.completeJoin(g)
	}
}

// completeJoin ends the join phase: members that did not rejoin are
// dropped, the generation advances, a protocol is chosen and every joined
// member is answered (the leader with the member list it assigns from).
func (c *Coordinator) completeJoin(g *group) {
	g.join.stop()
	g.initial = false
	for _, m := range g.members {
		if m.joinWait == nil {
			c.removeMember(g, m, kerr.UnknownMemberID)
		}
	}
	g.pickLeader()
	g.generation++
	if len(g.members) == 0 {
		g.state, g.protocol = Empty, ""
		c.log.Debug("kafka group empty", "group", g.name, "generation", g.generation)
		c.persist(g)
		c.checkIdle(g)
		return
	}
	g.protocol = g.selectProtocol()
	g.state = CompletingRebalance
	c.log.Debug("kafka group joined", "group", g.name, "generation", g.generation, "members", len(g.members),
		"protocol", g.protocol, "leader", g.leader)
	for _, m := range g.ordered() {
		m.joinWait <- c.joinResult(g, m)
		m.joinWait = nil
		c.heartbeat(g, m)
	}
	gen := g.generation
	g.join = c.after(g.maxRebalanceTimeout(), func() { c.syncExpired(g, gen) })
	// Recorded before the joins are answered on the wire (the broker waits
	// for the write), so a coordinator that takes over before the leader's
	// sync knows this generation.
	c.persist(g)
}

// syncExpired ends a sync phase that outlived the rebalance timeout (a
// leader that heartbeats but never syncs would otherwise hold the group in
// CompletingRebalance for ever): members that did not sync are dropped and
// the rest rebalance, as Kafka does with its pending-sync members.
func (c *Coordinator) syncExpired(g *group, gen int32) {
	if g.state != CompletingRebalance || g.generation != gen {
		return
	}
	for _, m := range g.members {
		if m.syncedGen != gen {
			c.log.Debug("kafka group member never synced", "group", g.name, "member", m.id, "generation", gen)
			c.removeMember(g, m, kerr.UnknownMemberID)
		}
	}
	g.pickLeader()
	c.prepareRebalance(g)
	c.checkIdle(g)
}

func (c *Coordinator) joinResult(g *group, m *member) JoinResult {
	r := JoinResult{Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol,
		LeaderID: g.leader, MemberID: m.id}
	if m.id == g.leader {
		for _, o := range g.ordered() {
			r.Members = append(r.Members, JoinMember{MemberID: o.id, InstanceID: o.instanceID, Metadata: o.metadata(g.protocol)})
		}
	}
	return r
}

// heartbeat restarts a member's session timer. A member whose join or sync
// is parked here is alive by definition; its timer is re-armed instead of
// evicting it.
func (c *Coordinator) heartbeat(g *group, m *member) { c.armSession(g, m, m.sessionTimeout) }

// armSession (re)starts m's session: unless it is heard from within d it
// is removed and the group rebalances.
func (c *Coordinator) armSession(g *group, m *member, d time.Duration) {
	m.session.stop()
	m.session = c.after(d, func() {
		if m.joinWait != nil || m.syncWait != nil {
			c.heartbeat(g, m)
			return
		}
		c.log.Debug("kafka group member session expired", "group", g.name, "member", m.id)
		c.removeAndRebalance(g, m)
	})
}

// removeMember drops a member, answering whatever it has parked with err.
func (c *Coordinator) removeMember(g *group, m *member, err *kerr.Error) {
	c.dropMember(m, err)
	delete(g.members, m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
}

func (c *Coordinator) dropMember(m *member, err *kerr.Error) {
	m.session.stop()
	if m.joinWait != nil {
		m.joinWait <- errJoin(err, m.id)
		m.joinWait = nil
	}
	if m.syncWait != nil {
		m.syncWait <- SyncResult{Err: err}
		m.syncWait = nil
	}
}

// removeAndRebalance drops a member that left or expired; the others must
// rebalance without it.
func (c *Coordinator) removeAndRebalance(g *group, m *member) {
	c.removeMember(g, m, kerr.UnknownMemberID)
	g.pickLeader()
	switch g.state {
	case Stable, CompletingRebalance:
		c.prepareRebalance(g)
	case PreparingRebalance:
		c.tryCompleteJoin(g)
	}
	c.checkIdle(g)
}

// checkIdle schedules dropping a group that has nobody in it.
func (c *Coordinator) checkIdle(g *group) {
	if g.state != Empty || len(g.members) > 0 || len(g.pending) > 0 || (g.idle != nil && !g.idle.done) {
		return
	}
	g.idle = c.after(c.cfg.IdleTimeout, func() {
		if c.groups[g.name] == g && g.state == Empty && len(g.members) == 0 && len(g.pending) == 0 {
			delete(c.groups, g.name)
		}
	})
}
