package storage

import (
	"slices"

	"github.com/queen-mq/queen/wire"
)

// sweepState is where a sweeper stands: when its current (or last) pass
// started and, during a pass, the next partition it visits. It is stored
// (tagSweep) in the same batch as the work it describes, so a replica that
// restarts or installs a snapshot resumes exactly where the others are:
// a pass spread over many ticks visits the same partitions everywhere.
type sweepState struct {
	lastPassMs int64
	inPass     bool
	qid        uint64 // next queue (by id) to visit
	index      uint32 // next partition index in it
}

func (st *sweepState) encode() []byte {
	w := wire.Writer{}
	w.Varint(st.lastPassMs)
	w.Bool(st.inPass)
	w.Uvarint(st.qid)
	w.Uvarint(uint64(st.index))
	return w.B
}

func decodeSweepState(b []byte) (*sweepState, error) {
	r := wire.NewReader(b)
	st := &sweepState{lastPassMs: r.Varint(), inPass: r.Bool(), qid: r.Uvarint(), index: uint32(r.Uvarint())}
	return st, r.Done()
}

// sweep returns the named sweeper's state, creating it idle.
func (s *Store) sweep(name string) *sweepState {
	st := s.sweeps[name]
	if st == nil {
		st = &sweepState{}
		s.sweeps[name] = st
	}
	return st
}

func (ctx *applyCtx) saveSweep(name string, st *sweepState) {
	ctx.set(sweepKey(name), st.encode())
}

// loadSweeps reads every sweeper's stored state.
func (s *Store) loadSweeps() error {
	s.sweeps = map[string]*sweepState{}
	return s.scan([]byte{tagSweep}, func(k, v []byte) error {
		st, err := decodeSweepState(v)
		if err != nil {
			return err
		}
		s.sweeps[string(k[1:])] = st
		return nil
	})
}

// passDue reports whether a sweeper that runs a pass every intervalMs has
// work at nowMs: a pass in progress, or the interval since the last one
// has passed.
func (st *sweepState) passDue(nowMs, intervalMs int64) bool {
	return st.inPass || nowMs-st.lastPassMs >= intervalMs
}

// noteQueueConfig keeps the index of queues with time-driven options
// (retention, maxWaitTimeSeconds) in step with q's config. The index is
// derived from queue configs, identical on every replica and rebuilt by
// load, so sweepers can skip the queues that need nothing.
func (s *Store) noteQueueConfig(q *queueState) {
	if q.cfg.MaxWaitTimeSec > 0 || retentionOn(&q.cfg) {
		s.timed[q.id] = q
	} else {
		delete(s.timed, q.id)
	}
}

func retentionOn(c *wire.QueueConfig) bool {
	return c.RetentionEnabled && (c.RetentionSec > 0 || c.CompletedRetentionSec > 0)
}

// anyTimed reports whether some queue matches (a cheap read for due).
func (s *Store) anyTimed(match func(*queueState) bool) bool {
	for _, q := range s.timed {
		if match(q) {
			return true
		}
	}
	return false
}

// partitionVisit does a sweeper's work on one partition with at most
// budget units (records read or changed) and reports what it spent and
// whether it finished the partition.
type partitionVisit func(ctx *applyCtx, q *queueState, p *partState, budget int) (spent int, done bool)

// sweepPartitions runs a sweeper's pass over the partitions of the queues
// that match, in queue id then partition index order, resuming where the
// previous tick stopped: those whose log holds records when holding is
// set, the empty ones otherwise, read back into memory when they are not
// there. A pass starts once intervalMs after the last one and spends at
// most budget units per tick (a visit costs one unit plus what it
// reports), so one tick stays short however many partitions exist.
func (s *Store) sweepPartitions(ctx *applyCtx, name string, intervalMs int64, budget int, queues map[uint64]*queueState, match func(*queueState) bool, holding bool, visit partitionVisit) {
	st := s.sweep(name)
	if !st.passDue(ctx.nowMs, intervalMs) {
		return
	}
	if !st.inPass {
		*st = sweepState{lastPassMs: ctx.nowMs, inPass: true}
	}
	defer ctx.saveSweep(name, st)
	defer ctx.closeSweepChunks()
	ids := make([]uint64, 0, len(queues))
	for id, q := range queues {
		if id >= st.qid && match(q) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		q := queues[id]
		from := uint32(0)
		if id == st.qid {
			from = st.index
		}
		for i := from; int(i) < len(q.pids); i++ {
			if q.pids[i] == 0 || q.holdsRecords(i) != holding {
				continue
			}
			if budget <= 0 {
				st.qid, st.index = id, i
				return
			}
			p := s.partAt(ctx, q, i)
			if p == nil {
				return // the batch failed reading it back
			}
			spent, done := visit(ctx, q, p, budget-1)
			budget -= 1 + spent
			if !done {
				st.qid, st.index = id, i
				return
			}
		}
	}
	st.inPass, st.qid, st.index = false, 0, 0
}
