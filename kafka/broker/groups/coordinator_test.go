package groups

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	session   = 10 * time.Second
	rebalance = 30 * time.Second
	delay     = 3 * time.Second
)

type harness struct {
	t     *testing.T
	c     *Coordinator
	clock *fakeClock
	ids   int
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, clock: &fakeClock{}}
	h.c = New(Config{
		MinSessionTimeout: time.Second, MaxSessionTimeout: time.Minute,
		InitialRebalanceDelay: delay, Clock: h.clock,
		NewMemberID: func(clientID string) string { h.ids++; return fmt.Sprintf("%s-%d", clientID, h.ids) },
	})
	t.Cleanup(h.c.Close)
	return h
}

// meta is consumer-protocol metadata subscribing to topics.
func meta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

func joinReq(member string, protocols ...Protocol) JoinRequest {
	if len(protocols) == 0 {
		protocols = []Protocol{{Name: "range", Metadata: meta("t")}}
	}
	return JoinRequest{Group: "g", MemberID: member, ClientID: "c", ClientHost: "/127.0.0.1",
		ProtocolType: "consumer", Protocols: protocols, SessionTimeout: session, RebalanceTimeout: rebalance,
		RequireKnownMemberID: true}
}

// parked is a join or sync that may still be waiting for its answer.
type parked[R any] struct {
	res  R
	wait chan R
}

// answered returns the answer if there is one yet.
func (p parked[R]) answered() (R, bool) {
	if p.wait == nil {
		return p.res, true
	}
	select {
	case r := <-p.wait:
		return r, true
	default:
		var zero R
		return zero, false
	}
}

func (h *harness) join(r JoinRequest) parked[JoinResult] {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	res, wait := h.c.join(r)
	return parked[JoinResult]{res, wait}
}

func (h *harness) sync(member string, gen int32, assignments map[string][]byte) parked[SyncResult] {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	res, wait := h.c.sync(SyncRequest{Group: "g", MemberID: member, Generation: gen, Assignments: assignments})
	return parked[SyncResult]{res, wait}
}

func mustAnswer[R any](t *testing.T, p parked[R]) R {
	t.Helper()
	r, ok := p.answered()
	if !ok {
		t.Fatal("still waiting, want an answer")
	}
	return r
}

func mustWait[R any](t *testing.T, p parked[R]) {
	t.Helper()
	if r, ok := p.answered(); ok {
		t.Fatalf("answered %+v, want it still waiting", r)
	}
}

// newMember does the MEMBER_ID_REQUIRED round trip and returns the id and
// the parked second join.
func (h *harness) newMember(protocols ...Protocol) (string, parked[JoinResult]) {
	h.t.Helper()
	first := mustAnswer(h.t, h.join(joinReq("", protocols...)))
	if first.Err != kerr.MemberIDRequired || first.MemberID == "" {
		h.t.Fatalf("first join: %+v, want MEMBER_ID_REQUIRED with an id", first)
	}
	return first.MemberID, h.join(joinReq(first.MemberID, protocols...))
}

// stable builds a stable group of n members (the first is the leader) and
// returns their ids and the generation.
func (h *harness) stable(n int) ([]string, int32) {
	h.t.Helper()
	var ids []string
	var joins []parked[JoinResult]
	for range n {
		id, p := h.newMember()
		ids, joins = append(ids, id), append(joins, p)
	}
	// Members joining during the initial delay extend it once each window.
	h.clock.Advance(delay)
	if n > 1 {
		h.clock.Advance(delay)
	}
	var gen int32
	for i, p := range joins {
		r := mustAnswer(h.t, p)
		if r.Err != nil {
			h.t.Fatalf("join %d: %v", i, r.Err)
		}
		gen = r.Generation
	}
	h.syncAll(ids, gen)
	return ids, gen
}

