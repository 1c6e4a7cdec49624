package raftgroups

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/lni/dragonboat/v4"

	"github.com/queen-mq/queen/wire"
)

// Membership changes (spec §2.17, §4.4). Every change is applied to every
// raft group, one group at a time, each through dragonboat's ordered config
// change (the ConfigChangeID read just before), so a change raced by another
// fails with ErrInFlight instead of applying on a stale view. A partly
// applied change (some groups done) is safe to repeat: each step skips the
// groups already in the wanted state.

// Errors of membership changes; the HTTP door answers each with 409 and the
// spec's code.
var (
	ErrInFlight      = errors.New("raftgroups: another membership change is in flight")
	ErrNoQuorum      = errors.New("raftgroups: the change would leave a group without a live quorum, or none is reachable")
	ErrLastVoter     = errors.New("raftgroups: cannot remove the last voter")
	ErrLearnerBehind = errors.New("raftgroups: the learner has not caught up")
	// ErrBadMember is bad input (unknown id, reused id, bad address); the
	// message says which.
	ErrBadMember = errors.New("raftgroups: bad membership request")
	// ErrNotMember: the node named is not a member of any group.
	ErrNotMember = errors.New("raftgroups: not a member")
)

// memberView is one group's membership as last read.
type memberView struct {
	voters, learners map[uint64]string // replica id → this group's raft address
	removed          map[uint64]bool
	ccID             uint64
}

func viewOf(m *dragonboat.Membership) *memberView {
	v := &memberView{voters: maps.Clone(m.Nodes), learners: maps.Clone(m.NonVotings), removed: map[uint64]bool{}, ccID: m.ConfigChangeID}
	if v.voters == nil {
		v.voters = map[uint64]string{}
	}
	if v.learners == nil {
		v.learners = map[uint64]string{}
	}
	for id := range m.Removed {
		v.removed[id] = true
	}
	return v
}

// addr is member id's raft address in group g, "" if unknown.
func (g *group) addr(id uint64) string {
	v := g.view.Load()
	if a, ok := v.voters[id]; ok {
		return a
	}
	return v.learners[id]
}

// refreshMembership re-reads every group's membership through a
// linearizable read; a group that cannot answer keeps its last view.
func (h *Host) refreshMembership() {
	for _, g := range h.groups {
		ctx, cancel := context.WithTimeout(h.stopped, time.Second)
		m, err := g.nh.SyncGetShardMembership(ctx, g.shardID)
		cancel()
		if err == nil {
			g.view.Store(viewOf(m))
		}
	}
}

// sortedIDs is a member map's ids, sorted, never nil (JSON []).
func sortedIDs(m map[uint64]string) []uint64 {
	return append([]uint64{}, slices.Sorted(maps.Keys(m))...)
}

// readViews re-reads every group's membership through a quorum before a
// change is checked against it: the cached views may trail a change made
// through another node by up to a second.
func (h *Host) readViews(ctx context.Context) error {
	for _, g := range h.groups {
		if _, err := h.syncMembership(ctx, g); err != nil {
			return err
		}
	}
	return nil
}

// transient says whether a dragonboat error may pass by itself (an
// election, a busy or restarting replica): worth another try until the
// request's deadline.
func (h *Host) transient(err error) bool {
	return !h.closed.Load() && (errors.Is(err, dragonboat.ErrTimeout) || errors.Is(err, dragonboat.ErrShardNotReady) ||
		errors.Is(err, dragonboat.ErrSystemBusy) || errors.Is(err, dragonboat.ErrShardClosed) ||
		errors.Is(err, dragonboat.ErrAborted))
}

