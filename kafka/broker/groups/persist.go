package groups

import (
	"errors"
	"time"

	"github.com/queen-mq/queen/wire"
)

// Membership survives a coordinator change (spec §3.1, docs/decisions.md):
// each time a group settles (the leader's SyncGroup makes it Stable) or
// empties, the coordinator hands its encoding to Config.Persist, which the
// broker writes to raft. A coordinator built after a leadership change gets
// those encodings in Config.Restore and continues each group Stable at its
// generation, so members heartbeating the new node are known there and no
// rebalance happens. A group caught mid-rebalance is restored as of its last
// settled generation: members in the new round send that round's
// generation and hear ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID, and rejoin,
// as they would after any coordinator loss.

// stateVersion leads every encoding, so a later layout can tell old ones.
const stateVersion = 1

// encodeGroup is g's membership as Persist receives it. The caller holds
// c.mu.
func encodeGroup(g *group) []byte {
	w := wire.Writer{}
	w.U8(stateVersion)
	w.String(g.protocolType)
	w.String(g.protocol)
	w.String(g.leader)
	w.Uvarint(g.joinSeq)
	ms := g.ordered()
	w.Uvarint(uint64(len(ms)))
	for _, m := range ms {
		w.String(m.id)
		w.String(m.clientID)
		w.String(m.clientHost)
		w.Uvarint(m.seq)
		w.Varint(m.sessionTimeout.Milliseconds())
		w.Varint(m.rebalanceTimeout.Milliseconds())
		w.Uvarint(uint64(len(m.protocols)))
		for _, p := range m.protocols {
			w.String(p.Name)
			w.Bytes(p.Metadata)
		}
		w.Bytes(m.assignment)
	}
	return w.B
}

func decodeGroup(name string, generation int32, b []byte) (*group, error) {
	r := wire.NewReader(b)
	if v := r.U8(); v != stateVersion {
		return nil, errors.New("groups: unknown membership encoding")
	}
	g := &group{name: name, state: Stable, generation: generation, members: map[string]*member{}, pending: map[string]*timer{}}
	g.protocolType = r.String()
	g.protocol = r.String()
	g.leader = r.String()
	g.joinSeq = r.Uvarint()
	n := r.Count(1<<20, 1)
	for range n {
		m := &member{syncedGen: generation}
		m.id = r.String()
		m.clientID = r.String()
		m.clientHost = r.String()
		m.seq = r.Uvarint()
		m.sessionTimeout = time.Duration(r.Varint()) * time.Millisecond
		m.rebalanceTimeout = time.Duration(r.Varint()) * time.Millisecond
		np := r.Count(1<<16, 1)
		for range np {
			p := Protocol{Name: r.String()}
			p.Metadata = append([]byte(nil), r.Bytes()...)
			m.protocols = append(m.protocols, p)
		}
		m.assignment = append([]byte(nil), r.Bytes()...)
		g.members[m.id] = m
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	if len(g.members) == 0 || g.members[g.leader] == nil {
		return nil, errors.New("groups: recorded membership without its leader")
	}
	return g, nil
}

// restore installs the recorded groups, each Stable with every member's
// session started afresh. The first session lasts the longer of the
// member's session and rebalance timeouts: a member has to notice the
// move and find the new coordinator (a metadata refresh, maybe a
// reconnect) before it can heartbeat here, and expiring it for that would
// cost the rebalance restoring is meant to save. The caller holds c.mu.
func (c *Coordinator) restore(recorded map[string]Recorded) {
	for name, r := range recorded {
		g, err := decodeGroup(name, r.Generation, r.State)
		if err != nil {
			c.log.Warn("kafka group membership not restored", "group", name, "err", err)
			continue
		}
		c.groups[name] = g
		for _, m := range g.members {
			c.armSession(g, m, max(m.sessionTimeout, m.rebalanceTimeout))
		}
		c.log.Debug("kafka group restored", "group", name, "generation", g.generation, "members", len(g.members))
	}
}

// Recorded is a group's membership as Persist last received it.
type Recorded struct {
	Generation int32
	State      []byte // nil: the group has no members
}

// persist hands g's membership to Config.Persist: its encoding when it is
// Stable, nothing (the group is gone or empty) otherwise. The caller holds
// c.mu; Persist must not block.
func (c *Coordinator) persist(g *group) {
	if c.cfg.Persist == nil {
		return
	}
	var state []byte
	if g.state == Stable && len(g.members) > 0 {
		state = encodeGroup(g)
	}
	c.cfg.Persist(g.name, g.generation, state)
}
