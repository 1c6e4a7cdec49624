package raftgroups

import (
	"io"
	"sync"

	"github.com/lni/dragonboat/v4/client"
	pb "github.com/lni/dragonboat/v4/raftpb"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/queen-mq/queen/storage"
)

// A standby that keeps up reads entries just applied. Dragonboat's log
// (tan) serves a read by opening its file and decoding a 32 KiB block per
// stored update, under the log reader's lock that the group's raft step
// path takes for every append: measured, 35 µs an entry of 450 bytes and
// 160 µs one of 16 KiB, which at the spec's 50,000 records/s came near
// the 10% a standby may cost its source. So a node serving the link keeps
// a copy of the entries its state machine applied most recently, bounded
// in bytes, and serves what it holds from memory; older entries come from
// the log. Copying each applied entry once costs the apply path a memcpy,
// and only on a node with QUEEN_LINK_TOKEN set.

// linkTailBytes bounds one group's tail: about a second of a busy group's
// entries. A share of the memory budget when there is one.
func linkTailBytes(budget int64, groups int) int {
	if budget <= 0 || groups <= 0 {
		return 16 << 20
	}
	return int(min(max(budget/int64(groups)/64, 1<<20), 16<<20))
}

type tailEntry struct {
	index uint64
	cmd   []byte
}

// linkTail is the applied entries from start on, in index order; an index
// from start on that it does not hold (below the last it holds) was never
// given to the state machine (a membership change, an empty entry), so
// the link serves it as a skip.
type linkTail struct {
	mu      sync.Mutex
	start   uint64 // first index covered; 0: nothing yet
	ents    []tailEntry
	head    int // ents[head:] are live; the slice is compacted as it empties
	bytes   int
	limit   int
	lastGen uint64 // the store's SnapshotsRecovered when last appended
	// wake is closed (and replaced) at every record: long polls wait on it.
	wake chan struct{}
}

// changed is closed when entries are next recorded. A waiter takes it
// before reading the applied index: the store moves that index before
// Update returns and the tail records, so a wait begun on an older index
// always sees its channel closed.
func (t *linkTail) changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.wake == nil {
		t.wake = make(chan struct{})
	}
	return t.wake
}

// record copies applied entries into the tail. A store rebuilt from a
// snapshot since (its entries never passed here) restarts the tail.
func (t *linkTail) record(st *storage.Store, ents []sm.Entry) {
	if len(ents) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if gen := st.SnapshotsRecovered(); gen != t.lastGen || t.start == 0 || ents[0].Index < t.next() {
		t.reset(ents[0].Index)
		t.lastGen = gen
	}
	for i := range ents {
		c := make([]byte, len(ents[i].Cmd))
		copy(c, ents[i].Cmd)
		t.ents = append(t.ents, tailEntry{index: ents[i].Index, cmd: c})
		t.bytes += len(c)
	}
	for t.bytes > t.limit && t.head < len(t.ents)-1 {
		e := t.ents[t.head]
		t.bytes -= len(e.cmd)
		t.ents[t.head] = tailEntry{}
		t.head++
		t.start = e.index + 1
	}
	if t.head > len(t.ents)/2 {
		t.ents = append(t.ents[:0], t.ents[t.head:]...)
		t.head = 0
	}
	if t.wake != nil {
		close(t.wake)
		t.wake = nil
	}
}

// next is the index after the last one covered.
func (t *linkTail) next() uint64 {
	if n := len(t.ents); n > t.head {
		return t.ents[n-1].index + 1
	}
	return t.start
}

func (t *linkTail) reset(start uint64) {
	t.ents, t.head, t.bytes, t.start = t.ents[:0], 0, 0, start
}

// read serves entries [low, high) from the tail, at most maxSize bytes
// (at least one), as dragonboat's log reader would give them: held
// entries as session proposals, the indexes between as empty entries
// (skips). ok is false when the tail does not cover low.
func (t *linkTail) read(low, high, maxSize uint64) ([]pb.Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.start == 0 || low < t.start || low >= t.next() {
		return nil, false
	}
	live := t.ents[t.head:]
	// The first held entry at or after low.
	i, j := 0, len(live)
	for i < j {
		m := (i + j) / 2
		if live[m].index < low {
			i = m + 1
		} else {
			j = m
		}
	}
	var out []pb.Entry
	var size uint64
	for idx := low; idx < high && idx < t.next(); idx++ {
		e := pb.Entry{Index: idx, Type: pb.ApplicationEntry}
		if i < len(live) && live[i].index == idx {
			e.ClientID, e.SeriesID, e.Cmd = 1, client.NoOPSeriesID, live[i].cmd
			i++
		}
		if len(out) > 0 && size+uint64(len(e.Cmd)) > maxSize {
			break
		}
		size += uint64(len(e.Cmd))
		out = append(out, e)
	}
	return out, true
}

// tappedStore records what the store applies into the group's link tail.
type tappedStore struct {
	sm.IOnDiskStateMachine
	st   *storage.Store
	tail *linkTail
}

func (s tappedStore) Update(ents []sm.Entry) ([]sm.Entry, error) {
	out, err := s.IOnDiskStateMachine.Update(ents)
	if err == nil {
		s.tail.record(s.st, out)
	}
	return out, err
}

func (s tappedStore) RecoverFromSnapshot(r io.Reader, stopc <-chan struct{}) error {
	err := s.IOnDiskStateMachine.RecoverFromSnapshot(r, stopc)
	s.tail.mu.Lock()
	s.tail.reset(0) // restarts at the next applied entry
	s.tail.mu.Unlock()
	return err
}