// syncAll syncs every member, the leader (ids[0]) last, assigning each its
// own id as bytes, and checks every member gets its assignment.
func (h *harness) syncAll(ids []string, gen int32) {
	h.t.Helper()
	assign := map[string][]byte{}
	var syncs []parked[SyncResult]
	for _, id := range ids[1:] {
		assign[id] = []byte(id)
		p := h.sync(id, gen, nil)
		mustWait(h.t, p)
		syncs = append(syncs, p)
	}
	assign[ids[0]] = []byte(ids[0])
	syncs = append([]parked[SyncResult]{h.sync(ids[0], gen, assign)}, syncs...)
	for i, p := range syncs {
		r := mustAnswer(h.t, p)
		if r.Err != nil || string(r.Assignment) != ids[i] {
			h.t.Fatalf("sync of %s: %+v", ids[i], r)
		}
	}
	if d, _ := h.c.Describe("g"); d.State != Stable {
		h.t.Fatalf("state %v after sync, want Stable", d.State)
	}
}

// rejoin sends a join for every member and returns the answers, which
// must all be there once the last member has joined.
func (h *harness) rejoin(ids ...string) []JoinResult {
	h.t.Helper()
	var ps []parked[JoinResult]
	for _, id := range ids {
		ps = append(ps, h.join(joinReq(id)))
	}
	out := make([]JoinResult, len(ps))
	for i, p := range ps {
		if out[i] = mustAnswer(h.t, p); out[i].Err != nil {
			h.t.Fatalf("rejoin of %s: %v", ids[i], out[i].Err)
		}
	}
	return out
}

func TestMemberIDRequiredJoinSyncHeartbeat(t *testing.T) {
	h := newHarness(t)
	id, p := h.newMember()
	mustWait(t, p) // the initial delay holds the first rebalance
	h.clock.Advance(delay - time.Millisecond)
	mustWait(t, p)
	h.clock.Advance(time.Millisecond)
	r := mustAnswer(t, p)
	if r.Err != nil || r.Generation != 1 || r.LeaderID != id || r.MemberID != id || r.Protocol != "range" ||
		len(r.Members) != 1 || r.Members[0].MemberID != id {
		t.Fatalf("join: %+v", r)
	}
	if err := h.c.Heartbeat("g", id, "", 1); err != nil {
		t.Fatalf("heartbeat between join and sync: %v", err)
	}
	s := mustAnswer(t, h.sync(id, 1, map[string][]byte{id: []byte("a")}))
	if s.Err != nil || string(s.Assignment) != "a" || s.Protocol != "range" || s.ProtocolType != "consumer" {
		t.Fatalf("sync: %+v", s)
	}
	if err := h.c.Heartbeat("g", id, "", 1); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	d, ok := h.c.Describe("g")
	if !ok || d.State != Stable || d.Protocol != "range" || len(d.Members) != 1 || string(d.Members[0].Assignment) != "a" {
		t.Fatalf("describe: %+v", d)
	}
}

func TestJoinValidation(t *testing.T) {
	h := newHarness(t)
	r := joinReq("")
	r.SessionTimeout = 500 * time.Millisecond
	if res := mustAnswer(t, h.join(r)); res.Err != kerr.InvalidSessionTimeout {
		t.Fatalf("short session: %v", res.Err)
	}
	r = joinReq("")
	r.Group = ""
	if res := mustAnswer(t, h.join(r)); res.Err != kerr.InvalidGroupID {
		t.Fatalf("empty group: %v", res.Err)
	}
	if res := mustAnswer(t, h.join(joinReq("nobody"))); res.Err != kerr.UnknownMemberID {
		t.Fatalf("unknown member: %v", res.Err)
	}
	h.stable(1)
	other := joinReq("", Protocol{Name: "roundrobin", Metadata: meta("t")})
	if res := mustAnswer(t, h.join(other)); res.Err != kerr.InconsistentGroupProtocol {
		t.Fatalf("disjoint protocols: %v", res.Err)
	}
	other = joinReq("")
	other.ProtocolType = "connect"
	if res := mustAnswer(t, h.join(other)); res.Err != kerr.InconsistentGroupProtocol {
		t.Fatalf("other protocol type: %v", res.Err)
	}
}

