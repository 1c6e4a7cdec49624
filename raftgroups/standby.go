package raftgroups

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/queen-mq/queen/wire"
)

// A standby cluster (QUEEN_STANDBY_OF; docs/standby.md). Each of its raft
// groups follows the source's group of the same number: the group's leader
// reads the source's committed entries over the link (raftgroups/link)
// and proposes them into its own log as LinkApply commands, which every
// replica applies as the source did (storage/link_apply.go). The group is
// read-only meanwhile: the proposer refuses every other kind with
// ErrStandby, and the background loops that would write (ticks, timers,
// transaction resolution, relocation) hold off, their effects arriving
// in the source's entries instead. Promotion (LinkPromote) ends it.

// linkBatch is one answer of the source's entries route.
type linkBatch struct {
	Entries []linkEntry
	Commit  uint64 // the source's commit index as the answering node knows it
	First   uint64 // the first index the source still holds
	// NotLeader: a node other than the source group's leader answered
	// (none known, or the leader unreachable); its commit trails what
	// the source acknowledged, by an unknown amount.
	NotLeader bool
}

// linkEntry is one committed source entry.
type linkEntry struct {
	Index   uint64
	StampMs uint64
	Skip    bool
	Payload []byte
}

// linkSource is what the follower reads from the source: the link client
// (raftgroups/link), or a test's fake.
type linkSource interface {
	// Groups is the source's raft group count.
	Groups(ctx context.Context) (int, error)
	// Entries is group's committed entries from index from on, at most
	// about maxBytes (at least one), waiting up to wait when there is
	// none yet. errLinkCompacted when from is no longer held.
	Entries(ctx context.Context, group int, from uint64, maxBytes int, wait time.Duration) (linkBatch, error)
}

// errLinkCompacted: the source no longer holds the entries the group needs
// next; only a snapshot of the source's group can bring it on.
var errLinkCompacted = errors.New("raftgroups: the source compacted the entries the standby needs next")

const (
	// linkProposalBytes bounds one LinkApply: large enough that a busy
	// source's entries go in few proposals, small enough that one never
	// holds the standby's log up (a single source entry larger than it
	// goes alone).
	linkProposalBytes = 2 << 20
	// linkWait is how long one read of the source waits for new entries.
	linkWait = 2 * time.Second
	// linkIdle is how often a replica that does not lead its group looks
	// again whether it does, and reads the source's commit for its lag.
	linkIdle = 500 * time.Millisecond
	// linkBackoffMax caps the wait after failed reads or proposals.
	linkBackoffMax = 5 * time.Second
)

// standby is a standby node's follow state.
type standby struct {
	source string // QUEEN_STANDBY_OF as given, for /health and logs
	src    linkSource
	// install brings a group on from a source snapshot when the source
	// compacted what it needs next (installLinkSnapshot); nil only with a
	// test's in-memory source, which serves no snapshots.
	install func(ctx context.Context, g *group) error
	groups  []followState
}

// followState is one group's follow progress as this node sees it.
type followState struct {
	commit atomic.Uint64 // the source's commit index last read
	// pendingMs is the stamp of the oldest source entry read and not yet
	// applied (0: none), what lagMs is measured from.
	pendingMs atomic.Uint64
	// activeMs is when the last read that brought entries was answered
	// (0: the last read brought none). While the source is busy, what it
	// committed since then is unknown here: lagMs is at least its age.
	activeMs atomic.Int64
	// notLeader is set while the last answer came from a node other than
	// the source group's leader; leaderMs is when a leader last answered
	// (the follower's start before any did). Then lagMs is at least the
	// age of leaderMs: what the leader acknowledged since is unknown.
	notLeader atomic.Bool
	leaderMs  atomic.Int64
}

// answered records who answered a read of the source.
func (st *followState) answered(b linkBatch, nowMs int64) {
	st.notLeader.Store(b.NotLeader)
	if !b.NotLeader {
		st.leaderMs.Store(nowMs)
	}
}

// StandbyOf parses QUEEN_STANDBY_OF: comma-separated raft base addresses
// of the source's nodes.
func StandbyOf(v string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(v, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, err := addrWithOffset(a, 0); err != nil {
			return nil, fmt.Errorf("QUEEN_STANDBY_OF: %q: %w", a, err)
		}
		out = append(out, a)
	}
	if len(out) == 0 && strings.TrimSpace(v) != "" {
		return nil, errors.New("QUEEN_STANDBY_OF: no address")
	}
	return out, nil
}

