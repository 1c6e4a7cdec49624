package storage

import (
	"encoding/binary"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// The proposer proposes an entry again, byte for byte but flagged, when it
// cannot tell whether an attempt committed. Each proposal carries a random
// id (wire.AppendEntry), so the state machine can tell its attempts apart
// from any other entry, whichever order raft applies them in:
//
//   - The first attempt, then a retry. Most commands recognise their own
//     repeat (message ids, lease ids, transaction ids). Those that cannot
//     (an auto-ack pop, a delete, a position commit or seek) keep their
//     reply under the proposal's stamp, id and command index; a retry
//     finds it and answers it without applying the command again.
//   - A retry, then the first attempt (forwarded through a deposed leader):
//     the retry records the proposal's id, and the late first attempt is
//     skipped whole, since the retry already applied every one of its
//     commands.
//
// Both are kept for wire.RememberRetriesMs of the replicated clock, which
// the proposer's retry window stays well inside; a tick sweeps them by
// range deletion, since their keys start with the proposal's stamp.

const retriesIntervalMs = 10_000 // how often the sweeper looks

// retryKey is a tag, the proposal's stamp and its id (then, for a reply,
// the command's index).
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

// keptReply is the reply an earlier attempt of the entry being applied kept
// for its command at index i.
func (s *Store) keptReply(ctx *applyCtx, i int) ([]byte, bool) {
	if !ctx.retry || ctx.entryID == 0 || !s.hasReplies {
		return nil, false
	}
	return ctx.get(retryKey(tagReply, ctx.entryMs, ctx.entryID, i))
}

// keepReply stores the reply of the command at index i for its retries.
func (s *Store) keepReply(ctx *applyCtx, i int, reply []byte) {
	if ctx.entryID == 0 {
		return
	}
	ctx.set(retryKey(tagReply, ctx.entryMs, ctx.entryID, i), reply)
	s.hasReplies = true
}

// loadRetries rebuilds the retried proposals and notes whether replies are
// kept.
func (s *Store) loadRetries() error {
	s.retried = map[uint64]int64{}
	err := s.scan([]byte{tagRetried}, func(k, _ []byte) error {
		if len(k) == 17 {
			s.retried[binary.BigEndian.Uint64(k[9:])] = int64(binary.BigEndian.Uint64(k[1:9]))
		}
		return nil
	})
	if err != nil {
		return err
	}
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagReply}, UpperBound: []byte{tagReply + 1}})
	s.hasReplies = it.First()
	return it.Close()
}

// retriesSweeper forgets retried proposals and kept replies older than
// wire.RememberRetriesMs.
type retriesSweeper struct{}

func (retriesSweeper) name() string { return "retries" }

func (r retriesSweeper) due(s *Store, nowMs int64) bool {
	return (s.hasReplies || len(s.retried) > 0) && s.sweepDue(r.name(), nowMs, retriesIntervalMs)
}

func (r retriesSweeper) sweep(s *Store, ctx *applyCtx) {
	st := s.sweep(r.name())
	if (!s.hasReplies && len(s.retried) == 0) || !st.passDue(ctx.nowMs, retriesIntervalMs) {
		return
	}
	st.lastPassMs = ctx.nowMs
	ctx.saveSweep(r.name(), st)
	cut := ctx.nowMs - wire.RememberRetriesMs
	for _, tag := range []byte{tagReply, tagRetried} {
		_ = ctx.b.DeleteRange([]byte{tag}, appendU64([]byte{tag}, uint64(max(cut, 0))), nil)
	}
	for id, ms := range s.retried {
		if ms < cut {
			delete(s.retried, id)
		}
	}
	it := ctx.b.NewIter(&pebble.IterOptions{LowerBound: []byte{tagReply}, UpperBound: []byte{tagReply + 1}})
	s.hasReplies = it.First()
	_ = it.Close()
}
