package groups

import (
	"errors"
	"time"

	"github.com/queen-mq/queen/wire"
)

// Membership survives a coordinator change (spec §3.1, docs/decisions.md):
// each time a rebalance's joins are answered (CompletingRebalance), the
// group settles (the leader's SyncGroup makes it Stable) or it empties,
// the coordinator hands its encoding to Config.Persist, which the broker
// writes to raft before it answers those joins and syncs. A coordinator
// built after a leadership change gets those encodings in Config.Restore
// and continues each group at its generation, so members heartbeating or
// syncing at the new node are known there and no rebalance happens: a
// group caught between its joins and the leader's sync waits there for the
// leader's assignments, as Kafka's rule for a coordinator change asks
// (members and generations are kept). Only a group caught while members
// are still joining (PreparingRebalance) is restored as of its last
// recorded generation, and its members, whose joins were never answered,
// join again.

// stateVersion leads every encoding, so a later layout can tell old ones.
// Version 3 added the group's state (Stable or CompletingRebalance),
// version 2 each member's instance id (static.go); older encodings are
// still read, Stable, their members all dynamic.
const (
	stateVersion   = 3
	stateVersionV2 = 2
	stateVersionV1 = 1
)

// encodeGroup is g's membership as Persist receives it. The caller holds
// c.mu.
func encodeGroup(g *group) []byte {
	w := wire.Writer{}
	w.U8(stateVersion)
	w.U8(uint8(g.state))
	w.String(g.protocolType)
	w.String(g.protocol)
	w.String(g.leader)
	w.Uvarint(g.joinSeq)
	ms := g.ordered()
	w.Uvarint(uint64(len(ms)))
	for _, m := range ms {
		w.String(m.id)
		w.String(m.instanceID)
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
	v := r.U8()
	if v != stateVersion && v != stateVersionV2 && v != stateVersionV1 {
		return nil, errors.New("groups: unknown membership encoding")
	}
	g := newGroup(name)
	g.state, g.generation = Stable, generation
	if v >= stateVersion {
		g.state = State(r.U8())
	}
	if g.state != Stable && g.state != CompletingRebalance {
		return nil, errors.New("groups: recorded membership in an unrecordable state")
	}
	// A member of a group restored between its joins and the leader's sync
	// has not synced here: it does so again.
	synced := generation
	if g.state == CompletingRebalance {
		synced = generation - 1
	}
	g.protocolType = r.String()
	g.protocol = r.String()
	g.leader = r.String()
	g.joinSeq = r.Uvarint()
	n := r.Count(1<<20, 1)
	for range n {
		m := &member{syncedGen: synced}
		m.id = r.String()
		if v >= stateVersionV2 {
			m.instanceID = r.String()
		}
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
		if m.instanceID != "" {
			g.static[m.instanceID] = m.id
		}
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	if len(g.members) == 0 || g.members[g.leader] == nil {
		return nil, errors.New("groups: recorded membership without its leader")
	}
	return g, nil
}

// restore installs the recorded groups, each in its recorded state
// (Stable, or awaiting the leader's sync) with every member's session
// started afresh. The first session lasts the longer of the
// member's session and rebalance timeouts: a member has to notice the
// move and find the new coordinator (a metadata refresh, maybe a
// reconnect) before it can heartbeat here, and expiring it for that would
// cost the rebalance restoring is meant to save. The caller holds c.mu.
func (c *Coordinator) restore(recorded map[string]Recorded) {
	for name, r := range recorded {
		if len(r.State) > 0 && r.State[0] == consumerStateVersion {
			if err := c.restoreConsumer(name, r.State); err != nil {
				c.log.Warn("kafka consumer group membership not restored", "group", name, "err", err)
			}
			continue
		}
		g, err := decodeGroup(name, r.Generation, r.State)
		if err != nil {
			c.log.Warn("kafka group membership not restored", "group", name, "err", err)
			continue
		}
		c.groups[name] = g
		for _, m := range g.members {
			c.armSession(g, m, max(m.sessionTimeout, m.rebalanceTimeout))
		}
		if g.state == CompletingRebalance {
			// The leader's assignments are awaited here as at the old
			// coordinator, no longer than a rebalance timeout.
			gen := g.generation
			g.join = c.after(g.maxRebalanceTimeout(), func() { c.syncExpired(g, gen) })
		}
		c.log.Debug("kafka group restored", "group", name, "generation", g.generation, "members", len(g.members),
			"state", g.state)
	}
}

// Recorded is a group's membership as Persist last received it.
type Recorded struct {
	Generation int32
	State      []byte // nil: the group has no members
}

// persist hands g's membership to Config.Persist: its encoding when it is
// Stable or awaiting the leader's sync, nothing (the group is gone or
// empty) otherwise. The caller holds c.mu; Persist must not block.
func (c *Coordinator) persist(g *group) {
	if c.cfg.Persist == nil {
		return
	}
	var state []byte
	if (g.state == Stable || g.state == CompletingRebalance) && len(g.members) > 0 {
		state = encodeGroup(g)
	}
	c.cfg.Persist(g.name, g.generation, state)
}
