package groups

import (
	"regexp"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
)

// defaultConsumerRebalanceTimeout stands in for a member that sent none.
const defaultConsumerRebalanceTimeout = 5 * time.Minute

// consumerJoin handles a heartbeat at epoch 0: a new member, an active one
// that lost its state (it holds nothing now and gets its assignment
// again), or a static member coming back, which takes over the
// assignment of its instance if the old incarnation left with epoch -2.
// The caller holds c.mu.
func (c *Coordinator) consumerJoin(cg *cgroup, h *ConsumerHeartbeat) ConsumerHeartbeatResult {
	if h.Owned == nil || ownsAny(h.Owned) {
		return errConsumer(kerr.InvalidRequest, "TopicPartitions must be empty when (re-)joining.")
	}
	id := h.MemberID
	if id == "" {
		id = uuid.NewString() // ConsumerGroupHeartbeat v0: the coordinator names members
	}
	var inherit *cmember
	if h.InstanceID != "" {
		if prev, ok := cg.static[h.InstanceID]; ok && prev != id {
			if old := cg.members[prev]; old != nil {
				if old.epoch != staticLeaveEpoch {
					return errConsumer(kerr.UnreleasedInstanceID, "")
				}
				inherit = old
			}
		}
	}
	m := cg.members[id]
	if m != nil && m.epoch != staticLeaveEpoch {
		// An active member joining again holds nothing any more.
		m.clientID, m.clientHost, m.rackID = h.ClientID, h.ClientHost, h.RackID
		return c.consumerUpdate(cg, m, h, true)
	}
	if m != nil {
		inherit = m // a static member back under its own member id
	}
	if inherit == nil && h.SubscribedTopics == nil && h.SubscribedRegex == nil {
		return errConsumer(kerr.InvalidRequest, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
	}
	m = &cmember{id: id, instanceID: h.InstanceID, clientID: h.ClientID, clientHost: h.ClientHost, rackID: h.RackID,
		rebalanceTimeout: defaultConsumerRebalanceTimeout, target: map[tp]bool{}, assigned: map[tp]int32{}, revoking: map[tp]int32{}}
	newMember := inherit == nil
	if inherit != nil {
		m.subscribed, m.regex, m.regexSrc, m.assignor = inherit.subscribed, inherit.regex, inherit.regexSrc, inherit.assignor
		m.rebalanceTimeout, m.target, m.assigned = inherit.rebalanceTimeout, inherit.target, inherit.assigned
		m.epoch, m.prevEpoch = inherit.prevEpoch, inherit.prevEpoch
		inherit.session.stop()
		inherit.revokeBy.stop()
		delete(cg.members, inherit.id)
		for p := range m.assigned {
			cg.holder[p] = id
		}
	}
	cg.members[id] = m
	if m.instanceID != "" {
		cg.static[m.instanceID] = id
	}
	c.log.Debug("kafka consumer group member joined", "group", cg.name, "member", id, "instance", m.instanceID, "inherited", !newMember)
	return c.consumerUpdate(cg, m, h, newMember)
}

// consumerUpdate applies a heartbeat's subscription to m, moves it
// towards its target and answers. changed forces a new target (a member
// joined). The caller holds c.mu.
func (c *Coordinator) consumerUpdate(cg *cgroup, m *cmember, h *ConsumerHeartbeat, changed bool) ConsumerHeartbeatResult {
	if h.RebalanceTimeout > 0 {
		m.rebalanceTimeout = h.RebalanceTimeout
	}
	subChanged, err := updateSubscription(cg, m, h)
	if err != nil {
		return errConsumer(err, "SubscribedTopicRegex is not a valid regular expression")
	}
	if changed || subChanged {
		c.newTarget(cg)
	} else {
		c.checkTopics(cg)
	}
	c.armConsumerSession(cg, m)
	sent := c.reconcile(cg, m, h.Owned)
	res := ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: m.epoch}
	if h.MemberEpoch == joinEpoch || h.full() || sent {
		res.Assignment = m.assignment()
	}
	return res
}