// following reports whether group g takes only the link's commands: it
// follows a source, or this node is a standby whose group was not
// promoted yet (a group that has applied nothing from its source yet is
// no more writable than one that has).
func (h *Host) following(g *group) bool {
	l := g.store.Link()
	return l.Linked || (h.standby != nil && !l.Promoted)
}

// Following reports whether any group of this node still follows a
// source: the node is a standby and takes no writes.
func (h *Host) Following() bool {
	for _, g := range h.groups {
		if h.following(g) {
			return true
		}
	}
	return false
}

// linkKind says whether a command may be proposed into a group that
// follows a source: the link's own commands, the format raise, which
// gates them (the standby's own format; the source's entries apply at the
// source's, storage/link_apply.go), and the registrations of the
// standby's own nodes (Kafka's advertised addresses, the members' HTTP
// addresses), which the source's entries leave alone (storage.sourceOnly)
// so a standby's Metadata names its own brokers.
func linkKind(k wire.Kind) bool {
	switch k {
	case wire.KindLinkApply, wire.KindLinkPromote, wire.KindLinkSnapshotChunk, wire.KindLinkSnapshotDone, wire.KindSetFormat,
		wire.KindKafkaRegisterNode, wire.KindRegisterMember:
		return true
	}
	return false
}

// refusesFollowing is the proposer's check (proposer.enqueue): a command
// other than the link's into a group that follows is refused.
func (h *Host) refusesFollowing(g *group) func([]wire.Command) bool {
	return func(cmds []wire.Command) bool {
		if !h.following(g) {
			return false
		}
		for _, c := range cmds {
			if !linkKind(c.Kind) {
				return true
			}
		}
		return false
	}
}

// startStandby starts each group's follower, owned by the host.
func (h *Host) startStandby() {
	if h.standby == nil {
		return
	}
	h.log.Info("raft: standby of "+h.standby.source+": following every raft group of it; writes are refused until promoted",
		"groups", len(h.groups))
	for _, g := range h.groups {
		h.wg.Add(1)
		go h.follow(g)
	}
}

// follow is group g's follower loop: while this node leads g and g is not
// promoted, read the source from the index after the last one applied and
// propose what comes as LinkApply; otherwise read the source's commit now
// and then, for the lag this node reports.
func (h *Host) follow(g *group) {
	defer h.wg.Done()
	st := &h.standby.groups[g.n]
	backoff := time.Duration(0)
	for {
		if backoff > 0 {
			if !h.sleep(backoff) {
				return
			}
		}
		select {
		case <-h.stop:
			return
		default:
		}
		l := g.store.Link()
		if l.Promoted {
			st.pendingMs.Store(0)
			return
		}
		if !h.leads(g) || g.store.ActiveFormat() < wire.FormatV7 {
			// A replica that does not lead still knows how far behind it
			// is: its own applied index against the source's commit.
			h.readCommit(g, st)
			backoff = linkIdle
			continue
		}
		err := h.followOnce(g, st, l.Applied+1)
		switch {
		case err == nil:
			backoff = 0
		case errors.Is(err, errLinkCompacted):
			err = h.installSnapshot(g)
			if err != nil && h.stopped.Err() != nil {
				return // shutting down mid-install: the next boot starts it over
			}
			if err != nil {
				h.log.Warn("raft: standby: the source compacted the entries this group needs next and its snapshot could not be installed",
					"group", g.n, "err", err)
				backoff = nextBackoff(backoff)
			}
		case errors.Is(err, ErrClosed), h.stopped.Err() != nil:
			return
		default:
			h.log.Debug("raft: standby: following", "group", g.n, "err", err)
			backoff = nextBackoff(backoff)
		}
	}
}

func nextBackoff(d time.Duration) time.Duration {
	return min(max(2*d, 100*time.Millisecond), linkBackoffMax)
}

// sleep waits d or until the host stops; false when it stopped.
func (h *Host) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-h.stop:
		return false
	case <-t.C:
		return true
	}
}

