package groups

import (
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// KIP-848's consumer group protocol (ConsumerGroupHeartbeat): the
// coordinator assigns partitions itself and moves each member towards its
// share one heartbeat at a time. A member first gives up the partitions
// it must lose (they stay its own until it reports them released), then
// advances to the group's assignment epoch and takes the partitions of its
// share that nobody holds; a partition another member still holds is
// handed over at a later heartbeat, once released. So no partition is ever
// held by two members, and members that keep their partitions never stop.
//
// A consumer group shares the coordinator, its lock and its clock with
// the classic groups, but not its id: a group id is one kind or the other
// while it has members. Memberships are recorded in raft as classic ones
// are (consumer_persist.go).

// Member epochs with a meaning of their own in a heartbeat.
const (
	joinEpoch        = 0
	leaveEpoch       = -1
	staticLeaveEpoch = -2
)

// Server-side assignors (ConsumerGroupHeartbeat ServerAssignor).
const (
	UniformAssignor = "uniform"
	RangeAssignor   = "range"
)

// TopicInfo is a topic as the assignors see it.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// tp is one partition of a topic, by topic id.
type tp struct {
	topic [16]byte
	part  int32
}

// ConsumerHeartbeat is a ConsumerGroupHeartbeat as the coordinator needs
// it. Nil fields were not sent: the member's earlier values stand.
type ConsumerHeartbeat struct {
	Group       string
	MemberID    string
	MemberEpoch int32
	InstanceID  string
	RackID      string
	ClientID    string
	ClientHost  string
	// RebalanceTimeout is negative when not sent.
	RebalanceTimeout time.Duration
	SubscribedTopics []string
	SubscribedRegex  *string
	ServerAssignor   *string
	// Owned is what the member holds: nil when not sent.
	Owned map[[16]byte][]int32
}

// full reports whether the heartbeat carries the member's whole state
// (Kafka's definition): it then gets its whole assignment back.
func (h *ConsumerHeartbeat) full() bool {
	return h.RebalanceTimeout >= 0 && (h.SubscribedTopics != nil || h.SubscribedRegex != nil) && h.Owned != nil
}

// ConsumerHeartbeatResult is the answer to a ConsumerGroupHeartbeat.
type ConsumerHeartbeatResult struct {
	Err               *kerr.Error
	Message           string
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment is the member's partitions when it is sent (a full
	// heartbeat, or a change); nil otherwise.
	Assignment map[[16]byte][]int32
}

// cgroup is one consumer-protocol group. Guarded by the coordinator's mu.
type cgroup struct {
	name        string
	epoch       int32 // bumped by every membership or subscription change
	assignEpoch int32 // the epoch the target assignment was computed at
	assignor    string
	members     map[string]*cmember
	static      map[string]string // instance id -> member id
	// holder is the member holding each partition some member holds
	// (assigned, or being revoked and not yet released).
	holder map[tp]string
	// topics is the subscribed topics as the target was computed from
	// them; a change (a topic created, grown, deleted) recomputes it.
	topics string
	// recorded is the encoding last handed to Config.Persist.
	recorded []byte
}

// cmember is one member of a consumer-protocol group.
type cmember struct {
	id, instanceID, clientID, clientHost, rackID string
	epoch, prevEpoch                             int32 // epoch is staticLeaveEpoch while a static member is away

	subscribed []string // sorted
	regexSrc   string
	regex      *regexp.Regexp
	assignor   string

	rebalanceTimeout time.Duration
	target           map[tp]bool
	// assigned is what the member holds by the coordinator's account, each
	// partition with the member epoch it was given at (OffsetCommit checks
	// commits against it, as KIP-1251 does); revoking holds partitions it
	// was told to give up and has not reported released.
	assigned map[tp]int32
	revoking map[tp]int32

	session, revokeBy *timer
}

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat. It never parks.
func (c *Coordinator) ConsumerHeartbeat(h ConsumerHeartbeat) ConsumerHeartbeatResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := c.consumerHeartbeat(&h)
	res.HeartbeatInterval = c.cfg.ConsumerHeartbeatInterval
	if cg := c.consumers[h.Group]; cg != nil {
		c.persistConsumer(cg)
	}
	return res
}

func errConsumer(err *kerr.Error, msg string) ConsumerHeartbeatResult {
	return ConsumerHeartbeatResult{Err: err, Message: msg}
}

func (c *Coordinator) consumerHeartbeat(h *ConsumerHeartbeat) ConsumerHeartbeatResult {
	switch {
	case c.closed:
		return errConsumer(kerr.NotCoordinator, "")
	case h.Group == "":
		return errConsumer(kerr.InvalidGroupID, "")
	case h.MemberEpoch < staticLeaveEpoch:
		return errConsumer(kerr.InvalidRequest, "MemberEpoch is invalid")
	case h.ServerAssignor != nil && *h.ServerAssignor != UniformAssignor && *h.ServerAssignor != RangeAssignor:
		return errConsumer(kerr.UnsupportedAssignor, "")
	}
	if g := c.groups[h.Group]; g != nil {
		if len(g.members) > 0 || len(g.pending) > 0 {
			return errConsumer(kerr.GroupIDNotFound, "the group is a classic group")
		}
		g.join.stop()
		g.idle.stop()
		delete(c.groups, h.Group) // an empty classic group becomes a consumer group
	}
	cg := c.consumers[h.Group]
	if cg == nil {
		if h.MemberEpoch != joinEpoch {
			return errConsumer(kerr.UnknownMemberID, "")
		}
		cg = &cgroup{name: h.Group, assignor: UniformAssignor, members: map[string]*cmember{},
			static: map[string]string{}, holder: map[tp]string{}}
		c.consumers[h.Group] = cg
	}
	switch h.MemberEpoch {
	case joinEpoch:
		return c.consumerJoin(cg, h)
	case leaveEpoch, staticLeaveEpoch:
		return c.consumerLeave(cg, h)
	}
	return c.consumerBeat(cg, h)
}