func TestJoinWithoutMemberIDRequirement(t *testing.T) {
	h := newHarness(t)
	r := joinReq("")
	r.RequireKnownMemberID = false // JoinGroup v0-3
	p := h.join(r)
	h.clock.Advance(delay)
	res := mustAnswer(t, p)
	if res.Err != nil || res.MemberID == "" || res.LeaderID != res.MemberID || res.Generation != 1 {
		t.Fatalf("v3 join: %+v", res)
	}
	r.SessionTimeout = 2 * time.Minute
	if res := mustAnswer(t, h.join(r)); res.Err != kerr.InvalidSessionTimeout {
		t.Fatalf("session above the maximum: %v", res.Err)
	}
}

func TestInitialDelayWaitsForMoreMembers(t *testing.T) {
	h := newHarness(t)
	a, pa := h.newMember()
	h.clock.Advance(2 * time.Second)
	b, pb := h.newMember()
	h.clock.Advance(time.Second) // first delay over, but b arrived during it
	mustWait(t, pa)
	h.clock.Advance(delay)
	ra, rb := mustAnswer(t, pa), mustAnswer(t, pb)
	if ra.LeaderID != a || rb.LeaderID != a || len(ra.Members) != 2 || len(rb.Members) != 0 || ra.Generation != 1 {
		t.Fatalf("a: %+v\nb: %+v", ra, rb)
	}
	if rb.MemberID != b {
		t.Fatalf("b's id %q, want %q", rb.MemberID, b)
	}
}

func TestNewMemberRebalancesStableGroup(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stable(2)
	c, pc := h.newMember()
	mustWait(t, pc)
	for _, id := range ids {
		if err := h.c.Heartbeat("g", id, "", gen); err != kerr.RebalanceInProgress {
			t.Fatalf("heartbeat of %s during rebalance: %v", id, err)
		}
	}
	if s := mustAnswer(t, h.sync(ids[1], gen, nil)); s.Err != kerr.RebalanceInProgress {
		t.Fatalf("sync during rebalance: %+v", s)
	}
	if err := h.c.ValidateCommit("g", ids[0], "", gen); err != nil {
		t.Fatalf("commit of the old generation while preparing: %v", err)
	}
	pa := h.join(joinReq(ids[0]))
	mustWait(t, pa)
	pb := h.join(joinReq(ids[1])) // the last member rejoins: no delay for a non-empty group
	ra, rb, rc := mustAnswer(t, pa), mustAnswer(t, pb), mustAnswer(t, pc)
	if ra.Generation != gen+1 || rb.Generation != gen+1 || rc.Generation != gen+1 || len(ra.Members) != 3 || rc.LeaderID != ids[0] {
		t.Fatalf("a: %+v\nb: %+v\nc: %+v", ra, rb, rc)
	}
	if err := h.c.Heartbeat("g", ids[0], "", gen); err != kerr.IllegalGeneration {
		t.Fatalf("heartbeat of the old generation: %v", err)
	}
	if err := h.c.ValidateCommit("g", ids[0], "", gen+1); err != kerr.RebalanceInProgress {
		t.Fatalf("commit between join and sync: %v", err)
	}
	h.syncAll([]string{ids[0], ids[1], c}, gen+1)
}