// readCommit reads the source's commit index of g without proposing. A
// replica that led g before keeps no stale answer age from then.
func (h *Host) readCommit(g *group, st *followState) {
	st.activeMs.Store(0)
	ctx, cancel := context.WithTimeout(h.stopped, h.cfg.RequestTimeout)
	defer cancel()
	b, err := h.standby.src.Entries(ctx, g.n, g.store.Link().Applied+1, 1, 0)
	if err == nil {
		st.answered(b, h.clock.NowMs())
		st.commit.Store(max(st.commit.Load(), b.Commit))
		if len(b.Entries) > 0 && b.Entries[0].StampMs != 0 {
			st.pendingMs.Store(b.Entries[0].StampMs)
		} else if len(b.Entries) == 0 {
			st.pendingMs.Store(0)
		}
	}
}

// followOnce reads the source's entries of g from index from and proposes
// them, in runs of at most linkProposalBytes, each once the last applied.
func (h *Host) followOnce(g *group, st *followState, from uint64) error {
	ctx, cancel := context.WithTimeout(h.stopped, linkWait+h.cfg.RequestTimeout)
	defer cancel()
	b, err := h.standby.src.Entries(ctx, g.n, from, linkProposalBytes, linkWait)
	if err != nil {
		return err
	}
	st.answered(b, h.clock.NowMs())
	st.commit.Store(max(st.commit.Load(), b.Commit))
	if len(b.Entries) == 0 {
		st.pendingMs.Store(0)
		st.activeMs.Store(0)
		return nil
	}
	st.activeMs.Store(h.clock.NowMs())
	// The answering node's commit is at least what it sent.
	st.commit.Store(max(st.commit.Load(), b.Entries[len(b.Entries)-1].Index))
	for i := range b.Entries {
		if b.Entries[i].Index != from+uint64(i) {
			return fmt.Errorf("raftgroups: standby: the source answered index %d where %d was due", b.Entries[i].Index, from+uint64(i))
		}
	}
	if st.pendingMs.Load() == 0 {
		st.pendingMs.Store(firstStamp(b.Entries))
	}
	for len(b.Entries) > 0 {
		n, size := 0, 0
		for n < len(b.Entries) && (n == 0 || size+len(b.Entries[n].Payload) <= linkProposalBytes) {
			size += len(b.Entries[n].Payload) + 24
			n++
		}
		run := b.Entries[:n]
		b.Entries = b.Entries[n:]
		cmd := wire.LinkApplyCmd{Source: h.standby.source, FirstSourceIndex: run[0].Index, LastSourceIndex: run[n-1].Index,
			Entries: make([]wire.LinkEntry, n)}
		for i, e := range run {
			cmd.Entries[i] = wire.LinkEntry{StampMs: e.StampMs, Skip: e.Skip, Payload: e.Payload}
		}
		res, err := g.prop.submit(ctx, []wire.Command{{Kind: wire.KindLinkApply, Body: cmd.Encode(nil)}})
		if err != nil {
			return fmt.Errorf("raftgroups: standby: proposing source entries %d-%d: %w", cmd.FirstSourceIndex, cmd.LastSourceIndex, err)
		}
		r, err := wire.DecodeCountResult(res[0])
		if err != nil {
			return fmt.Errorf("raftgroups: standby: link apply result: %w", err)
		}
		if r.Code != wire.CodeOK {
			// Another leader's run got there first, or the group was
			// promoted: read again from what the group applied.
			return nil
		}
		st.pendingMs.Store(firstStamp(b.Entries))
	}
	return nil
}

// firstStamp is the stamp of the first entry that has one (0: none).
func firstStamp(es []linkEntry) uint64 {
	for _, e := range es {
		if e.StampMs != 0 {
			return e.StampMs
		}
	}
	return 0
}

// installSnapshot brings g on from a snapshot of the source's group.
func (h *Host) installSnapshot(g *group) error {
	if h.standby.install == nil {
		return errors.New("raftgroups: standby: this link source serves no snapshots, and the source no longer holds the entries needed next")
	}
	ctx, cancel := context.WithCancel(h.stopped)
	defer cancel()
	return h.standby.install(ctx, g)
}

// GroupLag is one group's standby lag as this node sees it.
type GroupLag struct {
	Group   int    `json:"group"`
	Entries uint64 `json:"lagEntries"`
	Ms      int64  `json:"lagMs"`
	Applied uint64 `json:"appliedSourceIndex"`
	Commit  uint64 `json:"sourceCommit"`
}

