package link

import (
	"context"
	"net"
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
	// members are the voters' base addresses it lists.
	members atomic.Value // []string
}

func (l *leaderSource) Leader() (uint64, uint64, string, []string) {
	a, _ := l.addr.Load().(string)
	m, _ := l.members.Load().([]string)
	return l.self, l.leader.Load(), a, m
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

// A source that added a node is followed on it once every node the
// standby was started with is gone: the client learns the members an
// answer lists (and Info's), besides the addresses it was given.
func TestClientLearnsTheSourcesNewNodes(t *testing.T) {
	old := &leaderSource{fakeSource: &fakeSource{first: 1}, self: 1}
	added := &leaderSource{fakeSource: &fakeSource{first: 1}, self: 4}
	for i := 0; i < 5; i++ {
		old.appendCmd(1_700_000_000_000+int64(i), "k")
		added.appendCmd(1_700_000_000_000+int64(i), "k")
	}
	os := httptest.NewServer(NewServer(old))
	as := httptest.NewServer(NewServer(added))
	t.Cleanup(as.Close)
	oldAddr, addedAddr := strings.TrimPrefix(os.URL, "http://"), strings.TrimPrefix(as.URL, "http://")
	for _, s := range []*leaderSource{old, added} {
		s.leader.Store(1)
		s.addr.Store(oldAddr)
		s.members.Store([]string{oldAddr, addedAddr})
	}
	c := NewClient([]string{oldAddr}, "tok", nil)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if b, err := c.Entries(ctx, 0, 1, 1<<20, 0); err != nil || !b.Leader || len(b.Entries) != 5 {
		t.Fatalf("from the node it was given: %+v %v", b, err)
	}
	// The node it was started with goes; the one the source added leads.
	os.Close()
	added.leader.Store(4)
	added.addr.Store(addedAddr)
	b, err := c.Entries(ctx, 0, 6, 1<<20, 0)
	if err != nil || !b.Leader || b.Commit != 5 {
		t.Fatalf("after the node it was given went: %+v %v", b, err)
	}
	// A bad address is never learnt.
	c.mu.Lock()
	_, ok := c.learn("no-port")
	n := len(c.addrs)
	c.mu.Unlock()
	if ok || n != 2 {
		t.Fatalf("addresses after a bad one: %d (learnt: %v)", n, ok)
	}
}

// A source leader the standby cannot reach (cut from it, while the
// source's followers still name it) is tried once, then left for the
// followers until a while has passed: before, every read tried it first
// and waited out the connect timeout (2 s against a silent address)
// before falling back. Here the unreachable leader accepts and drops
// each connection, so the test counts how often it was tried.
func TestClientSkipsAnUnreachableLeaderForAWhile(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var tries atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tries.Add(1)
			c.Close()
		}
	}()
	follower := &leaderSource{fakeSource: &fakeSource{first: 1}, self: 1}
	for i := 0; i < 5; i++ {
		follower.appendCmd(1_700_000_000_000+int64(i), "k")
	}
	follower.leader.Store(2)
	follower.addr.Store(ln.Addr().String())
	fs := httptest.NewServer(NewServer(follower))
	t.Cleanup(fs.Close)
	c := NewClient([]string{strings.TrimPrefix(fs.URL, "http://")}, "tok", nil)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 6; i++ {
		if _, err := c.Entries(ctx, 0, 1, 1<<20, 0); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	// The first read learns the leader from the follower, the second
	// tries it and falls back; the next four go to the follower.
	if n := tries.Load(); n != 1 {
		t.Fatalf("the unreachable leader was tried %d times in 6 reads, want once", n)
	}
}
