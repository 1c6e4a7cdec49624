package storage

import (
	"strconv"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// A committed transaction's result is kept this long (spec
// QUEEN_RAFT_TXN_WINDOW_MIN_S, 900 s), far beyond any proposal retry, so a
// retried entry is answered with what the first one committed instead of
// being checked again against the state it changed.
const (
	txnDoneWindowMs   = 900_000
	txnDoneIntervalMs = 60_000
)

// txnOp is a decoded transaction operation.
type txnOp struct {
	kind   uint8
	push   wire.PushCmd
	heads  []pushHead
	ack    wire.AckCmd
	pos    wire.PositionOp
	kv     wire.KVCmd
	kvRes  wire.KVResult // computed by the check, committed by the apply
	timers wire.TimersCmd
	sack   wire.StreamAckOp // TxnOpStreamAck (apply_streams.go)
}

// applyTransaction commits every operation of c, in order, or none: all of
// them are checked against the state first, and the first that could not
// be applied rolls the whole transaction back before anything changed.
func (s *Store) applyTransaction(ctx *applyCtx, c *wire.TxnCmd) wire.TxnResult {
	if ctx.retry {
		if r, ok := s.txnDone(ctx, c.ID); ok {
			return r
		}
	}
	res := s.runTransaction(ctx, c)
	if res.Code == wire.CodeOK {
		s.rememberTxn(ctx, c.ID, res)
	}
	return res
}

// txnDone is the result transaction id committed with, if it did within the
// window.
func (s *Store) txnDone(ctx *applyCtx, id wire.ID) (wire.TxnResult, bool) {
	if v, ok := ctx.get(txnDoneKey(id)); ok {
		if r, err := wire.DecodeTxnResult(v); err == nil {
			return r, true
		}
	}
	return wire.TxnResult{}, false
}

// rememberTxn keeps a transaction's result for the window.
func (s *Store) rememberTxn(ctx *applyCtx, id wire.ID, res wire.TxnResult) {
	ctx.set(txnDoneKey(id), res.Encode(nil))
	s.hasTxnDone = true
}

// runTransaction checks c and, when every operation can be applied,
// applies them all.
func (s *Store) runTransaction(ctx *applyCtx, c *wire.TxnCmd) wire.TxnResult {
	return s.runTransactionAs(ctx, c, false)
}

// runTransactionAs is runTransaction; committed says c is a prepared part
// whose transaction is decided commit, which must be applied: what changed
// since its prepare checked it does not roll it back. The pins and
// reservations kept everything else as the check saw it; what they could
// not hold off (xtxn.go) each operation applies as it can, as if the
// commit had come first, and answers in its own result.
func (s *Store) runTransactionAs(ctx *applyCtx, c *wire.TxnCmd, committed bool) wire.TxnResult {
	ops, fail := decodeTxnOps(c)
	if fail.Code != wire.CodeOK {
		return fail
	}
	kv, fail := s.checkTxn(ctx, c, ops)
	if fail.Code != wire.CodeOK {
		if !committed {
			return fail
		}
		s.log.Warn("storage: a committed transaction's part meets a change made since its prepare; applied as if it came first",
			"transaction", c.ID.String(), "op", fail.FailedOp, "code", fail.Code)
		kv = s.kvOfCommitted(ctx, c, ops)
	}
	res := wire.TxnResult{Code: wire.CodeOK, FailedLease: -1, FailedOp: -1, FailedItem: -1, Ops: make([][]byte, len(ops))}
	for i := range ops {
		op := &ops[i]
		switch op.kind {
		case wire.TxnOpPush:
			if committed {
				// Accepted at its prepare, and kept since in the prepared
				// part as sent: encryption turned on after it does not
				// refuse it, as it does not reach records pushed before.
				op.push.Flags &^= wire.PushKeyHeld
			}
			res.Ops[i] = s.applyPush(ctx, &op.push).Encode(nil)
		case wire.TxnOpAck:
			res.Ops[i] = s.applyAck(ctx, &op.ack).Encode(nil)
		case wire.TxnOpPosition:
			res.Ops[i] = s.applyPosition(ctx, c.Tenant, &op.pos).Encode(nil)
		case wire.TxnOpKV:
			res.Ops[i] = op.kvRes.Encode(nil)
		case wire.TxnOpTimers:
			res.Ops[i] = s.applyTimers(ctx, &op.timers).Encode(nil)
		case wire.TxnOpStreamAck:
			res.Ops[i] = s.applyStreamAck(ctx, c.Tenant, &op.sack).Encode(nil)
		}
	}
	// The KV operations were staged by the check, against the state the
	// transaction started from (they touch no queue state, so the other
	// operations cannot change what they see).
	if kv != nil {
		kv.commit()
	}
	return res
}

// kvOfCommitted stages every KV operation of a committed part whose check
// stopped early: the keys are pinned, so each answers as at the prepare.
func (s *Store) kvOfCommitted(ctx *applyCtx, c *wire.TxnCmd, ops []txnOp) *kvTxn {
	var kv *kvTxn
	for i := range ops {
		op := &ops[i]
		if op.kind != wire.TxnOpKV {
			continue
		}
		if kv == nil {
			kv = s.newKVTxn(ctx, c.Tenant)
		}
		op.kvRes = wire.KVResult{Code: wire.CodeOK, OK: true, FailedIndex: -1, Ops: make([]wire.KVOpResult, len(op.kv.Ops))}
		for j := range op.kv.Ops {
			op.kvRes.Ops[j] = kv.apply(&op.kv.Ops[j])
		}
	}
	return kv
}

// checkTransaction checks c without changing anything (a participant's
// prepare), answering OK or the first operation that could not be applied.
func (s *Store) checkTransaction(ctx *applyCtx, c *wire.TxnCmd) wire.TxnResult {
	ops, fail := decodeTxnOps(c)
	if fail.Code != wire.CodeOK {
		return fail
	}
	_, fail = s.checkTxn(ctx, c, ops)
	return fail
}

// decodeTxnOps decodes every operation; one that does not decode, names
// another tenant or is of an unknown kind refuses the transaction.
func decodeTxnOps(c *wire.TxnCmd) ([]txnOp, wire.TxnResult) {
	ops := make([]txnOp, len(c.Ops))
	for i, raw := range c.Ops {
		op := &ops[i]
		op.kind = raw.Kind
		var err error
		tenant := c.Tenant
		switch raw.Kind {
		case wire.TxnOpPush:
			if op.push, err = wire.DecodePushCmd(raw.Body); err == nil {
				tenant = op.push.Tenant
				var ok bool
				if op.heads, ok = pushHeads(&op.push); !ok {
					err = wire.ErrMalformed
				}
			}
		case wire.TxnOpAck:
			op.ack, err = wire.DecodeAckCmd(raw.Body)
			tenant = op.ack.Tenant
		case wire.TxnOpPosition:
			op.pos, err = wire.DecodePositionOp(raw.Body)
		case wire.TxnOpKV:
			op.kv, err = wire.DecodeKVCmd(raw.Body)
			tenant = op.kv.Tenant
		case wire.TxnOpTimers:
			op.timers, err = wire.DecodeTimersCmd(raw.Body)
			tenant = op.timers.Tenant
		case wire.TxnOpStreamAck:
			op.sack, err = wire.DecodeStreamAckOp(raw.Body)
			tenant = op.sack.Tenant
		default:
			err = wire.ErrMalformed
		}
		if err != nil || tenant != c.Tenant {
			return nil, wire.TxnFailure(wire.CodeBadRequest, -1, i, -1)
		}
	}
	return ops, wire.TxnResult{Code: wire.CodeOK}
}

// txnCheck tracks what the operations checked so far will have done, so
// later ones are checked against it: transaction ids earlier pushes store,
// messages earlier acks acknowledge.
type txnCheck struct {
	txnIDs map[string]bool
	acked  map[ackedKey]bool
}

type ackedKey struct {
	pid   uint64
	group string
	off   uint64
}

// checkTxn reports the first required lease or operation that could not
// be applied, or OK. It changes nothing: KV operations run against staged
// state, returned for the apply to commit.
func (s *Store) checkTxn(ctx *applyCtx, c *wire.TxnCmd, ops []txnOp) (*kvTxn, wire.TxnResult) {
	for i, id := range c.RequiredLeases {
		if !s.leaseLive(ctx, c.Tenant, id) {
			return nil, wire.TxnFailure(wire.CodeLeaseNotFound, i, -1, -1)
		}
	}
	var kv *kvTxn
	chk := txnCheck{txnIDs: map[string]bool{}, acked: map[ackedKey]bool{}}
	for i := range ops {
		op := &ops[i]
		code, item := wire.CodeOK, -1
		switch op.kind {
		case wire.TxnOpPush:
			code, item = s.checkTxnPush(ctx, c.Tenant, op, &chk)
		case wire.TxnOpAck:
			for j := range op.ack.Items {
				t := s.resolveAck(ctx, c.Tenant, op.ack.Group, &op.ack.Items[j])
				if t.code == wire.CodeOK {
					k := ackedKey{t.p.id, op.ack.Group, t.off}
					if chk.acked[k] {
						t.code = wire.CodeNoop // the same message twice
					}
					chk.acked[k] = true
				}
				if t.code != wire.CodeOK {
					code, item = t.code, j
					break
				}
			}
		case wire.TxnOpPosition:
			code = s.checkTxnPosition(ctx, c.Tenant, &op.pos)
		case wire.TxnOpStreamAck:
			code = s.resolveStreamAck(ctx, c.Tenant, &op.sack).code
		case wire.TxnOpKV:
			if kv == nil {
				kv = s.newKVTxn(ctx, c.Tenant)
			}
			op.kvRes = wire.KVResult{Code: wire.CodeOK, OK: true, FailedIndex: -1, Ops: make([]wire.KVOpResult, len(op.kv.Ops))}
			for j := range op.kv.Ops {
				r := kv.apply(&op.kv.Ops[j])
				op.kvRes.Ops[j] = r
				if op.kv.Ops[j].Required && !r.Applied {
					fail := wire.TxnFailure(wire.CodeConflict, -1, i, j)
					fail.Detail = r.Reason
					return nil, fail
				}
			}
		}
		if code != wire.CodeOK {
			return nil, wire.TxnFailure(code, -1, i, item)
		}
	}
	return kv, wire.TxnResult{Code: wire.CodeOK}
}

// leaseLive reports whether lease id exists, belongs to tenant and has not
// expired at the entry's time: in one of the partitions holding it here,
// for a shared lease.
func (s *Store) leaseLive(ctx *applyCtx, tenant wire.ID, id wire.ID) bool {
	live := false
	s.leaseHolders(id, func(ref leaseRef) bool {
		if ref.part.q.tenant != tenant {
			return true
		}
		cur := ref.part.cursors.get(ref.group)
		live = cur != nil && cur.lease != nil && cur.lease.id == id && !s.cursorPinned(ctx, ref.part.id, ref.group) &&
			(cur.lease.expiresMs > ctx.nowMs || s.cursorOwnPin(ctx, ref.part.id, ref.group))
		return !live
	})
	return live
}

// checkTxnPush checks that a push's partition exists (the engine created
// it before proposing) and that it stores no transaction id already stored
// (within the dedup window) or already pushed by this transaction: a
// duplicate rolls the transaction back.
func (s *Store) checkTxnPush(ctx *applyCtx, tenant wire.ID, op *txnOp, chk *txnCheck) (wire.Code, int) {
	c := &op.push
	q := s.queue(tenant, c.Queue)
	if q == nil || (c.Inc != 0 && q.inc != c.Inc) {
		return wire.CodeQueueNotFound, -1
	}
	p, code := s.pushTarget(ctx, q, c)
	if code != wire.CodeOK {
		return code, -1
	}
	if mustSeal(q, c, op.heads) {
		return wire.CodeSealRequired, -1
	}
	if c.Flags&wire.PushIndexTxn == 0 {
		return wire.CodeOK, -1
	}
	// A Streams cycle's sink push skips duplicates as a plain push does
	// (apply_streams.go).
	skip := c.Flags&wire.PushSkipDups != 0 && s.at(wire.FormatV3)
	if dups := s.findDups(ctx, q, p, op.heads); len(dups) > 0 && !skip {
		return wire.CodeDuplicate, dups[0].Index
	}
	partKey := strconv.FormatUint(p.id, 10)
	for i := range op.heads {
		if explicit, id := op.heads[i].head.TxnKey(); explicit {
			k := partKey + "\x00" + string(id)
			if chk.txnIDs[k] && !skip {
				return wire.CodeDuplicate, i
			}
			chk.txnIDs[k] = true
		}
	}
	return wire.CodeOK, -1
}

// checkTxnPosition checks that the partition a position names exists, or
// is created by an earlier push of the transaction.
func (s *Store) checkTxnPosition(ctx *applyCtx, tenant wire.ID, pos *wire.PositionOp) wire.Code {
	if pos.Group == "" {
		return wire.CodeBadRequest
	}
	q := s.queue(tenant, pos.Queue)
	if q == nil {
		return wire.CodeQueueNotFound
	}
	if s.partNamed(ctx, q, pos.Partition) == nil {
		return s.movedCode(q, -1, pos.Partition)
	}
	return wire.CodeOK
}

// applyPosition sets (or, with Reset, forgets) a group's position in a
// partition the transaction's check found.
func (s *Store) applyPosition(ctx *applyCtx, tenant wire.ID, pos *wire.PositionOp) wire.CodeResult {
	q := s.queue(tenant, pos.Queue)
	if q == nil || s.partNamed(ctx, q, pos.Partition) == nil {
		return wire.CodeResult{Code: wire.CodePartitionNotFound}
	}
	// A group new to the queue subscribes with the mode the position names;
	// an existing subscription is left as it is.
	s.subscribe(ctx, q, pos.Group, pos.SubMode, 0, 0)
	if pos.Reset {
		s.forgetPosition(ctx, q, s.partNamed(ctx, q, pos.Partition), pos.Group)
		return wire.CodeResult{Code: wire.CodeOK}
	}
	return s.applyCommitPosition(ctx, &wire.CommitPositionCmd{Tenant: tenant, Queue: pos.Queue, Group: pos.Group,
		Partition: pos.Partition, PartitionIndex: -1, Offset: pos.Offset, Metadata: pos.Metadata})
}

// forgetPosition drops a group's cursor (and lease) in p: the group starts
// the partition again where its subscription says.
func (s *Store) forgetPosition(ctx *applyCtx, q *queueState, p *partState, group string) {
	c := p.cursors.get(group)
	if c == nil {
		return
	}
	if c.lease != nil {
		s.unindexLease(c.lease.id, p)
	}
	q.dropLag(c)
	p.cursors.remove(group)
	ctx.del(cursorKey(p.id, group))
	ctx.recountLater(p)
	if sub := q.subs[group]; sub != nil && mayHaveNewFor(p, sub) {
		sub.ready.set(p.index)
	}
	ctx.touch(q)
}

// loadTxnDone notes whether any transaction result is stored.
func (s *Store) loadTxnDone() error {
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagTxnDone}, UpperBound: []byte{tagTxnDone + 1}})
	s.hasTxnDone = it.First()
	return it.Close()
}

