package raftgroups

import (
	"context"

	"github.com/queen-mq/queen/wire"
)

// relocateMaxBytes bounds the records one relocation command copies, so a
// single apply stays short.
const relocateMaxBytes = 32 << 20

// relocateChunks is how a leader gives segment space back (see
// storage/relocate.go): it asks each store it leads for a mostly dead
// sequence range and proposes its relocation, command by command, until
// the range is done. It runs every RelocateEvery.
func (h *Host) relocateChunks() {
	for _, g := range h.groups {
		if !h.leads(g) {
			continue
		}
		if from, to, ok := g.store.SparseRange(); ok {
			h.relocateRange(g, from, to)
		}
	}
}

// relocateRange proposes the relocation of [from, to) until it is done,
// the node stops or a command fails (the next round tries again).
func (h *Host) relocateRange(g *group, from, to uint64) {
	for from < to {
		select {
		case <-h.stop:
			return
		default:
		}
		cmd := wire.RelocateChunksCmd{From: from, To: to, MaxBytes: relocateMaxBytes}
		ctx, cancel := context.WithTimeout(h.stopped, h.cfg.RequestTimeout)
		res, err := g.prop.submit(ctx, []wire.Command{{Kind: wire.KindRelocateChunks, Body: cmd.Encode(nil)}})
		cancel()
		if err != nil {
			h.log.Debug("raft: chunk relocation not applied", "group", g.n, "err", err)
			return
		}
		r, err := wire.DecodeRelocateChunksResult(res[0])
		if err != nil || r.Code != wire.CodeOK || r.Next <= from {
			return
		}
		h.log.Debug("raft: chunks relocated", "group", g.n, "from", from, "to", to, "moved", r.Moved)
		from = r.Next
	}
}
