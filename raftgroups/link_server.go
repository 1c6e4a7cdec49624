package raftgroups

import (
	"strconv"
	"sync/atomic"

	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/queen-mq/queen/raftgroups/link"
)

// linkServed is one group as the standby link (raftgroups/link) reads it:
// the raft log through dragonboat's read-only log reader, the applied
// index as the last entry served (everything applied is committed;
// dragonboat's log reader keeps the commit index only as of the last
// boot), and consistent copies of the store. Its handler is mounted on the
// group's raft listener before the NodeHost exists, so it answers 503
// until ready is set.
type linkServed struct {
	h     *Host
	g     *group
	tail  *linkTail // the entries applied last, served from memory (link_tail.go)
	ready atomic.Bool
}

var _ link.Source = (*linkServed)(nil)

// linkHandler is group g's link routes, or nil when this node serves no
// link (no QUEEN_LINK_TOKEN).
func (h *Host) linkHandler(g *group) (*linkServed, *link.Server) {
	if h.cfg.LinkToken == "" {
		return nil, nil
	}
	src := &linkServed{h: h, g: g, tail: &linkTail{limit: linkTailBytes(h.cfg.MemoryBudget, h.cfg.Groups)}}
	return src, link.NewServer(src)
}

func (s *linkServed) Ready() bool { return s.ready.Load() }

func (s *linkServed) Info() (link.Info, error) {
	first, _, err := s.Range()
	if err != nil {
		return link.Info{}, err
	}
	members := map[string]string{}
	for id, addr := range s.g.view.Load().voters {
		if base, err := addrWithOffset(addr, -s.g.n); err == nil {
			members[strconv.FormatUint(id, 10)] = base
		}
	}
	return link.Info{NodeID: s.h.cfg.NodeID, Groups: s.h.cfg.Groups, Group: s.g.n, FirstIndex: first,
		CommitIndex: s.g.store.Applied(), Format: s.g.store.ActiveFormat(), Members: members}, nil
}

// Leader names the group's leader for the standby, which reads from it.
func (s *linkServed) Leader() (uint64, uint64, string, []string) {
	voters := s.g.view.Load().voters
	members := make([]string, 0, len(voters))
	for _, addr := range voters {
		if b, err := addrWithOffset(addr, -s.g.n); err == nil {
			members = append(members, b)
		}
	}
	id, _, valid, err := s.g.nh.GetLeaderID(s.g.shardID)
	if err != nil || !valid {
		return s.h.cfg.NodeID, 0, "", members
	}
	base := ""
	if addr, ok := voters[id]; ok {
		if b, err := addrWithOffset(addr, -s.g.n); err == nil {
			base = b
		}
	}
	return s.h.cfg.NodeID, id, base, members
}

func (s *linkServed) Range() (uint64, uint64, error) {
	lr, err := s.g.nh.GetLogReader(s.g.shardID)
	if err != nil {
		return 0, 0, err
	}
	first, last := lr.GetRange()
	return first, last, nil
}

func (s *linkServed) Entries(low, high, maxSize uint64) ([]pb.Entry, error) {
	if ents, ok := s.tail.read(low, high, maxSize); ok {
		return ents, nil
	}
	lr, err := s.g.nh.GetLogReader(s.g.shardID)
	if err != nil {
		return nil, err
	}
	return lr.Entries(low, high, maxSize)
}

func (s *linkServed) Applied() uint64 { return s.g.store.Applied() }

// AppliedChanged wakes the link's long polls when entries are applied.
func (s *linkServed) AppliedChanged() <-chan struct{} { return s.tail.changed() }

func (s *linkServed) Snapshot() (link.Snapshot, error) {
	snap, err := s.g.store.CaptureLinkSnapshot()
	if err != nil {
		return nil, err
	}
	return snap, nil
}
