package storage

import (
	"bytes"
	"slices"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// Cross-group transactions (wire/xtxn.go, docs/placement.md): this group as
// a participant holds prepared parts, pinning what they touch until they
// are resolved; as a coordinator it holds decisions.
//
// A prepared part pins the consumer cursors its acks and required leases
// name and the KV keys its operations name: until it is resolved, no other
// ack, pop or KV write can change what its check saw (they are refused or
// skip the cursor), a seek or group delete waits for it, and a pinned
// lease does not expire. It reserves the partitions its pushes and
// positions name, which the idle-partition cleanup leaves alone. So its
// commit, whenever the decision arrives, applies what the check allowed.
// What it cannot hold off is applied as if the commit came first
// (commitPart): a push whose queue was deleted since goes with it, one
// whose transaction id another push took is that push's duplicate, one
// made before encryption was turned on is stored as it was accepted.

const (
	tagXPrep     = 'P' // xid → prepared part (participant)
	tagXDecision = 'J' // xid → decision (coordinator)
)

// xAbortKeepMs is how long an abort decision is kept: a participant that
// asks later finds none and records an abort again, which is the same
// answer. Commit decisions are kept until every participant resolved.
const xAbortKeepMs = 15 * 60 * 1000

type xPrepared struct {
	coord      uint16
	deadlineMs int64
	sub        wire.Command
	// reserved are the partitions the part pushes to or sets positions in,
	// found at its prepare (stored as an optional tail: parts prepared by
	// earlier builds reserve none).
	reserved []uint64
	pins     []pinRef
}

type xDecision struct {
	commit       bool
	participants []uint16
	decidedMs    int64
}

// pinRef is one thing a prepared part pins: a cursor (pid, group), a KV
// key or (part) a partition it reserves.
type pinRef struct {
	cursor pinKey
	kv     string
	part   uint64
}

type pinKey struct {
	pid   uint64
	group string
}

// pins are what prepared parts hold, by owner transaction; parts counts
// the parts reserving each partition (several may).
type pins struct {
	cursors map[pinKey]wire.ID
	keys    map[string]wire.ID
	parts   map[uint64]int
}

func (p *pins) init() {
	p.cursors = map[pinKey]wire.ID{}
	p.keys = map[string]wire.ID{}
	p.parts = map[uint64]int{}
}

func (p *pins) add(xid wire.ID, refs []pinRef) {
	for _, r := range refs {
		switch {
		case r.part != 0:
			p.parts[r.part]++
		case r.kv != "":
			p.keys[r.kv] = xid
		default:
			p.cursors[r.cursor] = xid
		}
	}
}

func (p *pins) remove(xid wire.ID, refs []pinRef) {
	for _, r := range refs {
		switch {
		case r.part != 0:
			if p.parts[r.part]--; p.parts[r.part] <= 0 {
				delete(p.parts, r.part)
			}
		case r.kv != "":
			if p.keys[r.kv] == xid {
				delete(p.keys, r.kv)
			}
		default:
			if p.cursors[r.cursor] == xid {
				delete(p.cursors, r.cursor)
			}
		}
	}
}

// partReserved reports whether a prepared part pushes to or sets a
// position in partition pid.
func (s *Store) partReserved(pid uint64) bool { return s.pinned.parts[pid] > 0 }

// cursorPinned reports whether another transaction than the one being
// applied pins the group's cursor in partition pid.
func (s *Store) cursorPinned(ctx *applyCtx, pid uint64, group string) bool {
	owner, ok := s.pinned.cursors[pinKey{pid, group}]
	return ok && (ctx == nil || owner != ctx.xid)
}

// anyPin reports whether any prepared transaction pins the cursor.
func (s *Store) anyPin(pid uint64, group string) bool {
	_, ok := s.pinned.cursors[pinKey{pid, group}]
	return ok
}

// cursorOwnPin reports whether the transaction being applied pins it.
func (s *Store) cursorOwnPin(ctx *applyCtx, pid uint64, group string) bool {
	owner, ok := s.pinned.cursors[pinKey{pid, group}]
	return ok && !ctx.xid.IsZero() && owner == ctx.xid
}

// keyPinned reports whether another transaction pins a KV key.
func (s *Store) keyPinned(ctx *applyCtx, k string) bool {
	owner, ok := s.pinned.keys[k]
	return ok && owner != ctx.xid
}

func (p *xPrepared) encode() []byte {
	w := wire.Writer{}
	w.Uvarint(uint64(p.coord))
	w.Varint(p.deadlineMs)
	w.U8(uint8(p.sub.Kind))
	w.Bytes(p.sub.Body)
	if len(p.reserved) > 0 {
		w.Uvarint(uint64(len(p.reserved)))
		for _, pid := range p.reserved {
			w.Uvarint(pid)
		}
	}
	return w.B
}

func decodeXPrepared(b []byte) (*xPrepared, error) {
	r := wire.NewReader(b)
	p := &xPrepared{coord: uint16(r.Uvarint()), deadlineMs: r.Varint()}
	p.sub.Kind = wire.Kind(r.U8())
	p.sub.Body = append([]byte(nil), r.Bytes()...)
	if r.Len() > 0 {
		for range r.Count(1<<20, 1) {
			p.reserved = append(p.reserved, r.Uvarint())
		}
	}
	return p, r.Done()
}

func (d *xDecision) encode() []byte {
	w := wire.Writer{}
	w.Bool(d.commit)
	w.Uvarint(uint64(len(d.participants)))
	for _, g := range d.participants {
		w.Uvarint(uint64(g))
	}
	w.Varint(d.decidedMs)
	return w.B
}

func decodeXDecision(b []byte) (xDecision, error) {
	r := wire.NewReader(b)
	d := xDecision{commit: r.Bool()}
	n := r.Count(wire.MaxGroups, 1)
	for range n {
		d.participants = append(d.participants, uint16(r.Uvarint()))
	}
	d.decidedMs = r.Varint()
	return d, r.Done()
}

func xPrepKey(id wire.ID) []byte     { return append([]byte{tagXPrep}, id[:]...) }
func xDecisionKey(id wire.ID) []byte { return append([]byte{tagXDecision}, id[:]...) }

// partsOf lists the partitions a part's pushes and positions name, as its
// prepare finds them (the check found every one).
func (s *Store) partsOf(ctx *applyCtx, sub wire.Command) []uint64 {
	if sub.Kind != wire.KindTransaction {
		return nil
	}
	c, err := wire.DecodeTxnCmd(sub.Body)
	if err != nil {
		return nil
	}
	ops, fail := decodeTxnOps(&c)
	if fail.Code != wire.CodeOK {
		return nil
	}
	var out []uint64
	for i := range ops {
		var p *partState
		switch ops[i].kind {
		case wire.TxnOpPush:
			if q := s.queue(c.Tenant, ops[i].push.Queue); q != nil {
				p, _ = s.pushTarget(ctx, q, &ops[i].push)
			}
		case wire.TxnOpPosition:
			if q := s.queue(c.Tenant, ops[i].pos.Queue); q != nil {
				p = s.partNamed(ctx, q, ops[i].pos.Partition)
			}
		}
		if p != nil && !slices.Contains(out, p.id) {
			out = append(out, p.id)
		}
	}
	return out
}

// pinsOf lists what a prepared part touches.
func (s *Store) pinsOf(prep *xPrepared) []pinRef {
	var out []pinRef
	for _, pid := range prep.reserved {
		out = append(out, pinRef{part: pid})
	}
	sub := prep.sub
	switch sub.Kind {
	case wire.KindTransaction:
		c, err := wire.DecodeTxnCmd(sub.Body)
		if err != nil {
			return nil
		}
		for _, id := range c.RequiredLeases {
			s.leaseHolders(id, func(ref leaseRef) bool { // each partition of a shared lease
				out = append(out, pinRef{cursor: pinKey{ref.part.id, ref.group}})
				return true
			})
		}
		ops, fail := decodeTxnOps(&c)
		if fail.Code != wire.CodeOK {
			return out
		}
		for i := range ops {
			switch ops[i].kind {
			case wire.TxnOpAck:
				for _, it := range ops[i].ack.Items {
					out = append(out, pinRef{cursor: pinKey{it.PartitionID, ops[i].ack.Group}})
				}
			case wire.TxnOpStreamAck:
				out = append(out, pinRef{cursor: pinKey{ops[i].sack.PartitionID, ops[i].sack.Group}})
			case wire.TxnOpKV:
				for _, op := range ops[i].kv.Ops {
					out = append(out, pinRef{kv: string(kvKey(c.Tenant, op.NS, op.Key))})
					for _, k := range op.Keys {
						out = append(out, pinRef{kv: string(kvKey(c.Tenant, op.NS, k))})
					}
				}
			}
		}
	}
	return out
}

// checkPart checks a part without changing anything: nil result bytes and
// OK when it can be applied, else the refusal to answer.
func (s *Store) checkPart(ctx *applyCtx, sub wire.Command) (wire.Code, []byte) {
	switch sub.Kind {
	case wire.KindTransaction:
		c, err := wire.DecodeTxnCmd(sub.Body)
		if err != nil {
			return wire.CodeBadRequest, nil
		}
		if r := s.checkTransaction(ctx, &c); r.Code != wire.CodeOK {
			return r.Code, r.Encode(nil)
		}
		return wire.CodeOK, nil
	}
	return wire.CodeBadRequest, nil
}

// commitPart applies a part, answering its result (ctx.xid is the part's
// transaction).
func (s *Store) commitPart(ctx *applyCtx, sub wire.Command) []byte {
	switch sub.Kind {
	case wire.KindTransaction:
		c, err := wire.DecodeTxnCmd(sub.Body)
		if err != nil {
			return nil
		}
		r := s.runTransactionAs(ctx, &c, s.at(wire.FormatV2))
		if r.Code != wire.CodeOK {
			s.log.Error("storage: a committed transaction's part could not be applied", "transaction", c.ID.String(), "code", r.Code)
		}
		return r.Encode(nil)
	case wire.KindKafkaStage:
		s.commitKafkaPart(ctx, ctx.xid, sub)
		return wire.CodeResult{Code: wire.CodeOK}.Encode(nil)
	}
	return nil
}

// abortPart drops what an aborted part staged and, for a Kafka part, marks
// its batches aborted.
func (s *Store) abortPart(ctx *applyCtx, sub wire.Command) {
	if sub.Kind == wire.KindKafkaStage {
		s.abortKafkaPart(ctx, ctx.xid, sub)
	}
}

// applyXPrepare checks a participant's part and, when it can be applied,
// records it and pins what it touches. A prepare repeated (a retried
// proposal) answers as the first did; one arriving after the part was
// resolved is refused.
func (s *Store) applyXPrepare(ctx *applyCtx, c *wire.XPrepareCmd) wire.XResolveResult {
	if _, ok := s.xprep[c.ID]; ok {
		return wire.XResolveResult{Code: wire.CodeOK}
	}
	if _, done := ctx.get(txnDoneKey(c.ID)); done {
		return wire.XResolveResult{Code: wire.CodeConflict}
	}
	if code, refusal := s.checkPart(ctx, c.Sub); code != wire.CodeOK {
		return wire.XResolveResult{Code: code, Sub: refusal}
	}
	p := &xPrepared{coord: c.Coord, deadlineMs: c.DeadlineMs, sub: wire.Command{Kind: c.Sub.Kind, Body: append([]byte(nil), c.Sub.Body...)}}
	if s.at(wire.FormatV2) {
		p.reserved = s.partsOf(ctx, p.sub)
	}
	p.pins = s.pinsOf(p)
	s.xprep[c.ID] = p
	s.pinned.add(c.ID, p.pins)
	ctx.set(xPrepKey(c.ID), p.encode())
	return wire.XResolveResult{Code: wire.CodeOK}
}

// applyXResolve ends a prepared part. Its result is remembered for the
// transaction window, so a resolve repeated answers the same.
func (s *Store) applyXResolve(ctx *applyCtx, c *wire.XResolveCmd) wire.XResolveResult {
	p := s.xprep[c.ID]
	if p == nil {
		if v, ok := ctx.get(txnDoneKey(c.ID)); ok {
			r, _ := wire.DecodeTxnResult(v)
			return wire.XResolveResult{Code: r.Code, Sub: v}
		}
		// Nothing of it here, yet: remember the outcome anyway, so a
		// prepare or a staged piece of it arriving late is refused rather
		// than left behind.
		code := wire.CodeOK
		if !c.Commit {
			code = wire.CodeConflict
		}
		s.rememberTxn(ctx, c.ID, wire.TxnResult{Code: code, FailedLease: -1, FailedOp: -1, FailedItem: -1})
		return wire.XResolveResult{Code: wire.CodeNotFound}
	}
	ctx.xid = c.ID
	defer func() { ctx.xid = wire.ID{} }()
	var res wire.XResolveResult
	if c.Commit {
		res = wire.XResolveResult{Code: wire.CodeOK, Sub: s.commitPart(ctx, p.sub)}
	} else {
		s.abortPart(ctx, p.sub)
		res = wire.XResolveResult{Code: wire.CodeConflict}
	}
	s.pinned.remove(c.ID, p.pins)
	delete(s.xprep, c.ID)
	ctx.del(xPrepKey(c.ID))
	// The remembered result doubles as the tombstone that refuses a late
	// prepare of the same transaction.
	done := wire.TxnResult{Code: res.Code, FailedLease: -1, FailedOp: -1, FailedItem: -1}
	if r, err := wire.DecodeTxnResult(res.Sub); err == nil && p.sub.Kind == wire.KindTransaction {
		done = r
	}
	s.rememberTxn(ctx, c.ID, done)
	return res
}

// applyXDecide records a transaction's decision at its coordinator, first
// writer wins. A commit applies the coordinator's own part in the same
// entry and is recorded only if the part applies; otherwise the decision
// is abort.
func (s *Store) applyXDecide(ctx *applyCtx, c *wire.XDecideCmd) wire.XDecideResult {
	if v, ok := ctx.get(xDecisionKey(c.ID)); ok {
		d, err := decodeXDecision(v)
		if err != nil {
			return wire.XDecideResult{Code: wire.CodeBadRequest}
		}
		res := wire.XDecideResult{Code: wire.CodeOK, Commit: d.commit}
		if own, ok := ctx.get(txnDoneKey(c.ID)); ok {
			res.Own = own
		}
		if c.Own.Kind == wire.KindKafkaTxnEnd {
			// The transactional id's state agrees with the decision in
			// force: a retried end answers as the first did (applyTxnEnd
			// is idempotent), and an end arriving after an abort a
			// participant recorded (it gave up waiting) ends it aborted.
			if end, err := wire.DecodeTxnEndCmd(c.Own.Body); err == nil {
				end.Commit = d.commit
				res.Own = s.applyTxnEnd(ctx, &end).Encode(nil)
			}
		}
		return res
	}
	d := xDecision{commit: c.Commit, participants: c.Participants, decidedMs: ctx.nowMs}
	res := wire.XDecideResult{Code: wire.CodeOK}
	// A Kafka EndTxn is applied whichever way it ends: it is the
	// transactional id's state, which must agree with the decision.
	if c.Own.Kind != 0 && (c.Commit || c.Own.Kind == wire.KindKafkaTxnEnd) {
		ctx.xid = c.ID
		var ok bool
		ok, res.Own = s.applyOwnPart(ctx, c.Own)
		d.commit = c.Commit && ok
		ctx.xid = wire.ID{}
	}
	res.Commit = d.commit
	ctx.set(xDecisionKey(c.ID), d.encode())
	if !d.commit {
		s.xAborts = true
	}
	return res
}

// applyOwnPart applies the coordinator's own part: an HTTP transaction's
// share (checked, then applied whole or not at all) or a Kafka EndTxn
// (which records the transactional id's state too).
func (s *Store) applyOwnPart(ctx *applyCtx, own wire.Command) (bool, []byte) {
	switch own.Kind {
	case wire.KindTransaction:
		c, err := wire.DecodeTxnCmd(own.Body)
		if err != nil {
			return false, nil
		}
		r := s.runTransaction(ctx, &c)
		if r.Code == wire.CodeOK {
			s.rememberTxn(ctx, c.ID, r)
		}
		return r.Code == wire.CodeOK, r.Encode(nil)
	case wire.KindKafkaTxnEnd:
		c, err := wire.DecodeTxnEndCmd(own.Body)
		if err != nil {
			return false, nil
		}
		r := s.applyTxnEnd(ctx, &c)
		return r.Code == wire.CodeOK, r.Encode(nil)
	}
	return false, nil
}

// applyXForget drops decisions every participant resolved.
func (s *Store) applyXForget(ctx *applyCtx, c *wire.XForgetCmd) wire.CodeResult {
	for _, id := range c.IDs {
		ctx.del(xDecisionKey(id))
	}
	return wire.CodeResult{Code: wire.CodeOK}
}

// loadXTxn rebuilds the prepared parts and their pins.
func (s *Store) loadXTxn() error {
	s.xprep = map[wire.ID]*xPrepared{}
	err := s.scan([]byte{tagXPrep}, func(k, v []byte) error {
		var id wire.ID
		copy(id[:], k[1:])
		p, err := decodeXPrepared(v)
		if err != nil {
			return err
		}
		s.xprep[id] = p
		return nil
	})
	if err != nil {
		return err
	}
	s.repin()
	s.xAborts = false
	return s.scan([]byte{tagXDecision}, func(k, v []byte) error {
		if d, err := decodeXDecision(v); err == nil && !d.commit {
			s.xAborts = true
		}
		return nil
	})
}

// repin makes the prepared parts' pins, in id order. Load calls it twice:
// from loadXTxn, before the partitions (the partition cache asks which
// cursors are pinned), when the pins of acks and keys are all it can make,
// and again once the partitions are read, since a part names the leases it
// requires by id and only the partitions' cursors say whose those are. A
// leased cursor never leaves memory, so no partition was let go for want
// of the pins the second call adds.
func (s *Store) repin() {
	ids := make([]wire.ID, 0, len(s.xprep))
	for id := range s.xprep {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b wire.ID) int { return bytes.Compare(a[:], b[:]) })
	s.pinned.init()
	for _, id := range ids {
		p := s.xprep[id]
		p.pins = s.pinsOf(p)
		s.pinned.add(id, p.pins)
	}
}

