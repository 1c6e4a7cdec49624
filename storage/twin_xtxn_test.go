package storage

import (
	"fmt"
	"slices"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// Cross-group HTTP transactions as a participant sees them, in a random
// twin workload (issue 32): parts prepared that acknowledge leased input
// messages and push to an output partition, then, before each part's
// resolve, whatever may come between: idle-partition cleanup ticks, seeks
// and group deletes of the input's group in steps (which wait at the
// cursors a part pins), single-partition seeks, direct acks and pops
// around the pins, the output queue deleted and created again, pushes
// taking the part's transaction ids, encryption turned on, time passing,
// restarts of one store and the plain random workload of restart_test.go;
// then commits and aborts. Both stores must answer alike and end with the
// same keys, and both must agree with a model: a committed part's ack and
// push are applied whatever came between (the result says so, op by op:
// the push stored but for the ids another push took, or gone with the
// queue it was prepared for), an aborted part changes nothing, and the
// input group's positions and the output partitions' records are the
// model's.
func TestTwinCrossGroupTransactions(t *testing.T) {
	eachSeed(t, 24, func(t *testing.T, seed int64) { newXTwin(t, seed).run(300) })
}

const (
	xtIn      = "in"
	xtOut     = "out"
	xtGroup   = "xg"
	xtInParts = 3
)

type xTwin struct {
	*twinWorkload
	in [xtInParts]*xtInput
	// outInc is the output queue's incarnation; out its partitions' stored
	// transaction ids, in order, by name (a name with none may be gone,
	// removed as idle).
	outInc       uint64
	outEncrypted bool
	out          map[string][]string
	claims       []*xtClaim // the input group's leases the model knows
	prepared     []*xtPart
	resolved     []*xtPart
	n            int // names drawn
	qnames       []string
}

// xtInput is an input partition and the input group's position in it.
type xtInput struct {
	name  string
	ids   []string // the messages' transaction ids, by offset
	pos   uint64
	known bool // false after a seek or delete moved it as the model does not follow
}

type xtClaim struct {
	cl     wire.Claim
	idx    int    // input partition
	msg    string // the leased message's transaction id, which its ack names
	pinned *xtPart
	gone   bool // acknowledged, or dropped by a seek or delete
}

// xtPart is a prepared part: its xid, the claims it acknowledges, the
// output partition (of incarnation inc) it pushes ids to.
type xtPart struct {
	xid     wire.ID
	claims  []*xtClaim
	outName string
	inc     uint64
	ids     []string
	prepare []byte // the prepare's body, sent again late
	commit  bool
	answer  []byte // the resolve's, which a repeat gets
}

func newXTwin(t *testing.T, seed int64) *xTwin {
	x := &xTwin{twinWorkload: newTwinWorkload(t, seed), out: map[string][]string{}}
	for i := range x.in {
		x.in[i] = &xtInput{name: fmt.Sprintf("i%d", i), known: true}
	}
	for i := range 5 {
		x.qnames = append(x.qnames, fmt.Sprintf("p%d", i))
	}
	for _, h := range []*harness{x.a, x.b} {
		h.alloc("q", x.qnames...)
		x.outInc = h.alloc(xtOut).Catalog.Inc
	}
	for i := range x.in {
		x.pushIn(i) // a partition never empty: the idle cleanup leaves it
	}
	return x
}

func (x *xTwin) run(steps int) {
	for range steps {
		switch op := x.r.Intn(100); {
		case op < 10:
			x.pushIn(x.r.Intn(xtInParts))
		case op < 22:
			x.popIn()
		case op < 27:
			x.ackIn()
		case op < 39:
			x.prepare()
		case op < 49:
			x.resolve()
		case op < 55:
			x.cleanTick()
		case op < 61:
			x.walk()
		case op < 63:
			x.seekOne()
		case op < 68:
			x.pushSameIDs()
		case op < 70:
			x.recreateOut()
		case op < 71:
			x.encryptOut()
		case op < 78:
			x.pop(x.qnames)
		case op < 81 && x.pending != nil:
			x.walk() // whoever's walk it is: the model forgets what it may move
		case op < 81:
			x.admin(x.qnames)
		case op < 83:
			x.both(wire.KindTick, nil)
		case op < 97:
			x.advance(int64(x.r.Intn(1500)))
		default:
			x.restartB()
		}
		x.check()
	}
	x.finishAll()
}

func (x *xTwin) name(prefix string) string {
	x.n++
	return fmt.Sprintf("%s%d", prefix, x.n)
}

// pushOp is a push of fresh transaction ids (or those given) to queue's
// partition, the harness's, built on both stores.
func (x *xTwin) pushOp(queue, partition string, ids ...string) []byte {
	return twinBody(x.twinWorkload, func(h *harness) []byte { return h.pushOp(queue, partition, ids...).Body })
}

// pushIn pushes one or two messages to input partition i.
func (x *xTwin) pushIn(i int) {
	in := x.in[i]
	ids := []string{x.name("m")}
	if x.r.Intn(2) == 0 {
		ids = append(ids, x.name("m"))
	}
	r := twinApply(x.twinWorkload, wire.KindPush, x.pushOp(xtIn, in.name, ids...), wire.DecodePushResult)
	if r.Code != wire.CodeOK || r.BaseOffset != uint64(len(in.ids)) || len(r.Dups) != 0 {
		x.failf("a push to %s answered %+v, want it stored at %d", in.name, r, len(in.ids))
	}
	in.ids = append(in.ids, ids...)
}

// live reports whether the model knows a claim's lease to hold: not
// acknowledged or dropped, and pinned or not expired.
func (x *xTwin) live(c *xtClaim) bool {
	return !c.gone && (c.pinned != nil || c.cl.LeaseExpiresMs > x.a.now)
}

func (x *xTwin) pinnedIn(i int) bool {
	return slices.ContainsFunc(x.claims, func(c *xtClaim) bool { return c.idx == i && !c.gone && c.pinned != nil })
}

// popIn takes a lease of one input message for the input group: never in
// a partition whose lease holds (pinned or not), always at the group's
// position.
func (x *xTwin) popIn() {
	c := wire.PopCmd{Tenant: wire.DefaultTenant, Queue: xtIn, Group: xtGroup, Batch: 1, LeaseMs: uint32(1000 + x.r.Intn(3000)),
		SubMode: wire.SubAll, LeaseIDs: []wire.ID{x.xid()}}
	if x.r.Intn(2) == 0 {
		c.Partition = x.in[x.r.Intn(xtInParts)].name
	}
	r := twinApply(x.twinWorkload, wire.KindPop, c.Encode(nil), wire.DecodePopResult)
	for _, cl := range r.Claims {
		i := slices.IndexFunc(x.in[:], func(in *xtInput) bool { return in.name == cl.Partition })
		if i < 0 || cl.To != cl.From+1 || cl.LeaseExpiresMs != x.a.now+int64(c.LeaseMs) {
			x.failf("an input pop answered %+v", cl)
		}
		in := x.in[i]
		for _, old := range x.claims {
			if old.idx == i && x.live(old) {
				x.failf("a pop leased %s, where the model's lease %+v holds (pinned %v)", in.name, old.cl, old.pinned != nil)
			}
			if old.idx == i {
				old.gone = true // expired, and taken over now
			}
		}
		if in.known && cl.From != in.pos {
			x.failf("a pop of %s started at %d, the group's position is %d", in.name, cl.From, in.pos)
		}
		in.pos, in.known = cl.From, true
		x.claims = append(x.claims, &xtClaim{cl: cl, idx: i, msg: in.ids[cl.From]})
	}
}

// ackIn acknowledges a leased input message directly: refused while a
// prepared part pins its cursor, applied while its lease holds.
func (x *xTwin) ackIn() {
	c := x.someClaim(func(c *xtClaim) bool { return !c.gone })
	if c == nil {
		return
	}
	a := wire.AckCmd{Tenant: wire.DefaultTenant, Group: xtGroup, Items: []wire.AckItem{{PartitionID: c.cl.PartitionID,
		TxnID: []byte(c.msg), LeaseID: c.cl.LeaseID, Status: wire.AckCompleted}}}
	r := twinApply(x.twinWorkload, wire.KindAck, a.Encode(nil), wire.DecodeAckResult)
	o := r.Items[0]
	switch {
	case c.pinned != nil:
		if o.Code != wire.CodeConflict {
			x.failf("an ack around a prepared part answered %+v", o)
		}
		return
	case x.live(c) && (o.Code != wire.CodeOK || !o.LeaseReleased):
		x.failf("an ack of a live lease answered %+v", o)
	}
	if o.Code == wire.CodeOK {
		x.acked(c)
	}
}

// acked notes an acknowledged claim: the group's position moves past it.
func (x *xTwin) acked(c *xtClaim) {
	in := x.in[c.idx]
	if in.known && in.pos != c.cl.From {
		x.failf("%s: the message at %d acknowledged, the group's position is %d", in.name, c.cl.From, in.pos)
	}
	in.pos, c.gone = c.cl.From+1, true
}

func (x *xTwin) someClaim(ok func(*xtClaim) bool) *xtClaim {
	var cs []*xtClaim
	for _, c := range x.claims {
		if ok(c) {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil
	}
	return cs[x.r.Intn(len(cs))]
}

// prepare prepares a part acknowledging one or two live leases (of
// different partitions) and pushing fresh ids to a new output partition,
// as the engine sends it (the key held, the incarnation named).
func (x *xTwin) prepare() {
	var cs []*xtClaim
	for range 1 + x.r.Intn(2) {
		c := x.someClaim(func(c *xtClaim) bool {
			return x.live(c) && c.pinned == nil && !slices.ContainsFunc(cs, func(o *xtClaim) bool { return o.idx == c.idx })
		})
		if c != nil {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return
	}
	p := &xtPart{xid: x.xid(), claims: cs, outName: x.name("o"), inc: x.outInc}
	for range 1 + x.r.Intn(2) {
		p.ids = append(p.ids, x.name("x"))
	}
	sub := wire.TxnCmd{Tenant: wire.DefaultTenant, ID: p.xid}
	for _, c := range cs {
		sub.RequiredLeases = append(sub.RequiredLeases, c.cl.LeaseID)
		sub.Ops = append(sub.Ops, ackOp(xtGroup, c.cl, c.msg, x.r.Intn(2) == 0))
	}
	push, err := wire.DecodePushCmd(x.pushOp(xtOut, p.outName, p.ids...))
	if err != nil {
		x.failf("push op: %v", err)
	}
	push.Flags |= wire.PushKeyHeld
	push.Inc = x.outInc
	sub.Ops = append(sub.Ops, wire.TxnOp{Kind: wire.TxnOpPush, Body: push.Encode(nil)})
	if _, ok := x.out[p.outName]; !ok {
		x.out[p.outName] = nil
	}
	c := wire.XPrepareCmd{ID: p.xid, Coord: 1, DeadlineMs: x.a.now + 5000, Sub: wire.Command{Kind: wire.KindTransaction, Body: sub.Encode(nil)}}
	p.prepare = c.Encode(nil)
	r := twinApply(x.twinWorkload, wire.KindXPrepare, p.prepare, wire.DecodeXResolveResult)
	want := wire.CodeOK
	if x.outEncrypted {
		want = wire.CodeSealRequired // unsealed records from a node holding the key
	}
	if r.Code != want {
		x.failf("a prepare of %s answered %+v, want %v", p.xid, r, want)
	}
	if r.Code != wire.CodeOK {
		return
	}
	if x.r.Intn(5) == 0 {
		if again := twinApply(x.twinWorkload, wire.KindXPrepare, p.prepare, wire.DecodeXResolveResult); again.Code != wire.CodeOK {
			x.failf("a repeated prepare answered %+v", again)
		}
	}
	for _, c := range cs {
		c.pinned = p
	}
	x.prepared = append(x.prepared, p)
}

// resolve commits or aborts a prepared part.
func (x *xTwin) resolve() {
	if p, ok := takeAny(x.twinWorkload, &x.prepared); ok {
		x.resolvePart(p, x.r.Intn(3) != 0)
	}
}

func (x *xTwin) resolvePart(p *xtPart, commit bool) {
	p.commit = commit
	c := wire.XResolveCmd{ID: p.xid, Commit: commit}
	p.answer = x.both(wire.KindXResolve, c.Encode(nil))
	r, err := wire.DecodeXResolveResult(p.answer)
	if err != nil {
		x.failf("resolve answer: %v", err)
	}
	for _, c := range p.claims {
		c.pinned = nil
	}
	x.resolved = append(x.resolved, p)
	if !commit {
		if r.Code != wire.CodeConflict {
			x.failf("an abort of %s answered %+v", p.xid, r)
		}
		return
	}
	res, err := wire.DecodeTxnResult(r.Sub)
	if r.Code != wire.CodeOK || err != nil || res.Code != wire.CodeOK || len(res.Ops) != len(p.claims)+1 {
		x.failf("a commit of %s answered %+v %+v %v: a committed part is always applied", p.xid, r, res, err)
	}
	for j, c := range p.claims {
		a, err := wire.DecodeAckResult(res.Ops[j])
		if err != nil || a.Items[0].Code != wire.CodeOK || !a.Items[0].LeaseReleased {
			x.failf("the committed ack of %+v answered %+v %v", c.cl, a, err)
		}
		x.acked(c)
	}
	push, err := wire.DecodePushResult(res.Ops[len(p.claims)])
	if err != nil {
		x.failf("the committed push's result: %v", err)
	}
	if p.inc != x.outInc {
		if push.Code != wire.CodeQueueNotFound {
			x.failf("the committed push to a queue deleted since answered %+v, want it gone with the queue", push)
		}
		return
	}
	stored := x.out[p.outName]
	if push.Code != wire.CodeOK || push.BaseOffset != uint64(len(stored)) {
		x.failf("the committed push to %s answered %+v, the model holds %v there", p.outName, push, stored)
	}
	for k, id := range p.ids {
		off, dup := push.Offset(k)
		switch at := slices.Index(stored, id); {
		case at >= 0 && (dup == nil || off != uint64(at)):
			x.failf("the committed push stored %s again (at %d), the model has it at %d", id, off, at)
		case at < 0 && dup != nil:
			x.failf("the committed push took %s for a duplicate at %d", id, off)
		}
	}
	x.out[p.outName] = x.stored(p.outName, p.ids)
}

// stored is what pushing ids to an output partition leaves there: the
// ids it did not hold yet appended.
func (x *xTwin) stored(name string, ids []string) []string {
	out := slices.Clone(x.out[name])
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// cleanTick passes time and ticks with an idle-partition cleanup age:
// partitions a part reserves stay, as every one holding a message.
func (x *xTwin) cleanTick() {
	x.advance(int64(x.r.Intn(3000)))
	c := wire.TickCmd{PartitionCleanupMs: int64(1000 + x.r.Intn(4000))}
	x.both(wire.KindTick, c.Encode(nil))
	for name, ids := range x.out {
		if len(ids) == 0 && !slices.ContainsFunc(x.prepared, func(p *xtPart) bool { return p.outName == name && p.inc == x.outInc }) {
			delete(x.out, name) // idle and empty: it may be gone
		}
	}
}

// walk proposes the next step of a seek or group delete walking the
// input group's cursors (or of the plain workload's walk): a step stops
// before a cursor a prepared part pins, which stays as it was.
func (x *xTwin) walk() {
	if x.pending == nil {
		steps := wire.Steps{Limit: uint32(1 + x.r.Intn(2))}
		if x.r.Intn(2) == 0 {
			c := wire.SeekCmd{Tenant: wire.DefaultTenant, Queue: xtIn, Group: xtGroup, ToEnd: x.r.Intn(2) == 0,
				TimestampMs: x.a.now - int64(x.r.Intn(20000))}
			x.pending = &pendingSteps{kind: wire.KindSeek, encode: c.EncodeStep, next: steps}
		} else {
			c := wire.DeleteGroupCmd{Tenant: wire.DefaultTenant, Group: xtGroup, DeleteMetadata: x.r.Intn(2) == 0}
			if x.r.Intn(2) == 0 {
				c.Queue = xtIn
			}
			x.pending = &pendingSteps{kind: wire.KindDeleteGroup, encode: c.EncodeStep, next: steps}
		}
	}
	before := x.pinnedPositions()
	p := x.pending
	x.stepped(p.kind, p.encode, p.next)
	if after := x.pinnedPositions(); fmt.Sprint(after) != fmt.Sprint(before) {
		x.failf("a step moved pinned cursors: %v, before %v", after, before)
	}
	x.forget(func(i int) bool { return !x.pinnedIn(i) })
}

// pinnedPositions are both stores' positions of the input group in the
// partitions a prepared part pins.
func (x *xTwin) pinnedPositions() []string {
	var out []string
	x.stores(func(name string, h *harness) {
		for i, in := range x.in {
			if x.pinnedIn(i) {
				pos, ok := x.position(h, in.name)
				out = append(out, fmt.Sprintf("%s %s %d %v", name, in.name, pos, ok))
			}
		}
	})
	return out
}

func (x *xTwin) position(h *harness, name string) (uint64, bool) {
	p, ok := h.s.PartitionByName(wire.DefaultTenant, xtIn, name)
	if !ok {
		x.failf("input partition %s is gone", name)
	}
	return h.s.GroupPosition(p, xtGroup)
}

// forget stops following the input group's position and leases in the
// partitions moved says a seek or delete may have changed.
func (x *xTwin) forget(moved func(i int) bool) {
	for i, in := range x.in {
		if !moved(i) {
			continue
		}
		in.known = false
		for _, c := range x.claims {
			if c.idx == i {
				c.gone = true
			}
		}
	}
}

// seekOne seeks the input group in one partition to its end: refused
// while a prepared part pins the cursor.
func (x *xTwin) seekOne() {
	i := x.r.Intn(xtInParts)
	c := wire.SeekCmd{Tenant: wire.DefaultTenant, Queue: xtIn, Group: xtGroup, Partition: x.in[i].name, ToEnd: true}
	r := twinApply(x.twinWorkload, wire.KindSeek, c.Encode(nil), wire.DecodeCountResult)
	if pinned := x.pinnedIn(i); (r.Code == wire.CodeConflict) != pinned {
		x.failf("a seek of %s (pinned %v) answered %+v", x.in[i].name, pinned, r)
	}
	if r.Code == wire.CodeOK {
		x.forget(func(j int) bool { return j == i })
		x.in[i].pos, x.in[i].known = uint64(len(x.in[i].ids)), true
	}
}

// pushSameIDs pushes, directly, one of a prepared (or resolved) part's
// transaction ids and a fresh one to its output partition.
func (x *xTwin) pushSameIDs() {
	ps := append(slices.Clone(x.prepared), x.resolved...)
	if len(ps) == 0 {
		return
	}
	p := ps[x.r.Intn(len(ps))]
	ids := []string{p.ids[x.r.Intn(len(p.ids))], x.name("d")}
	r := twinApply(x.twinWorkload, wire.KindPush, x.pushOp(xtOut, p.outName, ids...), wire.DecodePushResult)
	stored := x.out[p.outName]
	if r.Code != wire.CodeOK || r.BaseOffset != uint64(len(stored)) {
		x.failf("a push to %s answered %+v, the model holds %v there", p.outName, r, stored)
	}
	for k, id := range ids {
		if _, dup := r.Offset(k); (dup != nil) != slices.Contains(stored, id) {
			x.failf("a push of %s to %s answered %+v, the model holds %v there", id, p.outName, r, stored)
		}
	}
	x.out[p.outName] = x.stored(p.outName, ids)
}

// recreateOut deletes the output queue and creates it again: a new
// incarnation, with no partitions and no encryption.
func (x *xTwin) recreateOut() {
	del := wire.DeleteQueueCmd{Tenant: wire.DefaultTenant, Queue: xtOut}
	if r := twinApply(x.twinWorkload, wire.KindDeleteQueue, del.Encode(nil), wire.DecodeDeleteQueueResult); r.Code != wire.CodeOK {
		x.failf("a delete of the output queue answered %+v", r)
	}
	c := wire.AllocCmd{Tenant: wire.DefaultTenant, Queue: xtOut, Flags: wire.AllocCreate, Place: testPlace}
	r := twinApply(x.twinWorkload, wire.KindAlloc, c.Encode(nil), wire.DecodeAllocResult)
	if r.Code != wire.CodeOK || r.Catalog.Inc == x.outInc {
		x.failf("the output queue created again: %+v", r)
	}
	x.outInc, x.outEncrypted, x.out = r.Catalog.Inc, false, map[string][]string{}
}

func (x *xTwin) encryptOut() {
	cfg := wire.DefaultQueueConfig()
	cfg.EncryptionEnabled = true
	c := wire.ConfigureCmd{Place: testPlace, Tenant: wire.DefaultTenant, Queue: xtOut, Set: wire.OptEncryptionEnabled, Config: cfg}
	if r := twinApply(x.twinWorkload, wire.KindConfigure, c.Encode(nil), wire.DecodeConfigureResult); r.Code != wire.CodeOK {
		x.failf("encryption on for the output queue: %+v", r)
	}
	x.outEncrypted = true
}

// check compares both stores with the model: the input group's known
// positions and the output partitions' heads.
func (x *xTwin) check() {
	x.stores(func(name string, h *harness) {
		for _, in := range x.in {
			if pos, _ := x.position(h, in.name); in.known && pos != in.pos {
				x.failf("%s store: the input group's position in %s is %d, the model's %d", name, in.name, pos, in.pos)
			}
		}
		for out, ids := range x.out {
			p, ok := h.s.PartitionByName(wire.DefaultTenant, xtOut, out)
			if (ok || len(ids) > 0) && p.HighWatermark() != uint64(len(ids)) {
				x.failf("%s store: output partition %s holds %d messages (found %v), the model %v", name, out, p.HighWatermark(), ok, ids)
			}
		}
	})
}

// finishAll resolves what is prepared, repeats resolves and prepares
// (answered as before, and refused), walks what is walking to its end,
// then reads the output partitions' records and compares the stores'
// keys.
func (x *xTwin) finishAll() {
	for _, p := range x.prepared {
		x.resolvePart(p, x.r.Intn(3) != 0)
	}
	x.prepared = nil
	for _, p := range x.resolved {
		// Answered as the first was: the code, and a commit's result (an
		// abort's repeat carries the remembered result, its code).
		c := wire.XResolveCmd{ID: p.xid, Commit: p.commit}
		again := twinApply(x.twinWorkload, wire.KindXResolve, c.Encode(nil), wire.DecodeXResolveResult)
		if first, _ := wire.DecodeXResolveResult(p.answer); again.Code != first.Code || (p.commit && string(again.Sub) != string(first.Sub)) {
			x.failf("a repeated resolve of %s answered %+v, the first %+v", p.xid, again, first)
		}
		if r := twinApply(x.twinWorkload, wire.KindXPrepare, p.prepare, wire.DecodeXResolveResult); r.Code != wire.CodeConflict {
			x.failf("a prepare of %s after its resolve answered %+v", p.xid, r)
		}
	}
	for n := 0; x.pending != nil; n++ {
		if n > 100 {
			x.failf("a walk did not end once nothing was pinned")
		}
		x.walk()
	}
	x.check()
	x.stores(func(name string, h *harness) {
		for out, ids := range x.out {
			p, ok := h.s.PartitionByName(wire.DefaultTenant, xtOut, out)
			if !ok {
				continue
			}
			var got []string
			if err := h.s.ReadRange(p, 0, p.HighWatermark(), func(_ uint64, _ int64, body []byte) bool {
				rec, err := wire.ParseRecord(body)
				if err != nil {
					x.failf("%s store: a record of %s: %v", name, out, err)
				}
				got = append(got, string(rec.TxnID))
				return true
			}); err != nil || !slices.Equal(got, ids) {
				x.failf("%s store: output partition %s holds %v (%v), the model %v", name, out, got, err, ids)
			}
		}
	})
	x.sameKeys()
}

// A queue's home that removed its last partitions as idle, then restarted
// by reading its store (no load image, as after a crash), must allocate a
// name again where a replica that kept running does: at a new index, never
// one it removed (a stale directory entry names that index). It reused the
// removed index, so replicas diverged: found by the final key comparison
// of TestTwinCrossGroupTransactions, seed 1, when its restarts walked too.
// The home now keeps the directory's length once its last entry goes.
func TestARemovedPartitionIndexIsNotReusedAfterAWalkedRestart(t *testing.T) {
	kept, walked := newHarness(t), newHarness(t)
	for _, h := range []*harness{kept, walked} {
		h.alloc("q", "a", "b")
		h.now += 2 * testCleanupMs
		h.cleanTick(testCleanupMs) // both never pushed: removed
	}
	walked.restart(true)
	k, w := kept.alloc("q", "b").Parts[0].Index, walked.alloc("q", "b").Parts[0].Index
	if k != 2 || w != k {
		t.Fatalf("b allocated again at index %d by the store kept running, %d by the one restarted by a walk; want 2, a new index", k, w)
	}
}
