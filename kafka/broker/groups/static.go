package groups

import "github.com/twmb/franz-go/pkg/kerr"

// Static membership (KIP-345): a member that names a group.instance.id
// keeps its place in the group across restarts. Its new incarnation joins
// without a member id; the coordinator gives it a fresh one in place of the
// old and, when the group is stable and the protocol it would select is
// unchanged, answers at the current generation with no rebalance: the
// member syncs and gets back its assignment, and the other members never
// hear of it. The old incarnation's member id is fenced from then on:
// anything it sends naming the instance id answers FENCED_INSTANCE_ID.
// Static members still expire after their session timeout, and they do
// not send LeaveGroup when they stop (clients leave that to the timeout),
// which is what lets a restart within it cost nothing.
//
// Member ids of static members start with the instance id and "-", as in
// Kafka: clients (franz-go) read a leader id with their own instance id as
// a prefix as "I lead, but may not assign" on JoinGroup below v9.

// joinStatic handles a JoinGroup without a member id that names an
// instance id: a new static member joins, or a known one's new incarnation
// replaces the old. Static members skip MEMBER_ID_REQUIRED, as in Kafka:
// a retried join replaces the instance again rather than leaving an orphan
// behind. The caller holds c.mu.
func (c *Coordinator) joinStatic(g *group, req JoinRequest) (JoinResult, chan JoinResult) {
	id := c.cfg.NewMemberID(req.InstanceID)
	old := g.members[g.static[req.InstanceID]]
	if old == nil {
		return JoinResult{}, c.addMember(g, id, req)
	}
	leader := g.leader // as before the replacement
	c.replaceStatic(g, old, id)
	m := old
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	if g.state != Stable {
		// Mid-rebalance: the new incarnation takes the old one's part in
		// it (in CompletingRebalance the assignments being made are for
		// the old one: start over).
		return JoinResult{}, c.updateMember(g, m, req)
	}
	prev := m.protocols
	m.protocols = req.Protocols
	if g.selectProtocol() != g.protocol {
		m.protocols = prev
		return JoinResult{}, c.updateMember(g, m, req)
	}
	m.sessionTimeout, m.rebalanceTimeout = req.SessionTimeout, req.RebalanceTimeout
	c.heartbeat(g, m)
	c.log.Debug("kafka group static member rejoined", "group", g.name, "instance", req.InstanceID,
		"member", id, "generation", g.generation)
	c.persist(g)
	res := JoinResult{Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol,
		LeaderID: leader, MemberID: id}
	if req.SkipAssignment {
		// KIP-814: the leader learns it leads (and sees the members, to
		// watch their subscriptions) but keeps the current assignments.
		res.LeaderID = g.leader
		if g.leader == id {
			res.SkipAssignment = true
			res.Members = c.joinResult(g, m).Members
		}
	}
	return res, nil
}

// replaceStatic gives static member m the member id id in place of its
// old one; whatever the old incarnation has parked here answers
// FENCED_INSTANCE_ID. The caller holds c.mu.
func (c *Coordinator) replaceStatic(g *group, m *member, id string) {
	if m.joinWait != nil {
		m.joinWait <- errJoin(kerr.FencedInstanceID, m.id)
		m.joinWait = nil
	}
	if m.syncWait != nil {
		m.syncWait <- SyncResult{Err: kerr.FencedInstanceID}
		m.syncWait = nil
	}
	delete(g.members, m.id)
	if g.leader == m.id {
		g.leader = id
	}
	m.id = id
	g.members[id] = m
	g.static[m.instanceID] = id
}

// current finds the member a request names by member id and, from a
// static member, instance id: FENCED_INSTANCE_ID when the instance id
// belongs to another member id now (an old incarnation of a replaced
// member), UNKNOWN_MEMBER_ID when the member (or the instance) is not in
// the group. An instance id the group does not know answers
// UNKNOWN_MEMBER_ID, not Kafka's fencing: the member rejoins, which is
// what a member recorded before it was static (or by an earlier
// coordinator that lost it) needs. The caller holds c.mu.
func (g *group) current(memberID, instanceID string) (*member, *kerr.Error) {
	if instanceID != "" {
		id, ok := g.static[instanceID]
		if ok && id != memberID {
			return nil, kerr.FencedInstanceID
		}
		if !ok {
			return nil, kerr.UnknownMemberID
		}
	}
	m := g.members[memberID]
	if m == nil {
		return nil, kerr.UnknownMemberID
	}
	return m, nil
}