// PreparedPart is a participant's part still waiting for its decision.
type PreparedPart struct {
	ID         wire.ID
	Coord      int
	DeadlineMs int64
}

// PreparedParts lists this group's prepared parts.
func (s *Store) PreparedParts() []PreparedPart {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]PreparedPart, 0, len(s.xprep))
	for id, p := range s.xprep {
		out = append(out, PreparedPart{ID: id, Coord: int(p.coord), DeadlineMs: p.deadlineMs})
	}
	return out
}

// Decision is a transaction's decision as this coordinator recorded it.
type Decision struct {
	ID           wire.ID
	Commit       bool
	Participants []int
	DecidedMs    int64
}

// XDecision reads a transaction's decision here.
func (s *Store) XDecision(id wire.ID) (Decision, bool) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return Decision{}, false
	}
	v, closer, err := s.db.Get(xDecisionKey(id))
	if err != nil {
		return Decision{}, false
	}
	defer closer.Close()
	d, err := decodeXDecision(v)
	if err != nil {
		return Decision{}, false
	}
	return decisionView(id, d), true
}

func decisionView(id wire.ID, d xDecision) Decision {
	out := Decision{ID: id, Commit: d.commit, DecidedMs: d.decidedMs}
	for _, g := range d.participants {
		out.Participants = append(out.Participants, int(g))
	}
	return out
}

