package broker

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/queen-mq/queen/kafka/broker/groups"
	"github.com/queen-mq/queen/wire"
)

// KIP-932 share groups: membership. A share group is the Queen consumer
// group of the same name (docs/decisions.md), so its records are leased,
// counted and dead-lettered exactly as an HTTP pop of that group's. In a
// share group every member may fetch from every partition it is assigned
// and the records, not the partitions, are handed out, so the assignment
// is the simplest correct one: every member is assigned every partition of
// every topic it subscribes to. The partition's lease (one per group and
// partition at a time) keeps two consumers from holding the same record.
//
// Memberships live in the memory of the node coordinating the group; a
// new coordinator starts empty and its members rejoin on UNKNOWN_MEMBER_ID
// (a share member holds no partition exclusively, so nothing is lost).

// maxShareGroups bounds the share groups one node remembers, and
// maxShareGroupMembers the members of one (Kafka's group.share.max.size
// default); a join beyond either is refused GROUP_MAX_SIZE_REACHED.
const (
	maxShareGroups       = 10000
	maxShareGroupMembers = 200
)

type shareGroupKey struct {
	tenant wire.ID
	group  string
}

// shareGroups is every share group this node coordinates.
type shareGroups struct {
	mu       sync.Mutex
	m        map[shareGroupKey]*shareGroup
	now      func() time.Time
	session  time.Duration // a member not heard from for this long is gone
	interval time.Duration // the heartbeat interval members are told
}

type shareGroup struct {
	epoch   int32
	members map[string]*shareMember
}

type shareMember struct {
	id, rackID, clientID, clientHost string
	epoch                            int32
	subscribed                       []string // sorted
	assigned                         map[[16]byte][]int32
	lastSeen                         time.Time
}

func newShareGroups(sessionTimeout, heartbeatInterval time.Duration) *shareGroups {
	if sessionTimeout <= 0 {
		sessionTimeout = groups.DefaultConsumerSessionTimeout
	}
	if heartbeatInterval <= 0 {
		heartbeatInterval = groups.DefaultConsumerHeartbeatInterval
	}
	return &shareGroups{m: map[shareGroupKey]*shareGroup{}, now: time.Now, session: sessionTimeout, interval: heartbeatInterval}
}

// shareBeat is a ShareGroupHeartbeat as the membership needs it.
type shareBeat struct {
	key                          shareGroupKey
	memberID                     string
	memberEpoch                  int32
	rackID, clientID, clientHost string
	subscribed                   []string // nil: unchanged
}

// shareBeatResult answers a shareBeat; assignment is nil when unchanged.
type shareBeatResult struct {
	err         *kerr.Error
	message     string
	memberID    string
	memberEpoch int32
	assignment  map[[16]byte][]int32
}

// heartbeat applies one heartbeat; topics are the tenant's topics now.
func (s *shareGroups) heartbeat(h shareBeat, topics []groups.TopicInfo) shareBeatResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	g := s.live(h.key, now)
	switch {
	case h.key.group == "":
		return shareBeatResult{err: kerr.InvalidGroupID}
	case h.memberEpoch < leaveShareEpoch:
		return shareBeatResult{err: kerr.InvalidRequest, message: "MemberEpoch is invalid"}
	case h.memberEpoch == leaveShareEpoch:
		if g == nil || g.members[h.memberID] == nil {
			return shareBeatResult{err: kerr.UnknownMemberID}
		}
		delete(g.members, h.memberID)
		g.epoch++
		s.dropIfEmpty(h.key, g)
		return shareBeatResult{memberID: h.memberID, memberEpoch: leaveShareEpoch}
	case h.memberEpoch == 0:
		if h.subscribed == nil || len(h.subscribed) == 0 {
			return shareBeatResult{err: kerr.InvalidRequest, message: "SubscribedTopicNames must be set when joining"}
		}
		if g == nil {
			if len(s.m) >= maxShareGroups {
				s.sweep(now)
			}
			if len(s.m) >= maxShareGroups {
				return shareBeatResult{err: kerr.GroupMaxSizeReached, message: "too many share groups on this node"}
			}
			g = &shareGroup{members: map[string]*shareMember{}}
			s.m[h.key] = g
		}
		if h.memberID == "" {
			h.memberID = uuid.NewString()
		}
		if g.members[h.memberID] == nil && len(g.members) >= maxShareGroupMembers {
			return shareBeatResult{err: kerr.GroupMaxSizeReached}
		}
		m := &shareMember{id: h.memberID} // its subscription bumps the group epoch
		g.members[h.memberID] = m
		return s.beat(g, m, h, topics, now, true)
	}
	if g == nil || g.members[h.memberID] == nil {
		return shareBeatResult{err: kerr.UnknownMemberID}
	}
	m := g.members[h.memberID]
	if h.memberEpoch != m.epoch {
		return shareBeatResult{err: kerr.FencedMemberEpoch}
	}
	return s.beat(g, m, h, topics, now, false)
}

