package groups

import (
	"bytes"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// group is one consumer group's membership. Every field is guarded by the
// coordinator's mu.
type group struct {
	name         string
	state        State
	generation   int32
	protocolType string
	protocol     string // chosen at each completed join; "" while Empty
	leader       string
	members      map[string]*member
	pending      map[string]*timer // member ids told MEMBER_ID_REQUIRED, expiring unless they rejoin
	static       map[string]string // group.instance.id -> member id of each static member (static.go)
	joinSeq      uint64            // orders members by first join, for deterministic choices

	// join is the deadline of the current phase: the rebalance timeout
	// while members rejoin (or the initial delay while initial is set),
	// then the rebalance timeout again for the leader's SyncGroup.
	join *timer
	// initial is set while the first rebalance of an empty group waits
	// for more members: it completes only when the delay runs out.
	initial          bool
	initialRemaining time.Duration // rebalance budget left after the current delay
	newMemberAdded   bool          // a member joined during the current delay

	idle *timer // drops the group once it has been empty for IdleTimeout
}

func newGroup(name string) *group {
	return &group{name: name, members: map[string]*member{}, pending: map[string]*timer{}, static: map[string]string{}}
}

// member is one joined member of a group.
type member struct {
	id         string
	instanceID string // group.instance.id of a static member, "" for a dynamic one
	clientID   string
	clientHost string
	seq        uint64
	protocols  []Protocol

	sessionTimeout, rebalanceTimeout time.Duration
	session                          *timer

	// joinWait and syncWait are the channels a blocked JoinGroup or
	// SyncGroup waits on; each gets exactly one answer, then is cleared.
	joinWait   chan JoinResult
	syncWait   chan SyncResult
	syncedGen  int32 // the generation this member last sent SyncGroup in
	assignment []byte
}

// Protocol is one assignment protocol a member offers, with its metadata.
type Protocol struct {
	Name     string
	Metadata []byte
}

func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func sameProtocols(a, b []Protocol) bool {
	return slices.EqualFunc(a, b, func(x, y Protocol) bool { return x.Name == y.Name && bytes.Equal(x.Metadata, y.Metadata) })
}

// ordered lists the members by first join, so responses and leader
// choices do not depend on map order.
func (g *group) ordered() []*member {
	out := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *member) int { return int(a.seq) - int(b.seq) })
	return out
}

// supports reports whether a member offering protocols may join: any
// protocol type into an empty group, otherwise the group's type and at
// least one protocol every current member also offers.
func (g *group) supports(protocolType string, protocols []Protocol) bool {
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if g.allSupport(p.Name) {
			return true
		}
	}
	return false
}

func (g *group) allSupport(name string) bool {
	for _, m := range g.members {
		if !slices.ContainsFunc(m.protocols, func(p Protocol) bool { return p.Name == name }) {
			return false
		}
	}
	return true
}

// selectProtocol picks the protocol every member supports that most
// members prefer, as Kafka does; ties go to the leader's preference order.
func (g *group) selectProtocol() string {
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.allSupport(p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	if l := g.members[g.leader]; l != nil {
		for _, p := range l.protocols {
			if v, ok := votes[p.Name]; ok && v > bestVotes {
				best, bestVotes = p.Name, v
			}
		}
		if best == "" && len(l.protocols) > 0 {
			best = l.protocols[0].Name // unreachable while joins check support
		}
	}
	return best
}

func (g *group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// allJoined reports whether every member has sent its JoinGroup for this
// rebalance and no member id handed out is still unclaimed.
func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinWait == nil {
			return false
		}
	}
	return true
}

// pickLeader keeps the leader while it is a member, else takes the member
// that joined first.
func (g *group) pickLeader() {
	if g.members[g.leader] != nil {
		return
	}
	g.leader = ""
	if ms := g.ordered(); len(ms) > 0 {
		g.leader = ms[0].id
	}
}

// errResult is a JoinResult carrying only an error code.
func errJoin(err *kerr.Error, memberID string) JoinResult {
	return JoinResult{Err: err, MemberID: memberID, Generation: -1}
}
