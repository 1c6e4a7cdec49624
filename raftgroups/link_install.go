package raftgroups

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/queen-mq/queen/raftgroups/link"
	"github.com/queen-mq/queen/wire"
)

// linkChunkBytes is the data of one KindLinkSnapshotChunk proposal: big
// enough that a large store goes in few, small enough that one never holds
// the standby's log up (wire.MaxLinkSnapshotChunk).
const linkChunkBytes = wire.MaxLinkSnapshotChunk

// linkInstallChunkTimeout bounds one chunk's proposal.
const linkInstallChunkTimeout = time.Minute

// installLinkSnapshot brings standby group g on from a snapshot of the
// source's group, when the source compacted the entries g needs next:
// the snapshot's stream is proposed through g's own log in chunks, then a
// Done that replaces g's state with it on every replica at the same point
// of the log, following the source from the snapshot's index
// (storage/link_install.go). Memory is one chunk; any failure ends the
// install, and the next starts over (a new install id drops what this one
// staged).
func (h *Host) installLinkSnapshot(ctx context.Context, g *group, c *link.Client) error {
	index, body, err := c.Snapshot(ctx, g.n)
	if err != nil {
		return fmt.Errorf("raftgroups: standby group %d: fetch the source's snapshot: %w", g.n, err)
	}
	defer body.Close()
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return fmt.Errorf("raftgroups: standby group %d: install id: %w", g.n, err)
	}
	id := binary.BigEndian.Uint64(idb[:]) | 1 // never 0
	size := min(linkChunkBytes, h.cfg.MaxEntryBytes-(64<<10))
	buf := make([]byte, size)
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	var seq, total uint64
	var crc uint32
	began := time.Now()
	for {
		n, rerr := fill(body, buf)
		if n > 0 {
			crc = crc32.Update(crc, castagnoli, buf[:n])
			total += uint64(n)
			cmd := wire.LinkSnapshotChunkCmd{ID: id, Seq: seq, Data: buf[:n]}
			if err := h.proposeLinkInstall(ctx, g, wire.KindLinkSnapshotChunk, cmd.Encode(nil)); err != nil {
				return fmt.Errorf("raftgroups: standby group %d: snapshot chunk %d: %w", g.n, seq, err)
			}
			seq++
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("raftgroups: standby group %d: read the source's snapshot: %w", g.n, rerr)
		}
	}
	if seq == 0 {
		return fmt.Errorf("raftgroups: standby group %d: the source's snapshot was empty", g.n)
	}
	source := ""
	if h.standby != nil {
		source = h.standby.source
	}
	done := wire.LinkSnapshotDoneCmd{ID: id, Chunks: seq, Bytes: total, CRC: crc, SourceIndex: index, Source: source}
	// A Done installs only alone in its entry; group commit may have put
	// another command (a format raise, a node registration) beside it,
	// which leaves every chunk staged: propose it again rather than send
	// the whole snapshot again.
	for attempt := 1; ; attempt++ {
		err := h.proposeLinkInstall(ctx, g, wire.KindLinkSnapshotDone, done.Encode(nil))
		var c *installConflict
		if err == nil {
			break
		}
		if !errors.As(err, &c) || c.next != seq || attempt == linkDoneAttempts {
			return fmt.Errorf("raftgroups: standby group %d: install the source's snapshot: %w", g.n, err)
		}
	}
	h.log.Info("raft: standby: installed a snapshot of the source's group", "group", g.n, "sourceIndex", index,
		"bytes", total, "chunks", seq, "ms", time.Since(began).Milliseconds())
	return nil
}

// fill reads into buf until it is full or the stream ends: io.EOF only
// at the stream's verified end (link.Client's Snapshot body), any other
// error (a cut or corrupted stream) as is, so a partial stream is never
// proposed as a whole one.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// proposeLinkInstall proposes one install command alone in its entry (a
// Done installs only as its entry's only command) and checks its answer.
func (h *Host) proposeLinkInstall(ctx context.Context, g *group, kind wire.Kind, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, linkInstallChunkTimeout)
	defer cancel()
	res, err := g.prop.submit(ctx, []wire.Command{{Kind: kind, Body: body}})
	if err != nil {
		return err
	}
	if len(res) != 1 {
		return fmt.Errorf("%d results", len(res))
	}
	r, err := wire.DecodeCountResult(res[0])
	if err != nil {
		return err
	}
	if r.Code == wire.CodeConflict {
		return &installConflict{next: r.N}
	}
	if r.Code != wire.CodeOK {
		return fmt.Errorf("refused: code %v (next %d)", r.Code, r.N)
	}
	return nil
}

// linkDoneAttempts bounds how often a Done is proposed again while its
// chunks stay staged.
const linkDoneAttempts = 5

// installConflict is an install command refused out of turn; next is the
// chunk the staged install expects (0: none staged).
type installConflict struct{ next uint64 }

func (c *installConflict) Error() string {
	return fmt.Sprintf("refused out of turn (the staged install expects chunk %d)", c.next)
}
