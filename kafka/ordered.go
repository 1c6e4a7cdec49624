package kafka

import (
	"context"
	"errors"
	"sync"
)

// Handlers of one connection run concurrently, but some work must happen in
// the order the client sent its requests: a produce's proposal, so that
// batches a client pipelines to one partition are appended in that order
// (Kafka gets this by reading one request per connection at a time; with
// idempotent producers out of order means OUT_OF_ORDER_SEQUENCE_NUMBER).
// Each request gets a turn among the connection's requests of its API key
// when it is read; Conn.Ordered waits for that turn.

// turn is one request's place among its connection's requests of one key.
type turn struct {
	line *turnLine
	seq  uint64
	once sync.Once
}

// turnLine orders the requests of one API key on one connection.
type turnLine struct {
	mu      sync.Mutex
	next    uint64          // the next turn to hand out (the reader's)
	done    uint64          // every turn below has been taken or given up
	given   map[uint64]bool // turns given up out of order
	changed chan struct{}   // closed and replaced whenever done moves
}

// turnTable holds a connection's lines, by API key. Only the reader adds.
type turnTable struct {
	mu    sync.Mutex
	lines map[int16]*turnLine
}

// take hands out the next turn of key; the reader calls it at dispatch.
func (t *turnTable) take(key int16) *turn {
	t.mu.Lock()
	l := t.lines[key]
	if l == nil {
		if t.lines == nil {
			t.lines = map[int16]*turnLine{}
		}
		l = &turnLine{given: map[uint64]bool{}, changed: make(chan struct{})}
		t.lines[key] = l
	}
	t.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	tr := &turn{line: l, seq: l.next}
	l.next++
	return tr
}

// finish ends the turn (taken or not): later turns may go once every
// earlier one has finished. Safe to call more than once.
func (tr *turn) finish() {
	tr.once.Do(func() {
		l := tr.line
		l.mu.Lock()
		defer l.mu.Unlock()
		if tr.seq != l.done {
			l.given[tr.seq] = true
			return
		}
		l.done++
		for l.given[l.done] {
			delete(l.given, l.done)
			l.done++
		}
		close(l.changed)
		l.changed = make(chan struct{})
	})
}

// wait blocks until every earlier turn has finished.
func (tr *turn) wait(ctx context.Context) error {
	l := tr.line
	for {
		l.mu.Lock()
		ready, changed := l.done == tr.seq, l.changed
		l.mu.Unlock()
		if ready {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type turnKey struct{}

// errNoTurn is returned by Ordered outside a handler's context.
var errNoTurn = errors.New("kafka: Ordered called outside a request handler")

// Ordered runs f once every earlier request of the same API key on this
// connection has run its ordered section or returned, so that what f does
// happens in the order the client sent the requests. A handler calls it at
// most once, with the context it was given; the rest of the handler runs
// concurrently with its neighbours. It returns ctx's error if the
// connection closes while waiting.
func (c *Conn) Ordered(ctx context.Context, f func()) error {
	tr, ok := ctx.Value(turnKey{}).(*turn)
	if !ok {
		return errNoTurn
	}
	defer tr.finish()
	if err := tr.wait(ctx); err != nil {
		return err
	}
	f()
	return nil
}
