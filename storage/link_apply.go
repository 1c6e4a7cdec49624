package storage

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// A standby group's link state (QUEEN_STANDBY_OF; wire/link_apply.go): the
// source entries it applied, replicated through its own log and kept in
// its own store, so it is in snapshots, survives restarts and a new
// standby leader goes on exactly where the last one stopped.
//
// Source entries are applied through applyEntry, the path the source's
// own Update took, in the batch that records the new source index: the
// store is never ahead or behind the index it says it applied.
//
// Two formats. The group's own active format (keyActiveFormat) gates the
// link commands: they exist from FormatV7 and a standby group applies
// none below it. The source's entries, though, must apply as the source
// applied them, at the source's format (a source at FormatV5 numbers KV
// versions per group, not per tenant, and a standby applying its entries
// at FormatV7 would number them otherwise). So the source's format is
// kept apart (LinkState.Format, from the source's own KindSetFormat
// entries arriving inside LinkApply) and is the active format while a
// LinkApply's entries apply; the group's own format is put back after
// them, so a source at FormatV6 never lowers the standby below FormatV7.
// A source entry raising the format past what this build knows stops the
// standby with the format gate's line: upgrade a standby before its
// source. At promotion the group's format becomes the higher of the two,
// as a normal raise would.

// keyLink holds the group's link state; absent on a group never linked.
var keyLink = []byte{tagCounters, 'L'}

// LinkState is what a group knows of the source it follows.
type LinkState struct {
	Linked   bool   // the group applies a source's entries and takes no other writes
	Promoted bool   // following ended (KindLinkPromote): the group is writable
	Source   string // QUEEN_STANDBY_OF as the follower named it
	Applied  uint64 // last source index applied
	StampMs  uint64 // clock stamp of the last applied source entry that had one
	// ClockMs is the source's replicated clock after Applied: source
	// entries apply at it, never at the standby's own clock.
	ClockMs int64
	// Format is the source's active format after Applied.
	Format uint32
}

func (l *LinkState) encode() []byte {
	w := wire.Writer{}
	w.U8(1) // version of this encoding
	w.Bool(l.Linked)
	w.Bool(l.Promoted)
	w.String(l.Source)
	w.Uvarint(l.Applied)
	w.Uvarint(l.StampMs)
	w.Varint(l.ClockMs)
	w.Uvarint(uint64(l.Format))
	return w.B
}

func decodeLinkState(b []byte) (LinkState, error) {
	r := wire.NewReader(b)
	if v := r.U8(); r.Err() == nil && v != 1 {
		return LinkState{}, fmt.Errorf("storage: link state encoding %d unknown", v)
	}
	l := LinkState{Linked: r.Bool(), Promoted: r.Bool(), Source: r.String(), Applied: r.Uvarint(),
		StampMs: r.Uvarint(), ClockMs: r.Varint(), Format: uint32(r.Uvarint())}
	return l, r.Done()
}

// Link is the group's link state as last applied.
func (s *Store) Link() LinkState {
	if l := s.link.Load(); l != nil {
		return *l
	}
	return LinkState{}
}

// loadLink reads the link state when the store is loaded or rebuilt from
// a snapshot.
func (s *Store) loadLink() error {
	b, closer, err := s.db.Get(keyLink)
	if errors.Is(err, pebble.ErrNotFound) {
		s.link.Store(&LinkState{})
		return nil
	}
	if err != nil {
		return fmt.Errorf("storage: read link state: %w", err)
	}
	defer closer.Close()
	l, err := decodeLinkState(b)
	if err != nil {
		return fmt.Errorf("storage: link state: %w", err)
	}
	s.link.Store(&l)
	return nil
}

// setLink writes l in the batch and publishes it. Readers (the follower,
// /health) may see it just before the batch commits; a batch that fails
// to commit stops the node, and the follower's next run is checked
// against the applied index anyway.
func (s *Store) setLink(ctx *applyCtx, l LinkState) {
	ctx.set(keyLink, l.encode())
	s.link.Store(&l)
}

