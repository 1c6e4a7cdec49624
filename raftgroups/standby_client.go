package raftgroups

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/queen-mq/queen/crypto/nodetls"
	"github.com/queen-mq/queen/raftgroups/link"
)

// clientSource is the link client as the follower's source.
type clientSource struct{ c *link.Client }

// newLinkClientSource is the source QUEEN_STANDBY_OF names, read with
// QUEEN_LINK_TOKEN, over TLS when this node has node TLS on.
func newLinkClientSource(h *Host) (linkSource, error) {
	if h.cfg.LinkToken == "" {
		return nil, errors.New("raftgroups: QUEEN_STANDBY_OF needs QUEEN_LINK_TOKEN, the token the source accepts for its link")
	}
	return clientSource{link.NewClient(h.cfg.StandbyOf, h.cfg.LinkToken, h.cfg.TLS)}, nil
}

func (s clientSource) Groups(ctx context.Context) (int, error) {
	info, err := s.c.Info(ctx, 0)
	if err != nil {
		return 0, err
	}
	return info.Groups, nil
}

func (s clientSource) Entries(ctx context.Context, group int, from uint64, maxBytes int, wait time.Duration) (linkBatch, error) {
	b, err := s.c.Entries(ctx, group, from, maxBytes, wait)
	out := linkBatch{Commit: b.Commit, First: b.First, NotLeader: !b.Leader, Entries: make([]linkEntry, len(b.Entries))}
	for i, e := range b.Entries {
		out.Entries[i] = linkEntry{Index: e.Index, StampMs: e.StampMs, Skip: e.Skip, Payload: e.Payload}
	}
	if errors.Is(err, link.ErrCompacted) {
		err = fmt.Errorf("%w: %w", errLinkCompacted, err)
	}
	return out, err
}

// linkInstaller is the snapshot install the follower runs when the source
// compacted what a group needs next (link_install.go); nil for a test's
// source, which has no snapshots.
func (h *Host) linkInstaller(src linkSource) func(ctx context.Context, g *group) error {
	cs, ok := src.(clientSource)
	if !ok {
		return nil
	}
	return func(ctx context.Context, g *group) error { return h.installLinkSnapshot(ctx, g, cs.c) }
}

// SourceGroups asks the source that addrs name, with token, how many raft
// groups it runs: a standby runs as many (cmd/queen, at boot).
func SourceGroups(ctx context.Context, addrs []string, token string, tls *nodetls.Config) (int, error) {
	c := link.NewClient(addrs, token, tls)
	defer c.Close()
	return clientSource{c}.Groups(ctx)
}
