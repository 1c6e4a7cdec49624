package storage

import (
	"bytes"
	"encoding/binary"
	"strconv"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// kvEntry is one key's stored state.
type kvEntry struct {
	version   uint64
	expiresMs int64 // 0: never
	value     []byte
}

func (e *kvEntry) encode() []byte {
	w := wire.Writer{B: make([]byte, 0, 16+len(e.value))}
	w.Uvarint(e.version)
	w.Varint(e.expiresMs)
	w.Fixed(e.value)
	return w.B
}

func decodeKVEntry(b []byte) (kvEntry, bool) {
	r := wire.NewReader(b)
	e := kvEntry{version: r.Uvarint(), expiresMs: r.Varint()}
	e.value = append([]byte(nil), r.Rest()...)
	return e, r.Err() == nil
}

func (e *kvEntry) live(nowMs int64) bool { return e.expiresMs == 0 || e.expiresMs > nowMs }

// kvTxn stages one KV command's writes so that a failed required operation
// can drop them all: reads see the staged state first, then the batch.
type kvTxn struct {
	s       *Store
	ctx     *applyCtx
	tenant  wire.ID
	version uint64 // the KV version counter as staged: the group's, or from formatTenantCounters the tenant's
	base    uint64 // the counter before this command
	staged  map[string]*kvEntry
	order   []string // staged keys in first-write order (deterministic commit)
	ns      map[string]string
	keys    map[string][]byte
}

func (s *Store) newKVTxn(ctx *applyCtx, tenant wire.ID) *kvTxn {
	version := s.kvVersion
	if s.tenantCountersOn() {
		version = s.lastTenantID(ctx, counterKV, tenant, s.kvVersion)
	}
	return &kvTxn{s: s, ctx: ctx, tenant: tenant, version: version, base: version,
		staged: map[string]*kvEntry{}, ns: map[string]string{}, keys: map[string][]byte{}}
}

// read returns a key's live state (nil when absent or expired).
func (t *kvTxn) read(ns string, key []byte) *kvEntry {
	k := string(kvKey(t.tenant, ns, key))
	if e, ok := t.staged[k]; ok {
		if e == nil || !e.live(t.ctx.nowMs) {
			return nil
		}
		return e
	}
	v, ok := t.ctx.get([]byte(k))
	if !ok {
		return nil
	}
	e, ok := decodeKVEntry(v)
	if !ok || !e.live(t.ctx.nowMs) {
		return nil
	}
	return &e
}

// write stages a key's new state (nil deletes it).
func (t *kvTxn) write(ns string, key []byte, e *kvEntry) {
	k := string(kvKey(t.tenant, ns, key))
	if _, seen := t.staged[k]; !seen {
		t.order = append(t.order, k)
		t.ns[k], t.keys[k] = ns, key
	}
	t.staged[k] = e
}

// put stages a new value with a fresh version.
func (t *kvTxn) put(ns string, key, value []byte, ttlSec uint32) *kvEntry {
	t.version++
	e := &kvEntry{version: t.version, value: value}
	if ttlSec > 0 {
		e.expiresMs = t.ctx.nowMs + int64(ttlSec)*1000
	}
	t.write(ns, key, e)
	return e
}

// commit writes the staged state, maintaining the TTL index.
func (t *kvTxn) commit() {
	ctx := t.ctx
	for _, k := range t.order {
		ns, key := t.ns[k], t.keys[k]
		if v, ok := ctx.get([]byte(k)); ok {
			if old, ok := decodeKVEntry(v); ok && old.expiresMs != 0 {
				ctx.del(kvTTLKey(old.expiresMs, t.tenant, ns, key))
			}
		}
		e := t.staged[k]
		if e == nil {
			ctx.del([]byte(k))
			continue
		}
		ctx.set([]byte(k), e.encode())
		if e.expiresMs != 0 {
			ctx.set(kvTTLKey(e.expiresMs, t.tenant, ns, key), nil)
		}
	}
	switch {
	case t.version == t.base:
	case t.s.tenantCountersOn():
		setTenantID(ctx, counterKV, t.tenant, t.version)
	default:
		t.s.kvVersion = t.version
		ctx.set(keyKVVersion, binary.BigEndian.AppendUint64(nil, t.version))
	}
}

func item(key []byte, e *kvEntry) wire.KVItem {
	if e == nil {
		return wire.KVItem{Key: key}
	}
	return wire.KVItem{Key: key, Value: e.value, Version: e.version, ExpiresMs: e.expiresMs}
}

// applyKV runs a KV command's operations in order against staged state and
// commits them together; a failed required operation aborts them all.
func (s *Store) applyKV(ctx *applyCtx, c *wire.KVCmd) wire.KVResult {
	res := wire.KVResult{Code: wire.CodeOK, OK: true, FailedIndex: -1, Ops: make([]wire.KVOpResult, len(c.Ops))}
	t := s.newKVTxn(ctx, c.Tenant)
	for i := range c.Ops {
		op := &c.Ops[i]
		res.Ops[i] = t.apply(op)
		if op.Required && !res.Ops[i].Applied {
			res.OK, res.FailedIndex = false, i
			for j := range res.Ops {
				if j != i {
					res.Ops[j].Applied = false
					if res.Ops[j].Reason == "" {
						res.Ops[j].Reason = wire.KVReasonAborted
					}
				}
			}
			return res
		}
	}
	t.commit()
	return res
}

// apply runs one operation against the staged state.
func (t *kvTxn) apply(op *wire.KVOp) wire.KVOpResult {
	cur := t.read(op.NS, op.Key)
	r := wire.KVOpResult{Found: cur != nil, Item: item(op.Key, cur)}
	switch op.Op {
	case wire.KVGet, wire.KVGetMany, wire.KVGetPrefix:
	default:
		if t.s.keyPinned(t.ctx, string(kvKey(t.tenant, op.NS, op.Key))) {
			r.Reason = wire.KVReasonBusy
			return r
		}
	}
	expectHolds := func() bool {
		if !op.HasExpect {
			return true
		}
		if cur == nil {
			return op.Expect == 0
		}
		return cur.version == op.Expect
	}
	switch op.Op {
	case wire.KVGet:
		r.Applied = true
	case wire.KVGetMany:
		r.Applied = true
		for _, k := range op.Keys {
			r.Items = append(r.Items, item(k, t.read(op.NS, k)))
		}
	case wire.KVGetPrefix:
		r.Applied = true
		r.Items = t.s.kvScan(t.ctx.b, t.tenant, op.NS, op.Key, nil, int(op.Limit), t.ctx.nowMs)
	case wire.KVCheck:
		r.Applied = expectHolds()
		if !r.Applied {
			r.Reason = wire.KVReasonVersionMismatch
		}
	case wire.KVPut:
		if !expectHolds() {
			r.Reason = wire.KVReasonVersionMismatch
			break
		}
		r.Applied, r.Found = true, true
		r.Item = item(op.Key, t.put(op.NS, op.Key, op.Value, op.TTLSec))
	case wire.KVPutIfAbsent:
		if cur != nil {
			r.Reason = wire.KVReasonExists
			break
		}
		r.Applied, r.Found = true, true
		r.Item = item(op.Key, t.put(op.NS, op.Key, op.Value, op.TTLSec))
	case wire.KVDelete:
		switch {
		case cur == nil:
			r.Reason = wire.KVReasonNotFound
		case !expectHolds():
			r.Reason = wire.KVReasonVersionMismatch
		default:
			t.write(op.NS, op.Key, nil)
			r.Applied = true
		}
	case wire.KVIncr:
		r = t.incr(op, cur, r, expectHolds())
	default:
		r.Reason = "unknown_op"
	}
	return r
}

// incr adds Delta to a decimal integer value (absent counts as 0), within
// optional bounds; the TTL of an existing key is kept unless one is given.
func (t *kvTxn) incr(op *wire.KVOp, cur *kvEntry, r wire.KVOpResult, expectOK bool) wire.KVOpResult {
	if !expectOK {
		r.Reason = wire.KVReasonVersionMismatch
		return r
	}
	var n int64
	if cur != nil {
		v, err := strconv.ParseInt(string(bytes.TrimSpace(cur.value)), 10, 64)
		if err != nil {
			r.Reason = wire.KVReasonNotANumber
			return r
		}
		n = v
	}
	sum := n + op.Delta
	if (op.Delta > 0 && sum < n) || (op.Delta < 0 && sum > n) || (op.HasMin && sum < op.Min) || (op.HasMax && sum > op.Max) {
		r.Reason = wire.KVReasonOutOfBounds
		return r
	}
	ttl := op.TTLSec
	e := t.put(op.NS, op.Key, strconv.AppendInt(nil, sum, 10), ttl)
	if ttl == 0 && cur != nil && cur.expiresMs != 0 {
		e.expiresMs = cur.expiresMs
	}
	r.Applied, r.Found, r.Item = true, true, item(op.Key, e)
	return r
}

// kvScan lists live keys of a namespace starting with prefix, after the
// key after (exclusive), up to limit (capped at wire.MaxKVPrefixResult).
func (s *Store) kvScan(src iterSource, tenant wire.ID, ns string, prefix, after []byte, limit int, nowMs int64) []wire.KVItem {
	if limit <= 0 || limit > wire.MaxKVPrefixResult {
		limit = wire.MaxKVPrefixResult
	}
	lower := kvKey(tenant, ns, prefix)
	it := src.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	defer it.Close()
	start := lower
	if len(after) > 0 {
		start = append(kvKey(tenant, ns, after), 0)
	}
	base := len(kvKey(tenant, ns, nil))
	var out []wire.KVItem
	for it.SeekGE(start); it.Valid() && len(out) < limit; it.Next() {
		e, ok := decodeKVEntry(it.Value())
		if !ok || !e.live(nowMs) {
			continue
		}
		out = append(out, item(append([]byte(nil), it.Key()[base:]...), &e))
	}
	return out
}