// txnDoneSweeper deletes transaction results older than the window. Their
// keys start with the transaction's UUIDv7, whose first 48 bits are its
// creation time in unix ms, so one range deletion removes them all.
type txnDoneSweeper struct{}

func (txnDoneSweeper) name() string { return "txndone" }

func (t txnDoneSweeper) due(s *Store, nowMs int64) bool {
	return s.hasTxnDone && s.sweepDue(t.name(), nowMs, txnDoneIntervalMs)
}

func (t txnDoneSweeper) sweep(s *Store, ctx *applyCtx) {
	st := s.sweep(t.name())
	if !s.hasTxnDone || !st.passDue(ctx.nowMs, txnDoneIntervalMs) {
		return
	}
	st.lastPassMs = ctx.nowMs
	ctx.saveSweep(t.name(), st)
	var bound wire.ID
	cut := uint64(max(ctx.nowMs-txnDoneWindowMs, 0))
	for i := 0; i < 6; i++ {
		bound[i] = byte(cut >> (40 - 8*i))
	}
	_ = ctx.b.DeleteRange([]byte{tagTxnDone}, txnDoneKey(bound), nil)
	it := ctx.b.NewIter(&pebble.IterOptions{LowerBound: []byte{tagTxnDone}, UpperBound: []byte{tagTxnDone + 1}})
	s.hasTxnDone = it.First()
	ctx.closeIter(it)
}
