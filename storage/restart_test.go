package storage

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// Replicas restart whenever they like, each on its own: a store reopened
// from its database must answer every later entry exactly as one that kept
// its state in memory, or replicas diverge without anyone noticing. Two
// stores apply the same random workload (pushes, pops of every
// subscription mode, acks of every status, ticks with retention, time
// passing); the second is reopened now and then, from its load image or
// by reading every partition, as after a crash. Every answer and the
// stores' contents at the end must be the same.
func TestARestartedStoreAnswersLikeOneThatKeptRunning(t *testing.T) {
	for seed := int64(1); seed <= 24; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			w := newTwinWorkload(t, seed)
			w.run(300, func() { w.b.restart(w.r.Intn(2) == 0) })
		})
	}
}

// twinWorkload applies one random workload to two stores, a and b, and
// fails the test when they answer anything differently.
type twinWorkload struct {
	t      *testing.T
	r      *rand.Rand
	a, b   *harness
	leased []leasedClaim // claims the pops answered under a lease, for later acks
	log    []string      // the commands applied, for a failure's message
	// pending is a stepped seek or group delete whose walk is not done:
	// its next entry comes at a later admin turn, other commands between.
	pending *pendingSteps
}

type pendingSteps struct {
	kind   wire.Kind
	encode func(wire.Steps) []byte
	next   wire.Steps
}

// stepped applies one entry of a stepped command and keeps what is left of
// its walk for later.
func (w *twinWorkload) stepped(kind wire.Kind, encode func(wire.Steps) []byte, steps wire.Steps) {
	r, err := wire.DecodeCountResult(w.both(kind, encode(steps)))
	if err != nil {
		w.t.Fatal(err)
	}
	w.pending = nil
	if r.More {
		w.pending = &pendingSteps{kind: kind, encode: encode, next: r.Next}
	}
}

type leasedClaim struct {
	group string
	cl    wire.Claim
}

func newTwinWorkload(t *testing.T, seed int64) *twinWorkload {
	return &twinWorkload{t: t, r: rand.New(rand.NewSource(seed)), a: newHarness(t), b: newHarness(t)}
}

// A store that keeps one partition in memory reads every other back from
// the store for each command that needs it, as a group with more
// partitions than its cache does: it must answer every entry as a store
// that keeps them all, restarts included.
func TestAnEvictingStoreAnswersLikeOneThatKeepsAll(t *testing.T) {
	VerifyTotals()
	for seed := int64(1); seed <= 24; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			w := newTwinWorkload(t, seed)
			w.b = newCachedHarness(t, 1)
			w.run(300, func() { w.b.restart(w.r.Intn(2) == 0) })
		})
	}
}

// both applies one command to both stores and checks the answers match.
func (w *twinWorkload) both(kind wire.Kind, body []byte) []byte {
	w.t.Helper()
	// One entry for both: an entry carries a random proposal id.
	e := wire.AppendEntry(nil, w.a.now, []wire.Command{{Kind: kind, Body: body}})
	ra, rb := w.a.applyEntry(e), w.b.applyEntry(e)
	w.log = append(w.log, fmt.Sprintf("kind %d at %d: %x -> %x", kind, w.a.now, body, ra))
	if !bytes.Equal(ra, rb) {
		w.t.Fatalf("command %d answered %x by the store kept running, %x by the other, after:\n%s", kind, ra, rb,
			strings.Join(w.log[max(0, len(w.log)-12):], "\n"))
	}
	return ra
}

// run applies steps random commands, calling disturb (on b) now and then,
// then compares the stores' contents.
func (w *twinWorkload) run(steps int, disturb func()) {
	const parts = 5
	names := make([]string, parts)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
	}
	retain := w.r.Intn(2) == 0
	for _, h := range []*harness{w.a, w.b} {
		h.alloc("q", names...)
		if retain {
			h.retainCompleted("q", 1)
		}
	}
	for range steps {
		switch op := w.r.Intn(100); {
		case op < 30:
			var recs []byte
			n := 1 + w.r.Intn(3)
			for range n {
				recs = wire.AppendRecord(recs, &wire.Record{Flags: wire.FlagJSON, MsgID: w.a.nextID(), Payload: []byte(`1`)})
				w.b.nextID()
			}
			c := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "q", Partition: names[w.r.Intn(parts)], PartitionIndex: -1,
				Flags: wire.PushIndexTxn, Count: n, Records: recs}
			w.both(wire.KindPush, c.Encode(nil))
		case op < 55:
			w.pop(names)
		case op < 75:
			w.ack()
		case op < 82:
			w.both(wire.KindTick, nil)
		case op < 84:
			c := wire.TickCmd{PartitionCleanupMs: int64(1000 + w.r.Intn(4000))}
			w.both(wire.KindTick, c.Encode(nil))
		case op < 86:
			w.admin(names)
		case op < 97:
			ms := int64(w.r.Intn(2500))
			w.a.now += ms
			w.b.now += ms
		default:
			w.log = append(w.log, "disturbed")
			disturb()
		}
	}
	da, db := w.a.dump(), w.b.dump()
	var diff []string
	for k, v := range da {
		if db[k] != v && k[0] != tagBlob {
			diff = append(diff, fmt.Sprintf("%x: %x | %x", k, v, db[k]))
		}
	}
	for k, v := range db {
		if _, ok := da[k]; !ok {
			diff = append(diff, fmt.Sprintf("%x: (none) | %x", k, v))
		}
	}
	if len(diff) > 0 {
		w.t.Fatalf("keys that differ (kept running | reopened):\n%s", strings.Join(diff, "\n"))
	}
}

