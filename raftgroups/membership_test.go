package raftgroups_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

// Bad membership requests are refused with the error the HTTP door maps to
// a status, and change nothing (the multi-node flows are in e2e).
func TestMembershipRefusalsChangeNothing(t *testing.T) {
	host, _ := raftgroupstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"remove the last voter", host.Remove(ctx, 1, false), raftgroups.ErrLastVoter},
		{"remove a non-member", host.Remove(ctx, 7, false), raftgroups.ErrNotMember},
		{"learner without a port", host.AddLearner(ctx, 2, "h2", "h2:6632"), raftgroups.ErrBadMember},
		{"learner id 0", host.AddLearner(ctx, 0, "h2:7400", "h2:6632"), raftgroups.ErrBadMember},
		{"learner that is a voter", host.AddLearner(ctx, 1, "h1:7400", "h1:6632"), raftgroups.ErrBadMember},
		{"promote a non-member", host.Promote(ctx, []uint64{5}, false, 1000), raftgroups.ErrBadMember},
		{"promote nobody", host.Promote(ctx, nil, false, 1000), raftgroups.ErrBadMember},
		{"no voters", host.SetVoters(ctx, nil, false, 1000), raftgroups.ErrLastVoter},
		{"repeated voter", host.SetVoters(ctx, []uint64{1, 1}, false, 1000), raftgroups.ErrBadMember},
		{"voter not a member", host.SetVoters(ctx, []uint64{1, 2}, false, 1000), raftgroups.ErrBadMember},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	m := host.Membership(ctx)
	if !slices.Equal(m.Voters, []uint64{1}) || len(m.Learners) != 0 || m.Source != "leader" || len(m.Groups) != host.Groups() {
		t.Fatalf("membership after refusals: %+v", m)
	}
	for _, g := range m.Groups {
		if !slices.Equal(g.Voters, []uint64{1}) {
			t.Fatalf("group %d: %+v", g.Group, g)
		}
	}
	if p := host.Peers(); len(p) != 1 || p[0].ID != 1 {
		t.Fatalf("peers: %+v", p)
	}
}