// CommitDecisions lists up to limit commit decisions recorded before
// beforeMs, for the coordinator to make sure every participant resolved.
func (s *Store) CommitDecisions(beforeMs int64, limit int) []Decision {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return nil
	}
	lower := []byte{tagXDecision}
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	defer it.Close()
	var out []Decision
	for it.First(); it.Valid() && len(out) < limit; it.Next() {
		d, err := decodeXDecision(it.Value())
		if err != nil || !d.commit || d.decidedMs >= beforeMs {
			continue
		}
		var id wire.ID
		copy(id[:], it.Key()[1:])
		out = append(out, decisionView(id, d))
	}
	return out
}

// xAbortSweeper drops abort decisions older than xAbortKeepMs.
type xAbortSweeper struct{}

func (xAbortSweeper) name() string { return "xaborts" }

func (x xAbortSweeper) due(s *Store, nowMs int64) bool {
	return s.xAborts && s.sweepDue(x.name(), nowMs, txnDoneIntervalMs)
}

func (x xAbortSweeper) sweep(s *Store, ctx *applyCtx) {
	st := s.sweep(x.name())
	if !s.xAborts || !st.passDue(ctx.nowMs, txnDoneIntervalMs) {
		return
	}
	st.lastPassMs = ctx.nowMs
	ctx.saveSweep(x.name(), st)
	lower := []byte{tagXDecision}
	it := ctx.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	var doomed [][]byte
	left := false
	for it.First(); it.Valid(); it.Next() {
		d, err := decodeXDecision(it.Value())
		if err != nil || d.commit {
			continue
		}
		if ctx.nowMs-d.decidedMs > xAbortKeepMs {
			doomed = append(doomed, append([]byte(nil), it.Key()...))
		} else {
			left = true
		}
	}
	ctx.closeIter(it)
	for _, k := range doomed {
		ctx.del(k)
	}
	s.xAborts = left
}