func TestGenerationAndMemberChecks(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stable(1)
	cases := []struct {
		name   string
		member string
		gen    int32
		want   *kerr.Error
	}{
		{"heartbeat ok", ids[0], gen, nil},
		{"stale generation", ids[0], gen - 1, kerr.IllegalGeneration},
		// A generation an earlier coordinator formed and never recorded:
		// the member rejoins quietly (a rolling restart surfaced
		// UNKNOWN_MEMBER_ID to a franz-go consumer here).
		{"future generation", ids[0], gen + 1, kerr.RebalanceInProgress},
		{"unknown member of a future generation", "x", gen + 1, kerr.RebalanceInProgress},
		{"unknown member", "x", gen, kerr.UnknownMemberID},
	}
	for _, tc := range cases {
		if err := h.c.Heartbeat("g", tc.member, "", tc.gen); err != tc.want {
			t.Errorf("heartbeat %s: %v, want %v", tc.name, err, tc.want)
		}
		if err := h.c.ValidateCommit("g", tc.member, "", tc.gen); err != tc.want {
			t.Errorf("commit %s: %v, want %v", tc.name, err, tc.want)
		}
		if s := mustAnswer(t, h.sync(tc.member, tc.gen, nil)); s.Err != tc.want {
			t.Errorf("sync %s: %v, want %v", tc.name, s.Err, tc.want)
		}
	}
	if err := h.c.Heartbeat("other", ids[0], "", gen); err != kerr.RebalanceInProgress {
		t.Errorf("heartbeat of a generation to a group not in memory: %v", err)
	}
	if err := h.c.Heartbeat("other", ids[0], "", 0); err != kerr.UnknownMemberID {
		t.Errorf("heartbeat to an unknown group: %v", err)
	}
	if s := mustAnswer(t, h.sync("x", 4, nil)); s.Err != kerr.RebalanceInProgress {
		t.Errorf("sync of a generation this coordinator never saw: %v", s.Err)
	}
	// Admin commits (no member, generation -1) need an empty group.
	if err := h.c.ValidateCommit("g", "", "", -1); err != kerr.UnknownMemberID {
		t.Errorf("admin commit to a live group: %v", err)
	}
	if err := h.c.ValidateCommit("other", "", "", -1); err != nil {
		t.Errorf("admin commit to a group not in memory: %v", err)
	}
	if err := h.c.ValidateCommit("other", "m", "", 3); err != kerr.RebalanceInProgress {
		t.Errorf("member commit to a group not in memory: %v", err)
	}
	h.c.Leave("g", byID(ids...))
	if err := h.c.ValidateCommit("g", "", "", -1); err != nil {
		t.Errorf("admin commit to an empty group: %v", err)
	}
}

func TestSessionTimeoutEvictsDeadMember(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stable(2)
	// Only the first member heartbeats, every 4 s, for 12 s: the second
	// one's 10 s session runs out.
	for range 3 {
		h.clock.Advance(4 * time.Second)
		err := h.c.Heartbeat("g", ids[0], "", gen)
		if err == kerr.RebalanceInProgress {
			break
		}
		if err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
	}
	if err := h.c.Heartbeat("g", ids[0], "", gen); err != kerr.RebalanceInProgress {
		t.Fatalf("survivor's heartbeat after the eviction: %v", err)
	}
	if err := h.c.Heartbeat("g", ids[1], "", gen); err != kerr.UnknownMemberID {
		t.Fatalf("dead member's heartbeat: %v", err)
	}
	r := mustAnswer(t, h.join(joinReq(ids[0])))
	if r.Generation != gen+1 || len(r.Members) != 1 || r.LeaderID != ids[0] {
		t.Fatalf("rejoin: %+v", r)
	}
}

func TestRebalanceTimeoutDropsMembersThatDoNotRejoin(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stable(2)
	pb := h.join(joinReq(ids[1], Protocol{Name: "range", Metadata: meta("t", "u")})) // new subscription
	mustWait(t, pb)
	// The leader keeps heartbeating (so its session lives) but never
	// rejoins: the rebalance timeout drops it and b leads.
	for i := 0; i < int(rebalance/(4*time.Second)); i++ {
		h.clock.Advance(4 * time.Second)
		_ = h.c.Heartbeat("g", ids[0], "", gen)
	}
	h.clock.Advance(rebalance % (4 * time.Second))
	r := mustAnswer(t, pb)
	if r.Err != nil || r.Generation != gen+1 || r.LeaderID != ids[1] || len(r.Members) != 1 {
		t.Fatalf("join after the rebalance timeout: %+v", r)
	}
	if err := h.c.Heartbeat("g", ids[0], "", gen); err != kerr.UnknownMemberID {
		t.Fatalf("dropped member's heartbeat: %v", err)
	}
}