// consumerBeat handles a heartbeat of a member at its epoch. A member may
// also send its previous epoch if what it says it owns is part of what it
// was given: the answer that moved it on was lost. The caller holds c.mu.
func (c *Coordinator) consumerBeat(cg *cgroup, h *ConsumerHeartbeat) ConsumerHeartbeatResult {
	m := cg.members[h.MemberID]
	if m == nil {
		if id, ok := cg.static[h.InstanceID]; h.InstanceID != "" && ok && id != h.MemberID {
			return errConsumer(kerr.FencedInstanceID, "")
		}
		return errConsumer(kerr.UnknownMemberID, "")
	}
	if m.epoch == staticLeaveEpoch || // it left: only a join brings it back
		h.MemberEpoch != m.epoch && (h.MemberEpoch != m.prevEpoch || h.Owned == nil || !ownedWithin(h.Owned, m.assigned)) {
		return errConsumer(kerr.FencedMemberEpoch, "")
	}
	return c.consumerUpdate(cg, m, h, false)
}

// consumerLeave handles epochs -1 (leave) and -2 (a static member leaving
// for a moment: it keeps its partitions reserved until it comes back or
// its session runs out). The caller holds c.mu.
func (c *Coordinator) consumerLeave(cg *cgroup, h *ConsumerHeartbeat) ConsumerHeartbeatResult {
	m := cg.members[h.MemberID]
	if m == nil {
		return errConsumer(kerr.UnknownMemberID, "")
	}
	if h.MemberEpoch == staticLeaveEpoch && m.instanceID != "" {
		c.release(cg, m, m.revoking)
		m.revokeBy.stop()
		m.prevEpoch, m.epoch = m.epoch, staticLeaveEpoch
		c.log.Debug("kafka consumer group static member away", "group", cg.name, "member", m.id, "instance", m.instanceID)
		return ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: staticLeaveEpoch}
	}
	c.removeConsumer(cg, m, "left")
	return ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: h.MemberEpoch}
}

// removeConsumer drops a member (it left, its session expired, or it kept
// partitions past its rebalance timeout); the others get a new target.
// The caller holds c.mu.
func (c *Coordinator) removeConsumer(cg *cgroup, m *cmember, why string) {
	if cg.members[m.id] != m {
		return
	}
	c.log.Debug("kafka consumer group member removed", "group", cg.name, "member", m.id, "why", why)
	m.session.stop()
	m.revokeBy.stop()
	c.release(cg, m, m.assigned)
	c.release(cg, m, m.revoking)
	delete(cg.members, m.id)
	if m.instanceID != "" && cg.static[m.instanceID] == m.id {
		delete(cg.static, m.instanceID)
	}
	if len(cg.members) == 0 {
		delete(c.consumers, cg.name)
	} else {
		c.newTarget(cg)
	}
	c.persistConsumer(cg)
}

// release gives up m's hold on parts, which m no longer has.
func (c *Coordinator) release(cg *cgroup, m *cmember, parts map[tp]int32) {
	for p := range parts {
		if cg.holder[p] == m.id {
			delete(cg.holder, p)
		}
		delete(parts, p)
	}
}

// armConsumerSession (re)starts m's session: a member not heard from for
// the session timeout is removed.
func (c *Coordinator) armConsumerSession(cg *cgroup, m *cmember) {
	m.session.stop()
	m.session = c.after(c.cfg.ConsumerSessionTimeout, func() { c.removeConsumer(cg, m, "session expired") })
}

