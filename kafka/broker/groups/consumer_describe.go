package groups

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What the other group APIs see of consumer-protocol groups, and how
// their offset commits are checked.

// state is the group's state as ListGroups and the describes name it:
// Reconciling while a member has not reached its target, else Stable.
func (cg *cgroup) state() State {
	if len(cg.members) == 0 {
		return Empty
	}
	for _, m := range cg.members {
		if m.epoch == staticLeaveEpoch {
			continue
		}
		if m.epoch != cg.assignEpoch || len(m.revoking) > 0 || len(m.assigned) != len(m.target) {
			return Reconciling
		}
	}
	return Stable
}

// describeConsumer is the group as DescribeGroups shows it: its members with
// their subscriptions and assignments encoded as the classic consumer
// protocol encodes them, so tools that read those keep working.
func (c *Coordinator) describeConsumer(cg *cgroup) Description {
	d := Description{State: cg.state(), ProtocolType: "consumer", Protocol: cg.assignor}
	subs := c.resolve(cg)
	names := map[[16]byte]string{}
	for _, ts := range subs {
		for _, t := range ts {
			names[t.ID] = t.Name
		}
	}
	for _, id := range sortedMemberIDs(cg) {
		m := cg.members[id]
		meta := kmsg.NewConsumerMemberMetadata()
		for _, t := range subs[id] {
			meta.Topics = append(meta.Topics, t.Name)
		}
		assign := kmsg.NewConsumerMemberAssignment()
		for topic, parts := range m.assignment() {
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = names[topic], parts
			assign.Topics = append(assign.Topics, at)
		}
		d.Members = append(d.Members, MemberDescription{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID,
			ClientHost: m.clientHost, Metadata: meta.AppendTo(nil), Assignment: assign.AppendTo(nil)})
	}
	return d
}

func sortedMemberIDs(cg *cgroup) []string {
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// ConsumerMember is one member as ConsumerGroupDescribe shows it.
type ConsumerMember struct {
	MemberID, InstanceID, RackID, ClientID, ClientHost string
	MemberEpoch                                        int32
	SubscribedTopics                                   []string
	SubscribedRegex                                    string
	Assignment, Target                                 map[[16]byte][]int32
}

// ConsumerDescription is a consumer-protocol group as
// ConsumerGroupDescribe shows it.
type ConsumerDescription struct {
	State                  State
	Epoch, AssignmentEpoch int32
	Assignor               string
	Members                []ConsumerMember
}

// DescribeConsumer returns a consumer-protocol group; ok is false when
// there is none here (classic groups included: they are not consumer
// groups).
func (c *Coordinator) DescribeConsumer(group string) (ConsumerDescription, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cg := c.consumers[group]
	if cg == nil {
		return ConsumerDescription{}, false
	}
	d := ConsumerDescription{State: cg.state(), Epoch: cg.epoch, AssignmentEpoch: cg.assignEpoch, Assignor: cg.assignor}
	for _, id := range sortedMemberIDs(cg) {
		m := cg.members[id]
		target := map[[16]byte][]int32{}
		for _, p := range sortedParts(m.target) {
			target[p.topic] = append(target[p.topic], p.part)
		}
		d.Members = append(d.Members, ConsumerMember{MemberID: m.id, InstanceID: m.instanceID, RackID: m.rackID,
			ClientID: m.clientID, ClientHost: m.clientHost, MemberEpoch: m.epoch, SubscribedTopics: m.subscribed,
			SubscribedRegex: m.regexSrc, Assignment: m.assignment(), Target: target})
	}
	return d, true
}

// Commit is an OffsetCommit as AdmitCommit checks it.
type Commit struct {
	Group, MemberID, InstanceID string
	Generation                  int32 // the member epoch, for a consumer-protocol group
	Version                     int16
	Partitions                  map[string][]int32 // by topic name
}

// AdmitCommit says whether an OffsetCommit may be written. Classic groups
// are checked as ValidateCommit does. A consumer-protocol group takes
// commits from OffsetCommit v9+ only, as Kafka does, from a member whose
// epoch the commit does not exceed; a partition the member holds must
// have been its since an epoch no later than the commit's (KIP-1251): a
// member between two epochs may still commit what it held at the earlier
// one. A partition it released moments ago is taken too, as Kafka takes
// it: clients commit what they consumed as they give partitions up, and
// the answer that released it may have crossed the commit. An admin
// commit (no member, generation -1) is taken while the group has no
// members (it is not in memory then).
func (c *Coordinator) AdmitCommit(cm Commit) *kerr.Error {
	c.mu.Lock()
	cg := c.consumers[cm.Group]
	if cg == nil {
		c.mu.Unlock()
		return c.ValidateCommit(cm.Group, cm.MemberID, cm.InstanceID, cm.Generation)
	}
	defer c.mu.Unlock()
	if c.closed {
		return kerr.NotCoordinator
	}
	m := cg.members[cm.MemberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID
	case cm.Version < 9:
		return kerr.UnsupportedVersion
	case cm.Generation > m.epoch: // a static member away (-2) commits nothing
		return kerr.StaleMemberEpoch
	}
	ids := map[string][16]byte{}
	if c.cfg.Topics != nil {
		for _, t := range c.cfg.Topics() {
			ids[t.Name] = t.ID
		}
	}
	for topic, parts := range cm.Partitions {
		for _, p := range parts {
			k := tp{ids[topic], p}
			e, held := m.assigned[k]
			if !held {
				e, held = m.revoking[k]
			}
			if held && cm.Generation < e {
				return kerr.StaleMemberEpoch
			}
		}
	}
	return nil
}