// syncMembership reads group g's membership through a quorum, retrying
// transient failures (a leader election right after a node died) until
// ctx ends, and caches it.
func (h *Host) syncMembership(ctx context.Context, g *group) (*memberView, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := g.nh.SyncGetShardMembership(actx, g.shardID)
		cancel()
		if err == nil {
			v := viewOf(m)
			g.view.Store(v)
			return v, nil
		}
		if !h.transient(err) || ctx.Err() != nil {
			return nil, configErr(g.n, err)
		}
		select {
		case <-ctx.Done():
			return nil, configErr(g.n, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// voterIDs is group 0's voters, sorted: the cluster's voting nodes.
func (h *Host) voterIDs() []uint64 {
	return sortedIDs(h.groups[0].view.Load().voters)
}

// Peers lists the cluster's voters by id, as the membership says (not
// QUEEN_RAFT_PEERS), with their raft address of group 0 and their HTTP
// address from the replicated registry (or QUEEN_RAFT_PEERS if not there).
func (h *Host) Peers() []Peer {
	v := h.groups[0].view.Load()
	regs := h.groups[0].store.MemberHTTPAddrs()
	var out []Peer
	for _, id := range h.voterIDs() {
		out = append(out, Peer{ID: id, RaftAddr: v.voters[id], HTTPAddr: h.httpAddr(id, regs)})
	}
	return out
}

func (h *Host) httpAddr(id uint64, regs map[uint64]string) string {
	if a := regs[id]; a != "" {
		return a
	}
	for _, p := range h.cfg.Peers {
		if p.ID == id {
			return p.HTTPAddr
		}
	}
	return ""
}

// IsMember reports whether node id is a voter or learner of group 0.
func (h *Host) IsMember(id uint64) bool { return h.groups[0].addr(id) != "" }

// MemberStatus is one node as the membership view shows it.
type MemberStatus struct {
	NodeID  uint64 `json:"nodeId"`
	Voter   bool   `json:"voter"`
	Raft    string `json:"raft"`
	HTTP    string `json:"http,omitempty"`
	Live    bool   `json:"live"`
	Lag     uint64 `json:"lag"`             // the most entries any group's replica trails this node's commit by
	Groups  int    `json:"groups"`          // groups it is a member of
	Problem string `json:"error,omitempty"` // why lag is unknown
}

// MembershipView is the cluster membership (spec §2.17).
type MembershipView struct {
	Leader   uint64         `json:"leader"`
	Term     uint64         `json:"term"`
	Voters   []uint64       `json:"voters"`
	Learners []uint64       `json:"learners"`
	Source   string         `json:"source"` // "leader": read through a quorum; "local": this node's last view
	Members  []MemberStatus `json:"members"`
	// Groups is each raft group's voters and learners: they differ from
	// group 0's only while a change is part way through.
	Groups []GroupMembers `json:"groups"`
}

// GroupMembers is one group's membership.
type GroupMembers struct {
	Group    int      `json:"group"`
	Voters   []uint64 `json:"voters"`
	Learners []uint64 `json:"learners"`
}

// Membership reads every group's membership and reports the union; voters
// and learners are group 0's (a change in progress may differ per group,
// visible as a member's groups count).
func (h *Host) Membership(ctx context.Context) MembershipView {
	source := "leader"
	for _, g := range h.groups {
		// syncMembership retries a read that a leader change dropped,
		// which would otherwise wait for ctx's whole deadline.
		if _, err := h.syncMembership(ctx, g); err != nil {
			source = "local"
		}
	}
	ans := MembershipView{Source: source, Voters: []uint64{}, Learners: []uint64{}}
	if l, t, ok, _ := h.groups[0].nh.GetLeaderID(h.groups[0].shardID); ok {
		ans.Leader, ans.Term = l, t
	}
	v0 := h.groups[0].view.Load()
	ans.Voters = h.voterIDs()
	ans.Learners = sortedIDs(v0.learners)
	regs := h.groups[0].store.MemberHTTPAddrs()
	all := map[uint64]*MemberStatus{}
	for _, g := range h.groups {
		v := g.view.Load()
		ans.Groups = append(ans.Groups, GroupMembers{Group: g.n, Voters: sortedIDs(v.voters),
			Learners: sortedIDs(v.learners)})
		for id := range v.voters {
			if all[id] == nil {
				all[id] = &MemberStatus{NodeID: id}
			}
			all[id].Groups++
		}
		for id := range v.learners {
			if all[id] == nil {
				all[id] = &MemberStatus{NodeID: id}
			}
			all[id].Groups++
		}
	}
	for _, id := range slices.Sorted(maps.Keys(all)) {
		st := all[id]
		_, st.Voter = v0.voters[id]
		st.Raft = h.groups[0].addr(id)
		st.HTTP = h.httpAddr(id, regs)
		lag, err := h.memberLag(ctx, id)
		st.Live = err == nil
		st.Lag = lag
		if err != nil {
			st.Problem = err.Error()
		}
		ans.Members = append(ans.Members, *st)
	}
	return ans
}

// memberLag asks node id over the node channel for its applied index per
// group and returns the most any group trails this node's commit by.
// Dragonboat does not expose a follower's progress, so the member itself is
// asked; an unreachable member is an error, never "caught up".
func (h *Host) memberLag(ctx context.Context, id uint64) (uint64, error) {
	local := h.Status()
	if id == h.cfg.NodeID {
		var lag uint64
		for _, st := range local {
			lag = max(lag, st.Commit-min(st.Commit, st.Applied))
		}
		return lag, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	groups, err := h.peerApplied(ctx, id)
	if err != nil {
		return 0, err
	}
	if len(groups) != len(local) {
		return 0, fmt.Errorf("node %d runs %d groups, this node %d", id, len(groups), len(local))
	}
	var lag uint64
	for i, st := range local {
		a := groups[i].Applied
		if st.Commit > a {
			lag = max(lag, st.Commit-a)
		}
	}
	return lag, nil
}

// registerMember records a member's HTTP address in group 0 (empty forgets
// it), committed by a quorum before the change that needs it.
func (h *Host) registerMember(ctx context.Context, id uint64, httpAddr string) error {
	c := wire.RegisterMemberCmd{NodeID: id, HTTPAddr: httpAddr}
	res, err := h.groups[0].prop.submit(ctx, []wire.Command{{Kind: wire.KindRegisterMember, Body: c.Encode(nil)}})
	if err != nil {
		return err
	}
	if code, _ := wire.ResultCode(res[0]); code != wire.CodeOK {
		return fmt.Errorf("%w: register node %d: %v", ErrBadMember, id, code.Err())
	}
	return nil
}

// RegisterSelf records this node's own HTTP address, so peers that did not
// list it in QUEEN_RAFT_PEERS (it joined later) can reach it.
func (h *Host) RegisterSelf(ctx context.Context, httpAddr string) error {
	if httpAddr == "" || h.groups[0].store.MemberHTTPAddrs()[h.cfg.NodeID] == httpAddr {
		return nil
	}
	return h.registerMember(ctx, h.cfg.NodeID, httpAddr)
}

func checkAddr(what, a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("%w: %s address %q is not host:port", ErrBadMember, what, a)
	}
	return nil
}

// configErr maps a dragonboat config change failure onto the spec's codes.
func configErr(n int, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, dragonboat.ErrRejected):
		return fmt.Errorf("%w (group %d)", ErrInFlight, n)
	case errors.Is(err, dragonboat.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, dragonboat.ErrShardNotReady), errors.Is(err, dragonboat.ErrSystemBusy),
		errors.Is(err, dragonboat.ErrShardClosed), errors.Is(err, dragonboat.ErrAborted),
		// The serving node no longer hosts the group: it removed itself,
		// and a peer whose leader view is stale forwarded the request
		// here. Retriable: the next try reaches the new leader.
		errors.Is(err, dragonboat.ErrShardNotFound):
		return fmt.Errorf("%w (group %d: %w)", ErrNoQuorum, n, err)
	case errors.Is(err, dragonboat.ErrClosed):
		return ErrClosed
	}
	return fmt.Errorf("raftgroups: group %d membership change: %w", n, err)
}

// change reads group g's membership and runs one ordered config change on
// it unless skip says the group is already as wanted.
func (h *Host) change(ctx context.Context, g *group, skip func(*memberView) bool,
	do func(ctx context.Context, v *memberView) error) error {
	for {
		v, err := h.syncMembership(ctx, g)
		if err != nil {
			return err
		}
		if skip(v) {
			return nil
		}
		// A transient failure may or may not have applied the change:
		// read the membership again, which skips it if it did.
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = do(actx, v)
		cancel()
		if err == nil {
			_, _ = h.syncMembership(ctx, g)
			return nil
		}
		if !h.transient(err) || ctx.Err() != nil {
			return configErr(g.n, err)
		}
	}
}

// registerSelfLoop records this node's HTTP address (its QUEEN_RAFT_PEERS
// entry) in the replicated registry once a quorum commits it, retrying
// every 2 s until then: a joining node can propose only once it was added.
func (h *Host) registerSelfLoop() {
	defer h.wg.Done()
	var self string
	for _, p := range h.cfg.Peers {
		if p.ID == h.cfg.NodeID {
			self = p.HTTPAddr
		}
	}
	if self == "" || len(h.cfg.Peers) < 2 && !h.cfg.Join {
		return
	}
	for {
		ctx, cancel := context.WithTimeout(h.stopped, 5*time.Second)
		err := h.RegisterSelf(ctx, self)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-h.stop:
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// MembershipLeader is group 0's leader, where membership requests are
// served; 0 when this node leads or no leader is known.
func (h *Host) MembershipLeader() uint64 {
	l, _, ok, err := h.groups[0].nh.GetLeaderID(h.groups[0].shardID)
	if err != nil || !ok || l == h.cfg.NodeID {
		return 0
	}
	return l
}
