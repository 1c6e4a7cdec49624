package storage

import (
	"strconv"

	"github.com/queen-mq/queen/wire"
)

// Locks and semaphores live in the reserved KV namespace queen-locks, one
// key per slot ("<name>#<slot>"), so a lock's token is the slot key's KV
// version and a transaction can be fenced by a KV check on it (the guard).

func lockKey(name string, slot uint32) []byte {
	return strconv.AppendUint([]byte(name+"#"), uint64(slot), 10)
}

// applyLocks runs lock operations in order; each commits on its own.
func (s *Store) applyLocks(ctx *applyCtx, c *wire.LocksCmd) wire.LocksResult {
	res := wire.LocksResult{Code: wire.CodeOK, Ops: make([]wire.LockOpResult, len(c.Ops))}
	for i := range c.Ops {
		t := s.newKVTxn(ctx, c.Tenant)
		res.Ops[i] = t.lock(&c.Ops[i])
		t.commit()
	}
	return res
}

func (t *kvTxn) lock(op *wire.LockOp) wire.LockOpResult {
	limit := max(op.Limit, 1)
	switch op.Op {
	case wire.LockAcquire:
		return t.acquire(op, limit)
	case wire.LockRenew, wire.LockRelease:
		key := lockKey(op.Name, op.Slot)
		cur := t.read(wire.LocksNamespace, key)
		if cur == nil || cur.version != op.Token {
			return wire.LockOpResult{Reason: wire.LockReasonNotHolder, Slot: op.Slot, Holders: t.holders(op.Name, limit)}
		}
		if op.Op == wire.LockRelease {
			t.write(wire.LocksNamespace, key, nil)
			return wire.LockOpResult{OK: true, Slot: op.Slot, Token: op.Token}
		}
		e := t.extend(key, cur, op.TTLSec)
		return wire.LockOpResult{OK: true, Slot: op.Slot, Token: e.version, ExpiresMs: e.expiresMs}
	case wire.LockGet:
		return wire.LockOpResult{OK: true, Holders: t.holders(op.Name, limit)}
	}
	return wire.LockOpResult{Reason: "unknown_op"}
}

// acquire takes the first free slot. An owner that already holds a slot
// gets it back with its TTL extended and its token unchanged, so a retried
// acquire is harmless.
func (t *kvTxn) acquire(op *wire.LockOp, limit uint32) wire.LockOpResult {
	free := int64(-1)
	for slot := uint32(0); slot < limit; slot++ {
		key := lockKey(op.Name, slot)
		cur := t.read(wire.LocksNamespace, key)
		if cur == nil {
			if free < 0 {
				free = int64(slot)
			}
			continue
		}
		if op.Owner != "" && string(cur.value) == op.Owner {
			e := t.extend(key, cur, op.TTLSec)
			return wire.LockOpResult{OK: true, Slot: slot, Token: e.version, ExpiresMs: e.expiresMs}
		}
	}
	if free < 0 {
		reason := wire.LockReasonHeld
		if limit > 1 {
			reason = wire.LockReasonContended
		}
		return wire.LockOpResult{Reason: reason, Holders: t.holders(op.Name, limit)}
	}
	slot := uint32(free)
	e := t.put(wire.LocksNamespace, lockKey(op.Name, slot), []byte(op.Owner), op.TTLSec)
	return wire.LockOpResult{OK: true, Slot: slot, Token: e.version, ExpiresMs: e.expiresMs}
}

// extend renews a held slot's TTL without changing its version: the token,
// and every guard built from it, stays valid.
func (t *kvTxn) extend(key []byte, cur *kvEntry, ttlSec uint32) *kvEntry {
	e := &kvEntry{version: cur.version, value: cur.value}
	if ttlSec > 0 {
		e.expiresMs = t.ctx.nowMs + int64(ttlSec)*1000
	}
	t.write(wire.LocksNamespace, key, e)
	return e
}

func (t *kvTxn) holders(name string, limit uint32) []wire.LockHolder {
	var out []wire.LockHolder
	for slot := uint32(0); slot < limit; slot++ {
		if cur := t.read(wire.LocksNamespace, lockKey(name, slot)); cur != nil {
			out = append(out, wire.LockHolder{Slot: slot, Owner: string(cur.value), Token: cur.version, ExpiresMs: cur.expiresMs})
		}
	}
	return out
}