func (w *twinWorkload) pop(names []string) {
	modes := []uint8{wire.SubAll, wire.SubNew, wire.SubFrom}
	c := wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: fmt.Sprintf("g%d", w.r.Intn(3)),
		Batch: uint32(1 + w.r.Intn(5)), LeaseMs: uint32(500 + w.r.Intn(3000)), SubMode: modes[w.r.Intn(len(modes))],
		SubFromMs: w.a.now + int64(w.r.Intn(4000)) - 2000, MaxPartitions: uint32(1 + w.r.Intn(3)), StartHint: uint32(w.r.Intn(8))}
	if w.r.Intn(3) == 0 {
		c.Partition = names[w.r.Intn(len(names))]
	}
	if w.r.Intn(3) == 0 {
		c.CommitOnDelivery = true
	} else {
		// One lease id per partition the pop may claim (a leased pop's
		// limit is how many ids it carries).
		for range c.MaxPartitions {
			c.LeaseIDs = append(c.LeaseIDs, w.a.nextID())
			w.b.nextID()
		}
	}
	r, err := wire.DecodePopResult(w.both(wire.KindPop, c.Encode(nil)))
	if err != nil {
		w.t.Fatal(err)
	}
	for _, cl := range r.Claims {
		if cl.LeaseID != (wire.ID{}) {
			w.leased = append(w.leased, leasedClaim{c.Group, cl})
		}
	}
}

// admin moves or drops a group's cursors: a seek (of one partition or
// all, to the end or a time), a position commit or a group deleted. A
// seek of all and a delete go in steps of one or two partitions half the
// time, the next step at a later turn.
func (w *twinWorkload) admin(names []string) {
	if p := w.pending; p != nil {
		w.stepped(p.kind, p.encode, p.next)
		return
	}
	steps := wire.Steps{}
	if w.r.Intn(2) == 0 {
		steps.Limit = uint32(1 + w.r.Intn(2))
	}
	group := fmt.Sprintf("g%d", w.r.Intn(3))
	switch w.r.Intn(3) {
	case 0:
		c := wire.SeekCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: group, ToEnd: w.r.Intn(2) == 0,
			TimestampMs: w.a.now - int64(w.r.Intn(5000))}
		if w.r.Intn(2) == 0 {
			c.Partition = names[w.r.Intn(len(names))]
			w.both(wire.KindSeek, c.Encode(nil))
			return
		}
		w.stepped(wire.KindSeek, c.EncodeStep, steps)
	case 1:
		c := wire.CommitPositionCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: group, Partition: names[w.r.Intn(len(names))],
			PartitionIndex: -1, Offset: uint64(w.r.Intn(6))}
		w.both(wire.KindCommitPosition, c.Encode(nil))
	default:
		c := wire.DeleteGroupCmd{Tenant: wire.DefaultTenant, Group: group, DeleteMetadata: w.r.Intn(2) == 0}
		if w.r.Intn(2) == 0 {
			c.Queue = "q"
		}
		w.stepped(wire.KindDeleteGroup, c.EncodeStep, steps)
	}
}

// ack acknowledges one message of a claim taken earlier (its lease may
// have expired since) with a random status.
func (w *twinWorkload) ack() {
	if len(w.leased) == 0 {
		return
	}
	i := w.r.Intn(len(w.leased))
	lc := w.leased[i]
	_, txns := w.a.payloads(lc.cl)
	if len(txns) == 0 {
		w.leased = append(w.leased[:i], w.leased[i+1:]...)
		return
	}
	statuses := []uint8{wire.AckCompleted, wire.AckCompleted, wire.AckFailed, wire.AckRetry, wire.AckDLQ}
	c := wire.AckCmd{Tenant: wire.DefaultTenant, Group: lc.group, Items: []wire.AckItem{{PartitionID: lc.cl.PartitionID,
		TxnID: []byte(txns[w.r.Intn(len(txns))]), LeaseID: lc.cl.LeaseID, Status: statuses[w.r.Intn(len(statuses))], Error: "e"}}}
	w.both(wire.KindAck, c.Encode(nil))
}