func TestParkedSyncKeepsMemberAlive(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stable(2)
	h.rejoin(ids...)
	h.clock.Advance(time.Second)
	sb := h.sync(ids[1], gen+1, nil) // b's session now ends 11 s after the join
	h.clock.Advance(7 * time.Second)
	if err := h.c.Heartbeat("g", ids[0], "", gen+1); err != nil {
		t.Fatalf("leader's heartbeat before its sync: %v", err)
	}
	// b stays parked past its session end and is still a member.
	h.clock.Advance(4 * time.Second)
	mustWait(t, sb)
	// The leader never syncs and goes silent: its session ends and b's
	// parked sync is told to rejoin.
	h.clock.Advance(6 * time.Second)
	if s := mustAnswer(t, sb); s.Err != kerr.RebalanceInProgress {
		t.Fatalf("parked sync when the leader died: %+v", s)
	}
	r := mustAnswer(t, h.join(joinReq(ids[1])))
	if r.Err != nil || r.LeaderID != ids[1] || len(r.Members) != 1 {
		t.Fatalf("b's rejoin: %+v", r)
	}
}

func TestLeaderThatNeverSyncsIsDropped(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stable(2)
	h.rejoin(ids...)
	h.clock.Advance(time.Second)
	sb := h.sync(ids[1], gen+1, nil)
	// The leader heartbeats (so its session lives) but never syncs: at the
	// rebalance timeout, 30 s after the join, it is dropped and b is told
	// to rejoin.
	for range 7 {
		h.clock.Advance(4 * time.Second)
		mustWait(t, sb)
		if err := h.c.Heartbeat("g", ids[0], "", gen+1); err != nil {
			t.Fatalf("leader's heartbeat: %v", err)
		}
	}
	h.clock.Advance(time.Second)
	if s := mustAnswer(t, sb); s.Err != kerr.RebalanceInProgress {
		t.Fatalf("b's parked sync: %+v", s)
	}
	if err := h.c.Heartbeat("g", ids[0], "", gen+1); err != kerr.UnknownMemberID {
		t.Fatalf("dropped leader's heartbeat: %v", err)
	}
	r := h.rejoin(ids[1])
	if r[0].LeaderID != ids[1] || len(r[0].Members) != 1 {
		t.Fatalf("b's rejoin: %+v", r[0])
	}
}

func TestLeaveRebalancesAndMovesLeadership(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stable(3)
	codes := h.c.Leave("g", byID(ids[0], "nobody"))
	if codes[0] != nil || codes[1] != kerr.UnknownMemberID {
		t.Fatalf("leave codes: %v", codes)
	}
	pb := h.join(joinReq(ids[1]))
	pc := h.join(joinReq(ids[2]))
	rb, rc := mustAnswer(t, pb), mustAnswer(t, pc)
	if rb.LeaderID != ids[1] || rb.Generation != gen+1 || len(rb.Members) != 2 || rc.LeaderID != ids[1] {
		t.Fatalf("b: %+v\nc: %+v", rb, rc)
	}
	h.syncAll(ids[1:], gen+1)
	h.c.Leave("g", byID(ids[1:]...))
	d, ok := h.c.Describe("g")
	if !ok || d.State != Empty || len(d.Members) != 0 {
		t.Fatalf("after everyone left: %+v", d)
	}
}

func TestRejoinDuringSyncRestartsRebalance(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stable(2)
	h.rejoin(ids...)
	sb := h.sync(ids[1], gen+1, nil) // b waits for the leader's assignment
	mustWait(t, sb)
	_, pc := h.newMember() // a newcomer before the leader syncs
	if s := mustAnswer(t, sb); s.Err != kerr.RebalanceInProgress {
		t.Fatalf("parked sync when the rebalance restarted: %+v", s)
	}
	mustWait(t, pc)
}

