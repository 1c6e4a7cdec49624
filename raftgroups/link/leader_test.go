package link

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// leaderSource is a fakeSource that says who leads its group.
type leaderSource struct {
	*fakeSource
	self   uint64
	leader atomic.Uint64
	addr   atomic.Value // string: the leader's base address
}

func (l *leaderSource) Leader() (uint64, uint64, string) {
	a, _ := l.addr.Load().(string)
	return l.self, l.leader.Load(), a
}

// A standby started with only a source follower's address, whose applied
// index trails the leader's, moves to the leader the follower names: the
// commit it then reports is the leader's, and only the leader's answer
// counts as one (the lag is an upper bound only from a leader's answer).
func TestClientMovesToTheGroupLeader(t *testing.T) {
	lead := &leaderSource{fakeSource: &fakeSource{first: 1}, self: 2}
	follower := &leaderSource{fakeSource: &fakeSource{first: 1}, self: 1}
	for i := 0; i < 10; i++ {
		lead.appendCmd(1_700_000_000_000+int64(i), "k")
		if i < 7 {
			follower.appendCmd(1_700_000_000_000+int64(i), "k")
		}
	}
	ls := httptest.NewServer(NewServer(lead))
	t.Cleanup(ls.Close)
	fs := httptest.NewServer(NewServer(follower))
	t.Cleanup(fs.Close)
	leadAddr := strings.TrimPrefix(ls.URL, "http://")
	for _, s := range []*leaderSource{lead, follower} {
		s.leader.Store(2)
		s.addr.Store(leadAddr)
	}
	c := NewClient([]string{strings.TrimPrefix(fs.URL, "http://")}, "tok", nil)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	b, err := c.Entries(ctx, 0, 1, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b.Leader || b.Commit != 7 {
		t.Fatalf("the follower's answer: leader %v commit %d", b.Leader, b.Commit)
	}
	b, err = c.Entries(ctx, 0, 8, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Leader || b.Commit != 10 || len(b.Entries) != 3 {
		t.Fatalf("next read: leader %v commit %d, %d entries; want the leader's 10", b.Leader, b.Commit, len(b.Entries))
	}
	// No leader known: any node serves, and its answer is not a leader's.
	lead.leader.Store(0)
	follower.leader.Store(0)
	if b, err = c.Entries(ctx, 0, 11, 1<<20, 0); err != nil || b.Leader {
		t.Fatalf("without a leader: leader %v, %v", b.Leader, err)
	}
}
