package raftgroups

import (
	"context"
	"sync/atomic"
	"time"
)

// catchUpWait bounds one background read barrier of a new leader; a leader
// still behind after it tries again on the next request.
const catchUpWait = 10 * time.Second

// caughtUp is what this node knows about its own applied state in one
// group, as its leader.
type caughtUp struct {
	// term is a term in which this node led the group and had applied
	// everything the group committed before: once it equals the current
	// term, local reads are as recent as any earlier leader's.
	term atomic.Uint64
	// probing is set while a read barrier runs to establish it.
	probing atomic.Bool
}

// LeaderEpoch reports this node's view of group n for Kafka's leader
// epochs, which are raft terms: the group's current term as this node
// knows it, whether this node leads it, and whether, leading, it has
// applied everything the group had committed when its term began.
//
// A node elected leader has every committed entry in its log, but may not
// know that the last ones were committed, and applies them only once its
// first entry of the term commits them: until then its high-water marks
// are behind what readers saw from the previous leader. A completed
// ReadIndex in the term proves it caught up (dragonboat completes one only
// after the leader committed an entry of its term and applied up to it).
// The first call that finds this node leading but not proven caught up
// starts that read barrier in the background; callers answer "not
// available yet" meanwhile.
func (e *Engine) LeaderEpoch(n int) (term uint64, leads, caughtUp bool) {
	g := e.host.groups[n]
	id, term, valid, err := g.nh.GetLeaderID(g.shardID)
	if err != nil {
		return 0, false, false
	}
	if !valid || id != e.host.cfg.NodeID {
		return term, false, false
	}
	if e.caught[n].term.Load() == term {
		return term, true, true
	}
	e.startCatchUp(n, term)
	return term, true, false
}

// watchLeaders starts the read barrier as soon as this node is elected, so
// it has usually caught up by the time clients ask; groups it was elected
// to lead before the engine existed start theirs here.
func (e *Engine) watchLeaders() {
	f := func(n int, leader, term uint64) {
		if leader == e.host.cfg.NodeID && n >= 0 && n < len(e.caught) {
			e.startCatchUp(n, term)
		}
	}
	e.host.onLeader.Store(&f)
	for n := range e.caught {
		e.LeaderEpoch(n)
	}
}

// startCatchUp runs catchUp for term unless it is proven or a run is on.
func (e *Engine) startCatchUp(n int, term uint64) {
	c := &e.caught[n]
	if c.term.Load() != term && c.probing.CompareAndSwap(false, true) {
		go e.catchUp(n, term)
	}
}

// catchUp runs a read barrier in group n and records term as caught up if
// this node still leads in that term after it: the barrier then ran in
// this node's own leadership.
func (e *Engine) catchUp(n int, term uint64) {
	c := &e.caught[n]
	defer c.probing.Store(false)
	ctx, cancel := context.WithTimeout(e.host.stopped, catchUpWait)
	defer cancel()
	if err := e.Barrier(ctx, n); err != nil {
		return
	}
	g := e.host.groups[n]
	if id, now, valid, err := g.nh.GetLeaderID(g.shardID); err == nil && valid && id == e.host.cfg.NodeID && now == term {
		c.term.Store(term)
	}
}