// reconcile moves m towards its target and reports whether what it holds
// changed (the answer then carries its assignment). owned is what m says
// it holds (nil: not said). Partitions leaving m are revoked first; only
// once m has reported them released does it advance to the group's
// assignment epoch and take its new partitions, each as soon as no other
// member holds it. A member that has not released what it must within its
// rebalance timeout is removed. The caller holds c.mu.
func (c *Coordinator) reconcile(cg *cgroup, m *cmember, owned map[[16]byte][]int32) bool {
	if m.epoch == staticLeaveEpoch {
		return false
	}
	before := m.assignedList()
	if owned != nil {
		for p := range m.revoking {
			if !slices.Contains(owned[p.topic], p.part) {
				if cg.holder[p] == m.id {
					delete(cg.holder, p)
				}
				delete(m.revoking, p)
			}
		}
	}
	for p, e := range m.assigned {
		if !m.target[p] {
			m.revoking[p] = e
			delete(m.assigned, p)
		}
	}
	if len(m.revoking) > 0 {
		if m.revokeBy == nil || m.revokeBy.done {
			m.revokeBy = c.after(m.rebalanceTimeout, func() { c.removeConsumer(cg, m, "partitions not revoked in its rebalance timeout") })
		}
		return !slices.Equal(before, m.assignedList())
	}
	m.revokeBy.stop()
	if m.epoch != cg.assignEpoch {
		m.prevEpoch, m.epoch = m.epoch, cg.assignEpoch
	}
	for _, p := range sortedParts(m.target) {
		if _, has := m.assigned[p]; has {
			continue
		}
		if holder := cg.holder[p]; holder == "" || holder == m.id {
			cg.holder[p] = m.id
			m.assigned[p] = m.epoch
		}
	}
	return !slices.Equal(before, m.assignedList())
}

// updateSubscription applies the subscription fields h sent and reports
// whether they changed what m subscribes to.
func updateSubscription(cg *cgroup, m *cmember, h *ConsumerHeartbeat) (bool, *kerr.Error) {
	changed := false
	if h.SubscribedTopics != nil {
		names := slices.Clone(h.SubscribedTopics)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.subscribed) {
			m.subscribed, changed = names, true
		}
	}
	if h.SubscribedRegex != nil && *h.SubscribedRegex != m.regexSrc {
		m.regexSrc, m.regex, changed = *h.SubscribedRegex, nil, true
		if m.regexSrc != "" {
			re, err := regexp.Compile("^(?:" + m.regexSrc + ")$") // Kafka's regexes match whole names
			if err != nil {
				return false, kerr.InvalidRegularExpression
			}
			m.regex = re
		}
	}
	if h.ServerAssignor != nil && *h.ServerAssignor != m.assignor {
		m.assignor, changed = *h.ServerAssignor, true
		cg.assignor = m.assignor
	}
	return changed, nil
}

func ownsAny(owned map[[16]byte][]int32) bool {
	for _, parts := range owned {
		if len(parts) > 0 {
			return true
		}
	}
	return false
}

// ownedWithin reports whether every partition of owned is in assigned.
func ownedWithin(owned map[[16]byte][]int32, assigned map[tp]int32) bool {
	for id, parts := range owned {
		for _, p := range parts {
			if _, ok := assigned[tp{id, p}]; !ok {
				return false
			}
		}
	}
	return true
}

// assignment is what m holds, by topic id, as a heartbeat answer carries it.
func (m *cmember) assignment() map[[16]byte][]int32 {
	out := map[[16]byte][]int32{}
	for _, p := range m.assignedList() {
		out[p.topic] = append(out[p.topic], p.part)
	}
	return out
}

func (m *cmember) assignedList() []tp {
	out := make([]tp, 0, len(m.assigned))
	for p := range m.assigned {
		out = append(out, p)
	}
	return sortTPs(out)
}

func sortedParts(set map[tp]bool) []tp {
	out := make([]tp, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	return sortTPs(out)
}

func sortTPs(ps []tp) []tp {
	slices.SortFunc(ps, func(a, b tp) int {
		if c := slices.Compare(a.topic[:], b.topic[:]); c != 0 {
			return c
		}
		return int(a.part - b.part)
	})
	return ps
}
