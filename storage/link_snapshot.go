package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble"
)

// A standby's link (raftgroups/link) reads a consistent copy of a group's
// store at an applied index when the entries it needs next were compacted
// away on the source. The copy is a pebble snapshot of the store's key
// space: every Update writes its whole batch, the applied index
// (keyApplied) included, in one atomic pebble commit, so any pebble
// snapshot holds the state of exactly the index its keyApplied names, taken
// without pausing or racing the apply goroutine and costing it nothing
// (Update takes no lock for it). The chunk records the keys point at live
// in segments, pinned against collection until the copy is streamed;
// records are flushed to their segment before the batch pointing at them
// commits, so every location the copy holds is readable.
//
// The stream is the one SaveSnapshot writes for dragonboat, so a standby
// ingests it with the code a lagging replica recovers with.

// linkGate keeps the database a link copy reads open until the copy is
// done: RecoverFromSnapshot and Close replace or close it, and a pebble
// snapshot or iterator of a closed database must not be read. They call
// exclude, which asks open copies to stop (their next write fails) and
// waits for them.
type linkGate struct {
	mu       sync.RWMutex
	aborting atomic.Bool
	// stage is the source snapshot install being staged (nil: none), as
	// of the store generation stageGen names (recovered count + 1; 0:
	// not read yet). Only the apply goroutine touches them.
	stage    *linkStage
	stageGen uint64
}

// errLinkAborted ends a link copy whose database is being replaced.
var errLinkAborted = errors.New("storage: the store is being replaced or closed; take the link snapshot again")

// exclude stops and waits out every open link copy, and keeps new ones out
// until the returned func runs.
func (g *linkGate) exclude() func() {
	g.aborting.Store(true)
	g.mu.Lock()
	g.aborting.Store(false)
	return g.mu.Unlock
}

// LinkSnapshot is a consistent copy of the store at Index.
type LinkSnapshot struct {
	s     *Store
	view  *snapshotView
	index uint64
	once  sync.Once
}

// CaptureLinkSnapshot captures the store as of its last committed apply
// batch. The caller streams it (WriteTo) and closes it; until then the
// store cannot be replaced by a raft snapshot or closed (WriteTo is asked
// to stop when that is wanted).
func (s *Store) CaptureLinkSnapshot() (*LinkSnapshot, error) {
	s.linkGate.mu.RLock()
	s.dbMu.RLock()
	if s.db == nil {
		s.dbMu.RUnlock()
		s.linkGate.mu.RUnlock()
		return nil, ErrClosed
	}
	// Pinned before the snapshot: a collection that ran before the pin
	// judged by an older view, and a segment no key pointed at then is
	// pointed at by none later (new records go to the newest segment,
	// which is never collected).
	s.segs.pin()
	view := &snapshotView{snap: s.db.NewSnapshot(), segs: s.segs}
	s.dbMu.RUnlock()
	l := &LinkSnapshot{s: s, view: view}
	v, closer, err := view.snap.Get(keyApplied)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		// A store nothing was applied to yet.
	case err != nil:
		l.Close()
		return nil, fmt.Errorf("storage: link snapshot: read the applied index: %w", err)
	default:
		if len(v) == 8 {
			l.index = binary.BigEndian.Uint64(v)
		}
		_ = closer.Close()
	}
	return l, nil
}

// Index is the applied index whose state the copy holds.
func (l *LinkSnapshot) Index() uint64 { return l.index }

// WriteTo streams the copy to w, as SaveSnapshot does, until done or stop
// closes. It may be called once.
func (l *LinkSnapshot) WriteTo(w io.Writer, stop <-chan struct{}) error {
	err := errors.New("storage: link snapshot already streamed or closed")
	l.once.Do(func() {
		defer l.s.linkGate.mu.RUnlock()
		// SaveSnapshot closes the view and unpins its segments.
		err = l.s.SaveSnapshot(l.view, &gatedWriter{w: w, g: &l.s.linkGate}, stop)
	})
	return err
}

// Close releases the copy when it was not streamed.
func (l *LinkSnapshot) Close() {
	l.once.Do(func() {
		l.view.snap.Close()
		l.view.segs.unpin()
		l.s.linkGate.mu.RUnlock()
	})
}

// gatedWriter fails writes once the store is to be replaced, so a standby
// reading slowly holds a raft snapshot's recovery (or a shutdown) for one
// write at most, which the link server bounds.
type gatedWriter struct {
	w io.Writer
	g *linkGate
}

func (gw *gatedWriter) Write(p []byte) (int, error) {
	if gw.g.aborting.Load() {
		return 0, errLinkAborted
	}
	return gw.w.Write(p)
}
