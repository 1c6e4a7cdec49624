package storage

import (
	"encoding/binary"

	"github.com/queen-mq/queen/wire"
)

// The proposer proposes an entry again, byte for byte but flagged, when it
// cannot tell whether an attempt committed. Each proposal carries a random
// id (wire.AppendEntry), so the state machine can tell its attempts apart
// from any other entry, whichever order raft applies them in:
//
//   - The first attempt, then a retry. Commands recognise their own repeat
//     (message ids, lease ids, transaction ids).
//   - A retry, then the first attempt (forwarded through a deposed leader):
//     the retry records the proposal's id, and the late first attempt is
//     skipped whole, since the retry already applied every one of its
//     commands.
//
// Retried ids are kept for wire.RememberRetriesMs of the replicated clock,
// which the proposer's retry window stays well inside; a tick sweeps them
// by range deletion, since their keys start with the proposal's stamp.

const retriesIntervalMs = 10_000 // how often the sweeper looks

// retryKey is a tag, the proposal's stamp and its id (then, when extra is
// not negative, a 4-byte suffix).
func retryKey(tag byte, stampMs int64, id uint64, extra int) []byte {
	b := make([]byte, 0, 21)
	b = append(b, tag)
	b = appendU64(b, uint64(max(stampMs, 0)))
	b = appendU64(b, id)
	if extra >= 0 {
		b = binary.BigEndian.AppendUint32(b, uint32(extra))
	}
	return b
}

// skipsLateAttempt reports whether e is the first attempt of a proposal
// whose retry was applied already: everything it carries is done.
func (s *Store) skipsLateAttempt(e *wire.Entry) bool {
	if e.ID == 0 || e.Retry || len(s.retried) == 0 {
		return false
	}
	_, ok := s.retried[e.ID]
	return ok
}

// noteRetry records that a retry of the proposal is being applied, so its
// first attempt, should it come later, is skipped.
func (s *Store) noteRetry(ctx *applyCtx, e *wire.Entry) {
	if e.ID == 0 || !e.Retry {
		return
	}
	if _, ok := s.retried[e.ID]; ok {
		return
	}
	s.retried[e.ID] = e.NowMs
	ctx.set(retryKey(tagRetried, e.NowMs, e.ID, -1), nil)
}

// loadRetries rebuilds the retried proposals.
func (s *Store) loadRetries() error {
	s.retried = map[uint64]int64{}
	err := s.scan([]byte{tagRetried}, func(k, _ []byte) error {
		if len(k) == 17 {
			s.retried[binary.BigEndian.Uint64(k[9:])] = int64(binary.BigEndian.Uint64(k[1:9]))
		}
		return nil
	})
	return err
}

// retriesSweeper forgets retried proposals older than
// wire.RememberRetriesMs.
type retriesSweeper struct{}

func (retriesSweeper) name() string { return "retries" }

func (r retriesSweeper) due(s *Store, nowMs int64) bool {
	return len(s.retried) > 0 && s.sweepDue(r.name(), nowMs, retriesIntervalMs)
}

func (r retriesSweeper) sweep(s *Store, ctx *applyCtx) {
	st := s.sweep(r.name())
	if len(s.retried) == 0 || !st.passDue(ctx.nowMs, retriesIntervalMs) {
		return
	}
	st.lastPassMs = ctx.nowMs
	ctx.saveSweep(r.name(), st)
	cut := ctx.nowMs - wire.RememberRetriesMs
	_ = ctx.b.DeleteRange([]byte{tagRetried}, appendU64([]byte{tagRetried}, uint64(max(cut, 0))), nil)
	for id, ms := range s.retried {
		if ms < cut {
			delete(s.retried, id)
		}
	}
}