// leaveShareEpoch is the member epoch of a leaving heartbeat.
const leaveShareEpoch = -1

// beat records a live member's heartbeat and hands it its assignment when
// that changed (always when it joined).
func (s *shareGroups) beat(g *shareGroup, m *shareMember, h shareBeat, topics []groups.TopicInfo, now time.Time, joined bool) shareBeatResult {
	m.lastSeen = now
	if h.rackID != "" {
		m.rackID = h.rackID
	}
	if h.clientID != "" {
		m.clientID = h.clientID
	}
	m.clientHost = h.clientHost
	if h.subscribed != nil {
		subs := slices.Clone(h.subscribed)
		sort.Strings(subs)
		if !slices.Equal(subs, m.subscribed) {
			m.subscribed = subs
			g.epoch++
		}
	}
	target := shareAssignment(m.subscribed, topics)
	res := shareBeatResult{memberID: m.id}
	if joined || !sameAssignment(target, m.assigned) {
		m.assigned = target
		m.epoch = g.epoch
		res.assignment = target
	}
	res.memberEpoch = m.epoch
	return res
}

// shareAssignment is every partition of every subscribed topic that exists.
func shareAssignment(subscribed []string, topics []groups.TopicInfo) map[[16]byte][]int32 {
	out := map[[16]byte][]int32{}
	for _, t := range topics {
		if _, ok := slices.BinarySearch(subscribed, t.Name); !ok {
			continue
		}
		parts := make([]int32, t.Partitions)
		for i := range parts {
			parts[i] = int32(i)
		}
		out[t.ID] = parts
	}
	return out
}

func sameAssignment(a, b map[[16]byte][]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for id, pa := range a {
		if pb, ok := b[id]; !ok || !slices.Equal(pa, pb) {
			return false
		}
	}
	return true
}

// expire drops the members not heard from within the session timeout.
func (s *shareGroups) expire(g *shareGroup, now time.Time) {
	for id, m := range g.members {
		if now.Sub(m.lastSeen) > s.session {
			delete(g.members, id)
			g.epoch++
		}
	}
}

// live is the group with its expired members dropped; nil when none is
// left (the group is forgotten then).
func (s *shareGroups) live(k shareGroupKey, now time.Time) *shareGroup {
	g := s.m[k]
	if g == nil {
		return nil
	}
	s.expire(g, now)
	if len(g.members) == 0 {
		delete(s.m, k)
		return nil
	}
	return g
}

// sweep forgets every group whose members have all expired.
func (s *shareGroups) sweep(now time.Time) {
	for k := range s.m {
		s.live(k, now)
	}
}

func (s *shareGroups) dropIfEmpty(k shareGroupKey, g *shareGroup) {
	if len(g.members) == 0 {
		delete(s.m, k)
	}
}

// names is the tenant's share groups with live members, sorted.
func (s *shareGroups) names(tenant wire.ID) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []string
	for k := range s.m {
		if k.tenant == tenant && s.live(k, now) != nil {
			out = append(out, k.group)
		}
	}
	sort.Strings(out)
	return out
}

// shareGroupView is a share group as ShareGroupDescribe shows it.
type shareGroupView struct {
	epoch   int32
	members []shareMember
}

// describe is a copy of the group's state; ok is false for an unknown
// group or one with no live member.
func (s *shareGroups) describe(k shareGroupKey) (shareGroupView, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.live(k, s.now())
	if g == nil {
		return shareGroupView{}, false
	}
	v := shareGroupView{epoch: g.epoch}
	for _, m := range g.members {
		v.members = append(v.members, *m)
	}
	sort.Slice(v.members, func(i, j int) bool { return v.members[i].id < v.members[j].id })
	return v, true
}