func TestCooperativeRounds(t *testing.T) {
	h := newHarness(t)
	coop := func(owned ...int32) Protocol {
		m := kmsg.NewConsumerMemberMetadata()
		m.Version = 1
		m.Topics = []string{"t"}
		if len(owned) > 0 {
			op := kmsg.NewConsumerMemberMetadataOwnedPartition()
			op.Topic, op.Partitions = "t", owned
			m.OwnedPartitions = append(m.OwnedPartitions, op)
		}
		return Protocol{Name: "cooperative-sticky", Metadata: m.AppendTo(nil)}
	}
	a, pa := h.newMember(coop())
	h.clock.Advance(delay)
	ra := mustAnswer(t, pa)
	mustAnswer(t, h.sync(a, ra.Generation, map[string][]byte{a: []byte("all")}))
	// Round 1: b arrives; a rejoins owning everything.
	b, pb := h.newMember(coop())
	pa = h.join(joinReq(a, coop(0, 1, 2, 3)))
	r1a, r1b := mustAnswer(t, pa), mustAnswer(t, pb)
	if r1a.Protocol != "cooperative-sticky" || len(r1a.Members) != 2 || r1b.Generation != r1a.Generation {
		t.Fatalf("round 1: %+v / %+v", r1a, r1b)
	}
	h.syncAll([]string{a, b}, r1a.Generation)
	// Round 2: a revoked partitions and rejoins with fewer owned: its
	// metadata changed, so the stable group rebalances again.
	pa = h.join(joinReq(a, coop(0, 1)))
	mustWait(t, pa)
	if err := h.c.Heartbeat("g", b, "", r1a.Generation); err != kerr.RebalanceInProgress {
		t.Fatalf("b's heartbeat in round 2: %v", err)
	}
	pb = h.join(joinReq(b, coop()))
	r2a := mustAnswer(t, pa)
	mustAnswer(t, pb)
	if r2a.Generation != r1a.Generation+1 {
		t.Fatalf("round 2 generation %d, want %d", r2a.Generation, r1a.Generation+1)
	}
	h.syncAll([]string{a, b}, r2a.Generation)
	// A follower rejoining with the same metadata changes nothing.
	same := mustAnswer(t, h.join(joinReq(b, coop())))
	if same.Generation != r2a.Generation || same.Err != nil {
		t.Fatalf("unchanged follower rejoin: %+v", same)
	}
}

func TestProtocolSelectionByVote(t *testing.T) {
	h := newHarness(t)
	rr := Protocol{Name: "roundrobin", Metadata: meta("t")}
	rg := Protocol{Name: "range", Metadata: meta("t")}
	_, pa := h.newMember(rg, rr)
	_, pb := h.newMember(rr, rg)
	_, pc := h.newMember(rr)
	h.clock.Advance(2 * delay)
	for _, p := range []parked[JoinResult]{pa, pb, pc} {
		if r := mustAnswer(t, p); r.Protocol != "roundrobin" {
			t.Fatalf("protocol %q, want roundrobin", r.Protocol)
		}
	}
}

func TestPendingMemberExpiresAndIdleGroupIsDropped(t *testing.T) {
	h := newHarness(t)
	first := mustAnswer(t, h.join(joinReq("")))
	h.clock.Advance(session)
	if r := mustAnswer(t, h.join(joinReq(first.MemberID))); r.Err != kerr.UnknownMemberID {
		t.Fatalf("join with an expired member id: %+v", r)
	}
	ids, _ := h.stable(1)
	h.c.Leave("g", byID(ids...))
	h.clock.Advance(DefaultIdleTimeout - time.Second)
	if _, ok := h.c.Describe("g"); !ok {
		t.Fatal("empty group dropped before its idle timeout")
	}
	h.clock.Advance(time.Second)
	if _, ok := h.c.Describe("g"); ok {
		t.Fatal("empty group still in memory after its idle timeout")
	}
}

func TestDeleteAndSubscriptions(t *testing.T) {
	h := newHarness(t)
	ids, _ := h.stable(1)
	if err := h.c.Delete("g"); err != kerr.NonEmptyGroup {
		t.Fatalf("delete of a live group: %v", err)
	}
	topics, in, err := h.c.Subscriptions("g")
	if err != nil || !in || !topics["t"] || len(topics) != 1 {
		t.Fatalf("subscriptions: %v %v %v", topics, in, err)
	}
	h.c.Leave("g", byID(ids...))
	if topics, _, _ := h.c.Subscriptions("g"); len(topics) != 0 {
		t.Fatalf("an empty group subscribes to %v", topics)
	}
	if err := h.c.Delete("g"); err != nil {
		t.Fatalf("delete of an empty group: %v", err)
	}
	if l := h.c.List(); len(l) != 0 {
		t.Fatalf("groups after delete: %+v", l)
	}
}

