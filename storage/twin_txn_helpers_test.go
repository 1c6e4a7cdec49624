package storage

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// Helpers the transaction twin workloads (twin_kafka_txn_test.go,
// twin_xtxn_test.go) share with each other, on top of twinWorkload.

// twinApply applies one command to both stores (one entry, as raft hands
// every replica the same) and decodes the answer they gave alike.
func twinApply[R any](w *twinWorkload, kind wire.Kind, body []byte, decode func([]byte) (R, error)) R {
	w.t.Helper()
	r, err := decode(w.both(kind, body))
	if err != nil {
		w.failf("kind %d answered what does not decode: %v", kind, err)
	}
	return r
}

// twinBody builds a command body with a harness helper that applies
// entries of its own (an allocation) and draws message ids: called on
// both stores, so both take the same entries and ids, and both must build
// the same bytes.
func twinBody(w *twinWorkload, build func(h *harness) []byte) []byte {
	w.t.Helper()
	a, b := build(w.a), build(w.b)
	if string(a) != string(b) {
		w.failf("the stores' harnesses built different commands: %x | %x", a, b)
	}
	return a
}

// failf fails the test with the last commands applied.
func (w *twinWorkload) failf(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("%s\nafter:\n%s", fmt.Sprintf(format, args...), strings.Join(w.log[max(0, len(w.log)-40):], "\n"))
}

// note adds a line to the log a failure shows.
func (w *twinWorkload) note(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf(format, args...))
}

// xid is a transaction id shaped as a UUIDv7 of the workload's clock,
// as the engine makes them (stores sweep remembered outcomes by that
// time), its other bytes drawn from the workload's seed.
func (w *twinWorkload) xid() wire.ID {
	var id wire.ID
	for i := 0; i < 6; i++ {
		id[i] = byte(uint64(w.a.now) >> (40 - 8*i))
	}
	for i := 6; i < len(id); i++ {
		id[i] = byte(w.r.Intn(256))
	}
	return id
}

// advance moves both stores' clocks.
func (w *twinWorkload) advance(ms int64) {
	w.a.now += ms
	w.b.now += ms
}

// restartB reopens the second store, from its load image or by reading
// every partition, as after a crash.
func (w *twinWorkload) restartB() {
	walk := w.r.Intn(2) == 0
	w.note("restart (walk %v)", walk)
	w.b.restart(walk)
}

// stores calls f with each store, named for a failure's message.
func (w *twinWorkload) stores(f func(name string, h *harness)) {
	f("kept running", w.a)
	f("restarted", w.b)
}

// sameKeys compares the two stores' whole key spaces: run with no steps
// does only that, after allocating its queue q in both alike.
func (w *twinWorkload) sameKeys() { w.run(0, nil) }

// eachSeed runs f as a subtest for each seed from 1 to n.
func eachSeed(t *testing.T, n int64, f func(t *testing.T, seed int64)) {
	for seed := int64(1); seed <= n; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { f(t, seed) })
	}
}

// takeAny takes an element of *s out, drawn by w's seed; false when there
// is none.
func takeAny[T any](w *twinWorkload, s *[]T) (T, bool) {
	var v T
	if len(*s) == 0 {
		return v, false
	}
	i := w.r.Intn(len(*s))
	v = (*s)[i]
	*s = slices.Delete(*s, i, i+1)
	return v, true
}
