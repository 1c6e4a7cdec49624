package storage

import "github.com/queen-mq/queen/wire"

// A sweeper is time-driven work the apply loop does when the leader
// proposes a tick: expiring, retaining, firing. The leader asks due (a read
// under the store's read lock, with its wall clock) whether any sweeper has
// work; if so it proposes a tick, and every replica runs sweep at the tick's
// replicated clock. sweep must be deterministic and bounded (it runs on the
// group's only apply goroutine): it does at most a fixed budget of work per
// tick and leaves the rest for the next one.
type sweeper interface {
	name() string
	due(s *Store, nowMs int64) bool
	sweep(s *Store, ctx *applyCtx)
}

// sweepers run in this order at every tick. Add new time-driven work here.
var sweepers = []sweeper{retentionSweeper, maxWaitSweeper, maxWaitEvictSweeper, txnDoneSweeper{}, retriesSweeper{}, xAbortSweeper{}, kvTTLSweeper{}, timerSweeper{}, traceSweeper{}, kafkaProducerSweeper{}, cleanupSweeper{}}

func (s *Store) applyTick(ctx *applyCtx) {
	for _, sw := range sweepers {
		sw.sweep(s, ctx)
	}
}

// TickCommand is the tick the leader proposes: its own settings of the
// work whose outcome depends on them, so replicas agree.
func (s *Store) TickCommand() wire.Command {
	c := wire.TickCmd{PartitionCleanupMs: s.cfg.PartitionCleanupMs}
	if s.ActiveFormat() >= wire.FormatV2 {
		c.TraceRetentionMs = s.cfg.TraceRetentionMs
	}
	return wire.Command{Kind: wire.KindTick, Body: c.Encode(nil)}
}

// TickDue reports whether any sweeper has work at nowMs (the caller's wall
// clock, close to the clock the tick will carry).
//
// It holds the database lock, then the store's, in the order Close and
// RecoverFromSnapshot take them: a sweeper's check that reads the database
// (firstKeyHeld) must not wait for its lock while holding the store's.
func (s *Store) TickDue(nowMs int64) bool {
	defer s.readLock()()
	for _, sw := range sweepers {
		if sw.due(s, nowMs) {
			return true
		}
	}
	return false
}
