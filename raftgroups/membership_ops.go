package raftgroups

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/lni/dragonboat/v4"
)

// AddLearner adds node id as a non-voting member of every group, group n
// at raftAddr's port + n. httpAddr is recorded first (group 0, quorum
// committed) so every node can reach the new one before it is a member.
// The new node then starts with QUEEN_RAFT_JOIN=true and catches up.
func (h *Host) AddLearner(ctx context.Context, id uint64, raftAddr, httpAddr string) error {
	defer h.changeRunning()()
	if id == 0 {
		return fmt.Errorf("%w: id must be a positive node id", ErrBadMember)
	}
	if err := checkAddr("raft", raftAddr); err != nil {
		return err
	}
	if err := checkAddr("http", httpAddr); err != nil {
		return err
	}
	if _, err := addrWithOffset(raftAddr, len(h.groups)-1); err != nil {
		return fmt.Errorf("%w: raft address: %v", ErrBadMember, err)
	}
	if err := h.readViews(ctx); err != nil {
		return err
	}
	for _, g := range h.groups {
		v := g.view.Load()
		if v.removed[id] {
			return fmt.Errorf("%w: node id %d was removed and can never return; give the new node a new id", ErrBadMember, id)
		}
		if _, ok := v.voters[id]; ok {
			return fmt.Errorf("%w: node %d is already a voter", ErrBadMember, id)
		}
		want, _ := addrWithOffset(raftAddr, g.n)
		if a, ok := v.learners[id]; ok && a != want {
			return fmt.Errorf("%w: node %d is already a learner at %s", ErrBadMember, id, a)
		}
	}
	if err := h.registerMember(ctx, id, httpAddr); err != nil {
		return err
	}
	for _, g := range h.groups {
		target, _ := addrWithOffset(raftAddr, g.n)
		err := h.change(ctx, g, func(v *memberView) bool { _, ok := v.learners[id]; return ok },
			func(ctx context.Context, v *memberView) error {
				if v.removed[id] {
					return fmt.Errorf("%w: node id %d was removed", ErrBadMember, id)
				}
				return g.nh.SyncRequestAddNonVoting(ctx, g.shardID, id, target, v.ccID)
			})
		if err != nil {
			return err
		}
	}
	h.log.Warn("raft: membership: learner added", "node", id, "raft", raftAddr, "http", httpAddr, "groups", len(h.groups))
	return nil
}

// Promote makes learners voters in every group. Unless force, each must be
// within maxLag entries of this node's commit index in every group.
func (h *Host) Promote(ctx context.Context, ids []uint64, force bool, maxLag uint64) error {
	defer h.changeRunning()()
	if len(ids) == 0 {
		return fmt.Errorf("%w: ids is empty", ErrBadMember)
	}
	if err := h.readViews(ctx); err != nil {
		return err
	}
	for _, id := range ids {
		for _, g := range h.groups {
			v := g.view.Load()
			_, l := v.learners[id]
			_, vo := v.voters[id]
			if !l && !vo {
				return fmt.Errorf("%w: node %d is not a learner of group %d; add it first", ErrBadMember, id, g.n)
			}
		}
		if force {
			continue
		}
		lag, err := h.memberLag(ctx, id)
		if err != nil {
			return fmt.Errorf("%w: node %d: %v", ErrLearnerBehind, id, err)
		}
		if lag > maxLag {
			return fmt.Errorf("%w: node %d trails by %d entries (QUEEN_RAFT_PROMOTE_MAX_LAG %d)", ErrLearnerBehind, id, lag, maxLag)
		}
	}
	for _, id := range ids {
		for _, g := range h.groups {
			err := h.change(ctx, g, func(v *memberView) bool { _, ok := v.voters[id]; return ok },
				func(ctx context.Context, v *memberView) error {
					addr, ok := v.learners[id]
					if !ok {
						return fmt.Errorf("%w: node %d is not a learner of group %d", ErrBadMember, id, g.n)
					}
					return g.nh.SyncRequestAddReplica(ctx, g.shardID, id, addr, v.ccID)
				})
			if err != nil {
				return err
			}
		}
		h.log.Warn("raft: membership: node promoted to voter", "node", id, "force", force)
	}
	return nil
}

