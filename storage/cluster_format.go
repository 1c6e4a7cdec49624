package storage

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// The group's active format (wire/format.go): what this store applies and
// writes as. Every behaviour a later format changes is chosen by it, never
// by the build, so replicas of different builds apply one log alike until
// every member runs a build that knows the next format, which the leader
// then sets (KindSetFormat). A store whose active format is newer than this
// build's newest refuses to load or to apply the entry that raises it.

// keyActiveFormat holds the group's active format; absent means FormatV1.
var keyActiveFormat = []byte{tagCounters, 'f'}

// ErrFormatTooNew is the refusal of a build too old for a group's format.
var ErrFormatTooNew = fmt.Errorf("storage: the cluster runs a newer format than this build knows")

// newestFormat is the newest format this store may apply: the build's, or
// a test's override.
func (s *Store) newestFormat() uint32 {
	if s.cfg.NewestFormat != 0 {
		return s.cfg.NewestFormat
	}
	return wire.NewestFormat
}

// at reports whether the group applies at format v or later.
func (s *Store) at(v uint32) bool { return s.format.Load() >= v }

// ActiveFormat is the group's active format.
func (s *Store) ActiveFormat() uint32 { return s.format.Load() }

// NewestFormat is the newest format this store can apply.
func (s *Store) NewestFormat() uint32 { return s.newestFormat() }

func (s *Store) loadFormat() error {
	f := wire.FormatV1
	v, ok, err := s.getU64(keyActiveFormat)
	if err != nil {
		return err
	}
	if ok {
		f = uint32(v)
	}
	s.format.Store(f)
	return s.formatFits(f)
}

// formatFits refuses a format newer than this build's.
func (s *Store) formatFits(v uint32) error {
	if v > s.newestFormat() {
		return fmt.Errorf("%w: raft group %d is at format %d, this build applies formats %d to %d; run a newer build on this node",
			ErrFormatTooNew, s.cfg.Group, v, wire.OldestFormat, s.newestFormat())
	}
	return nil
}

// applySetFormat raises the group's active format. A build that does not
// know the format stops here (the batch fails, which stops the node) with
// the line that says why, instead of applying what follows differently
// from its peers.
func (s *Store) applySetFormat(ctx *applyCtx, c *wire.SetFormatCmd) wire.CodeResult {
	if err := s.formatFits(c.Version); err != nil {
		s.log.Error("storage: "+err.Error(), "group", s.cfg.Group)
		ctx.fail(err)
		return wire.CodeResult{Code: wire.CodeBadRequest}
	}
	if c.Version > s.format.Load() {
		s.format.Store(c.Version)
		ctx.set(keyActiveFormat, binary.BigEndian.AppendUint64(nil, uint64(c.Version)))
		s.log.Info("storage: raft group format raised", "group", s.cfg.Group, "format", c.Version)
	}
	return wire.CodeResult{Code: wire.CodeOK}
}

// CheckFormat reports, before a group starts, whether its store in dir
// was raised past what this build applies (newest; wire.NewestFormat when
// zero): the node then refuses to boot with the line that says why,
// rather than have its raft library stop it later with a panic. A store
// that does not exist yet passes.
func CheckFormat(dir string, group int, newest uint32) error {
	name, err := readCurrent(dir)
	if err != nil || name == "" {
		return err
	}
	db, err := pebble.Open(filepath.Join(dir, name), &pebble.Options{ReadOnly: true, Logger: pebbleLogger{slog.New(slog.DiscardHandler)}})
	if err != nil {
		return nil // the store's own open reports what is wrong with it
	}
	defer db.Close()
	v, closer, err := db.Get(keyActiveFormat)
	if err != nil {
		return nil // FormatV1: every build applies it
	}
	defer closer.Close()
	s := &Store{cfg: Config{Group: group, NewestFormat: newest}}
	if len(v) == 8 {
		return s.formatFits(uint32(binary.BigEndian.Uint64(v)))
	}
	return nil
}