func TestCloseAnswersParkedRequests(t *testing.T) {
	h := newHarness(t)
	_, p := h.newMember()
	h.c.Close()
	if r := mustAnswer(t, p); r.Err != kerr.NotCoordinator {
		t.Fatalf("parked join after Close: %+v", r)
	}
	if r := mustAnswer(t, h.join(joinReq(""))); r.Err != kerr.NotCoordinator {
		t.Fatalf("join after Close: %+v", r)
	}
	h.clock.Advance(time.Hour) // no timer may act after Close
}

func TestBlockingJoinAndSync(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := h.c.Join(ctx, joinReq(""))
	if err != nil || first.Err != kerr.MemberIDRequired {
		t.Fatalf("first join: %+v %v", first, err)
	}
	done := make(chan JoinResult, 1)
	go func() {
		r, _ := h.c.Join(ctx, joinReq(first.MemberID))
		done <- r
	}()
	// Wait (bounded) for the goroutine's join to be parked, then let the
	// initial delay run out.
	for parkedJoin := false; !parkedJoin; {
		if ctx.Err() != nil {
			t.Fatal("join never parked")
		}
		h.c.mu.Lock()
		m := h.c.groups["g"].members[first.MemberID]
		parkedJoin = m != nil && m.joinWait != nil
		h.c.mu.Unlock()
	}
	h.clock.Advance(delay)
	var r JoinResult
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("join never answered")
	}
	if r.Err != nil || r.Generation != 1 {
		t.Fatalf("join: %+v", r)
	}
	s, err := h.c.Sync(ctx, SyncRequest{Group: "g", MemberID: r.MemberID, Generation: 1, Assignments: map[string][]byte{r.MemberID: {1}}})
	if err != nil || !slices.Equal(s.Assignment, []byte{1}) {
		t.Fatalf("sync: %+v %v", s, err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	h.c.Leave("g", byID(r.MemberID))
	first, _ = h.c.Join(ctx, joinReq(""))
	if _, err := h.c.Join(cctx, joinReq(first.MemberID)); err == nil {
		t.Fatal("a join whose context ended returned no error")
	}
}

// A group that existed before this coordinator (it has committed offsets)
// waits twice the initial delay on its first rebalance here, so members
// coming back one by one after a coordinator move land in one generation;
// a new group waits the usual delay, and so does a known group's later
// rebalance.
func TestKnownGroupFirstRebalanceWaitsLonger(t *testing.T) {
	h := newHarness(t)
	h.c.cfg.Known = func(group string) bool { return group == "g" }
	a, pa := h.newMember()
	h.clock.Advance(delay + time.Second) // past the usual delay, no one else came
	mustWait(t, pa)
	b, pb := h.newMember() // the slower member finds the new coordinator
	h.clock.Advance(delay - time.Second)
	mustWait(t, pa) // b arrived during the doubled delay: it is extended once more
	h.clock.Advance(delay)
	ra, rb := mustAnswer(t, pa), mustAnswer(t, pb)
	if ra.LeaderID != a || len(ra.Members) != 2 || rb.MemberID != b || ra.Generation != 1 {
		t.Fatalf("a: %+v\nb: %+v", ra, rb)
	}

	u := newHarness(t)
	u.c.cfg.Known = func(string) bool { return false }
	_, pu := u.newMember()
	u.clock.Advance(delay)
	if r := mustAnswer(t, pu); r.Err != nil || r.Generation != 1 {
		t.Fatalf("a new group waits the usual delay: %+v", r)
	}
}

// byID names members leaving by member id alone.
func byID(ids ...string) []Leaving {
	out := make([]Leaving, len(ids))
	for i, id := range ids {
		out[i] = Leaving{MemberID: id}
	}
	return out
}