// Remove deletes node id from every group (voter or learner). Its id can
// never be used again. Unless force, the voters left must hold a live
// majority, and the last voter is never removed.
func (h *Host) Remove(ctx context.Context, id uint64, force bool) error {
	defer h.changeRunning()()
	if err := h.readViews(ctx); err != nil {
		return err
	}
	found := false
	for _, g := range h.groups {
		v := g.view.Load()
		_, vo := v.voters[id]
		_, l := v.learners[id]
		found = found || vo || l
		if vo && len(v.voters) == 1 {
			return fmt.Errorf("%w: node %d is group %d's only voter", ErrLastVoter, id, g.n)
		}
	}
	if !found {
		return fmt.Errorf("%w: node %d is not a member", ErrNotMember, id)
	}
	if !force {
		left := slices.DeleteFunc(h.voterIDs(), func(x uint64) bool { return x == id })
		if err := h.checkLiveMajority(ctx, left); err != nil {
			return err
		}
	}
	// Group 0 goes last: its membership is the cluster's (voterIDs), so a
	// removal cut short by an error still shows there and a retry finishes
	// the other groups.
	for i := len(h.groups) - 1; i >= 0; i-- {
		g := h.groups[i]
		err := h.change(ctx, g, func(v *memberView) bool {
			_, vo := v.voters[id]
			_, l := v.learners[id]
			return !vo && !l
		}, func(ctx context.Context, v *memberView) error {
			if _, vo := v.voters[id]; vo && len(v.voters) == 1 {
				return fmt.Errorf("%w: node %d is group %d's only voter", ErrLastVoter, id, g.n)
			}
			return g.nh.SyncRequestDeleteReplica(ctx, g.shardID, id, v.ccID)
		})
		if id == h.cfg.NodeID && errors.Is(err, dragonboat.ErrShardNotFound) {
			// A replica that applies its own removal stops: the request
			// may end in an error and the membership can no longer be
			// read here, but the shard is gone because it was removed.
			err = nil
		}
		if err != nil {
			return err
		}
	}
	if err := h.registerMember(ctx, id, ""); err != nil {
		h.log.Warn("raft: membership: forgetting the removed node's address", "node", id, "err", err)
	}
	h.log.Warn("raft: membership: node removed", "node", id, "force", force)
	return nil
}

// SetVoters makes the voter set exactly voters in every group: learners in
// it are promoted (caught up unless force), voters not in it removed.
// Every id must already be a member: this adds nobody.
func (h *Host) SetVoters(ctx context.Context, voters []uint64, force bool, maxLag uint64) error {
	defer h.changeRunning()()
	if len(voters) == 0 {
		return fmt.Errorf("%w: voters is empty", ErrLastVoter)
	}
	want := map[uint64]bool{}
	for _, id := range voters {
		if id == 0 || want[id] {
			return fmt.Errorf("%w: voter id %d is zero or repeated", ErrBadMember, id)
		}
		want[id] = true
	}
	if err := h.readViews(ctx); err != nil {
		return err
	}
	var promote []uint64
	for _, id := range slices.Sorted(maps.Keys(want)) {
		for _, g := range h.groups {
			v := g.view.Load()
			_, vo := v.voters[id]
			_, l := v.learners[id]
			if !vo && !l {
				return fmt.Errorf("%w: node %d is not a member of group %d; add it as a learner first", ErrBadMember, id, g.n)
			}
			if l && !slices.Contains(promote, id) {
				promote = append(promote, id)
			}
		}
	}
	if !force {
		if err := h.checkLiveMajority(ctx, voters); err != nil {
			return err
		}
	}
	if len(promote) > 0 {
		if err := h.Promote(ctx, promote, force, maxLag); err != nil {
			return err
		}
	}
	// This node goes last: once it has left group 0 it can read and change
	// no group's membership any more, and the leader serving the request
	// may be one of the voters to remove.
	var leave []uint64
	self := false
	for _, id := range h.allVoterIDs() {
		switch {
		case want[id]:
		case id == h.cfg.NodeID:
			self = true
		default:
			leave = append(leave, id)
		}
	}
	if self {
		leave = append(leave, h.cfg.NodeID)
	}
	for _, id := range leave {
		if err := h.Remove(ctx, id, true); err != nil { // the live majority was checked above
			return err
		}
	}
	return nil
}

// checkLiveMajority refuses a voter set of which fewer than a majority
// answer over the node channel: the groups could not commit afterwards.
func (h *Host) checkLiveMajority(ctx context.Context, voters []uint64) error {
	live := 0
	for _, id := range voters {
		if _, err := h.memberLag(ctx, id); err == nil {
			live++
		}
	}
	if live*2 <= len(voters) {
		return fmt.Errorf("%w: %d of the %d voters left answer", ErrNoQuorum, live, len(voters))
	}
	return nil
}

// allVoterIDs is every group's voters, sorted: after a change cut short,
// a voter may have left group 0 and not yet another group.
func (h *Host) allVoterIDs() []uint64 {
	all := map[uint64]string{}
	for _, g := range h.groups {
		maps.Copy(all, g.view.Load().voters)
	}
	return sortedIDs(all)
}

// changeRunning marks a membership change as running until the returned
// func is called.
func (h *Host) changeRunning() func() {
	h.changing.Add(1)
	return func() { h.changing.Add(-1) }
}