// StandbyStatus is /health's "standby" block.
type StandbyStatus struct {
	Following  bool       `json:"following"`
	Source     string     `json:"source"`
	LagEntries uint64     `json:"lagEntries"` // the most behind group's
	LagMs      int64      `json:"lagMs"`      // the most behind group's
	Groups     []GroupLag `json:"groups"`
}

// lag is group g's lag: entries the source committed that this replica
// has not applied, and how long ago the oldest of them was stamped (0
// when caught up and the source's last answer brought nothing new; while
// the source is busy, at least the age of its last answer, since what it
// committed after that is not known here). Each replica measures its own
// applied index against the source's commit its follower last read.
func (h *Host) lag(g *group) GroupLag {
	l := g.store.Link()
	out := GroupLag{Group: g.n, Applied: l.Applied}
	if h.standby == nil || l.Promoted {
		return out
	}
	st := &h.standby.groups[g.n]
	// A snapshot install may take the group past the commit last read.
	out.Commit = max(st.commit.Load(), l.Applied)
	if at := st.activeMs.Load(); at > 0 {
		out.Ms = max(h.clock.NowMs()-at, 0)
	}
	if st.notLeader.Load() {
		out.Ms = max(out.Ms, h.clock.NowMs()-st.leaderMs.Load())
	}
	if out.Commit > l.Applied {
		out.Entries = out.Commit - l.Applied
		stamp := st.pendingMs.Load()
		if stamp == 0 || stamp < l.StampMs {
			stamp = l.StampMs // at most this old: conservative
		}
		if stamp > 0 {
			out.Ms = max(out.Ms, h.clock.NowMs()-int64(stamp))
		}
	}
	return out
}

// Standby is the standby state for /health: nil on a node that never
// followed a source.
func (h *Host) Standby() *StandbyStatus {
	st := &StandbyStatus{}
	seen := h.standby != nil
	if h.standby != nil {
		st.Source = h.standby.source
	}
	for _, g := range h.groups {
		l := g.store.Link()
		seen = seen || l.Linked || l.Promoted
		if st.Source == "" {
			st.Source = l.Source
		}
		st.Following = st.Following || h.following(g)
		gl := h.lag(g)
		st.LagEntries = max(st.LagEntries, gl.Entries)
		st.LagMs = max(st.LagMs, gl.Ms)
		st.Groups = append(st.Groups, gl)
	}
	if !seen {
		return nil
	}
	return st
}

// registerStandbyMetrics publishes each group's lag.
func (h *Host) registerStandbyMetrics() {
	if h.standby == nil {
		return
	}
	for _, g := range h.groups {
		l := `{group="` + strconv.Itoa(g.n) + `"}`
		h.cfg.Metrics.GetOrCreateGauge("queen_standby_lag_entries"+l, func() float64 { return float64(h.lag(g).Entries) })
		h.cfg.Metrics.GetOrCreateGauge("queen_standby_lag_ms"+l, func() float64 { return float64(h.lag(g).Ms) })
	}
}

// initStandby sets up a standby node's follow state before anything can
// propose, and every group's refusal of writes while it follows (a group
// that was once linked refuses them even with QUEEN_STANDBY_OF unset:
// only promotion makes it writable).
func (h *Host) initStandby() error {
	if len(h.cfg.StandbyOf) > 0 || h.cfg.linkSource != nil {
		src := h.cfg.linkSource
		if src == nil {
			var err error
			if src, err = newLinkClientSource(h); err != nil {
				return err
			}
		}
		h.standby = &standby{source: strings.Join(h.cfg.StandbyOf, ","), src: src, groups: make([]followState, len(h.groups))}
		h.standby.install = h.linkInstaller(src)
		for i := range h.standby.groups {
			h.standby.groups[i].leaderMs.Store(h.clock.NowMs())
		}
	}
	for _, g := range h.groups {
		f := h.refusesFollowing(g)
		g.prop.refuses.Store(&f)
	}
	h.registerStandbyMetrics()
	return nil
}

// unlessFollowing is f, skipped while any group of this node follows a
// source: the background loops that write (ticks, timers, transaction
// resolution, relocation) would only be refused.
func (h *Host) unlessFollowing(f func()) func() {
	return func() {
		if !h.Following() {
			f()
		}
	}
}