// applyLinkApply applies a run of source entries, each as the source's
// Update did, when it continues the last run applied; a run that does not
// (proposed twice across a leader change, or out of turn) is answered
// CodeConflict with the source index applied, so the follower goes on
// from there.
func (s *Store) applyLinkApply(ctx *applyCtx, c *wire.LinkApplyCmd) wire.CountResult {
	if !s.at(wire.FormatV7) || ctx.linking {
		// Below FormatV7 no member may know the kind; a standby's source
		// that is itself a standby (a chain) is not supported.
		return wire.CountResult{Code: wire.CodeBadRequest}
	}
	l := s.Link()
	if l.Promoted {
		return wire.CountResult{Code: wire.CodeConflict, N: l.Applied}
	}
	if c.FirstSourceIndex != l.Applied+1 {
		return wire.CountResult{Code: wire.CodeConflict, N: l.Applied}
	}
	if !l.Linked {
		l.Linked, l.Format = true, max(l.Format, wire.FormatV1)
	}
	if c.Source != "" {
		l.Source = c.Source
	}
	// The outer entry's state, which applying the source's entries
	// replaces: put back after them.
	results, entryMs, retry, entryID := ctx.results, ctx.entryMs, ctx.retry, ctx.entryID
	own := s.format.Load()
	s.format.Store(l.Format)
	// The outer entry moved the clock to the standby's time; the source's
	// entries run on the source's clock.
	s.clockMs = l.ClockMs
	ctx.linking = true
	for i := range c.Entries {
		e := &c.Entries[i]
		if e.StampMs != 0 {
			l.StampMs = e.StampMs
		}
		if e.Skip {
			continue
		}
		ctx.results = nil
		s.applyEntry(ctx, e.Payload)
	}
	ctx.linking = false
	l.Applied = c.LastSourceIndex
	l.ClockMs = s.clockMs
	if f := s.format.Load(); f != l.Format {
		// A source entry raised the source's format (and wrote it as the
		// group's own): keep it as the link's, and the own one as is.
		l.Format = f
		ctx.set(keyActiveFormat, binary.BigEndian.AppendUint64(nil, uint64(own)))
	}
	s.format.Store(own)
	ctx.results, ctx.entryMs, ctx.retry, ctx.entryID, ctx.keepReply = results, entryMs, retry, entryID, false
	ctx.nowMs = s.clockMs
	s.setLink(ctx, l)
	return wire.CountResult{Code: wire.CodeOK, N: l.Applied}
}

// applyLinkPromote ends following: the group takes writes from here, at
// the last source entry it applied. Its format becomes the higher of its
// own and the source's. Promoting twice is a no-op.
func (s *Store) applyLinkPromote(ctx *applyCtx, _ *wire.LinkPromoteCmd) wire.CountResult {
	if !s.at(wire.FormatV7) || ctx.linking {
		return wire.CountResult{Code: wire.CodeBadRequest}
	}
	l := s.Link()
	if l.Promoted {
		return wire.CountResult{Code: wire.CodeOK, N: l.Applied}
	}
	l.Linked, l.Promoted = false, true
	// A source snapshot being staged will never be installed now
	// (link_install.go): drop its chunks.
	_ = ctx.b.DeleteRange(linkChunkPrefix, prefixEnd(linkChunkPrefix), nil) // an in-memory batch append cannot fail
	ctx.del(keyLinkStage)
	s.linkGate.stage = nil
	if l.Format > s.format.Load() {
		if err := s.formatFits(l.Format); err != nil {
			ctx.fail(err)
			return wire.CountResult{Code: wire.CodeBadRequest}
		}
		s.format.Store(l.Format)
		ctx.set(keyActiveFormat, binary.BigEndian.AppendUint64(nil, uint64(l.Format)))
	}
	s.setLink(ctx, l)
	s.log.Info("storage: standby group promoted: it takes writes from the last source entry it applied",
		"sourceIndex", l.Applied)
	return wire.CountResult{Code: wire.CodeOK, N: l.Applied}
}

// sourceOnly says whether a source's command of kind k is left out when a
// standby applies the source's entries: the node registries (Kafka's
// advertised addresses, the members' HTTP addresses) describe the
// cluster's own nodes, and a standby's are not its source's. A standby
// registers its own nodes through its own log; the source's
// registrations, applied, would have its Metadata send Kafka clients to
// the source. Nothing else is computed from them.
func sourceOnly(k wire.Kind) bool {
	return k == wire.KindKafkaRegisterNode || k == wire.KindRegisterMember
}
